"""What every source reader shares: the result and its report, the tally of repairs and drops,
streaming JSON readers that say where a file is broken, and field checks that name the record.

A reader either repairs an oddity and counts it (``IngestTally``), or raises ``InputDataError``
naming the file, the record and the field. Nothing is fixed silently.
"""

from __future__ import annotations

import codecs
import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from mera_pipelines.core.errors import InputDataError
from mera_pipelines.core.records import Conversation, Question, Turn
from mera_pipelines.core.temporal import parse_timestamp, to_iso

NOTES_PER_KIND = 5  # examples kept per dropped/repaired kind: enough to find them, not a log
# A turn longer than this is not a conversation turn but a pasted file or a broken export; it
# would blow up every prompt it lands in. The longest turns of LoCoMo and LongMemEval are far
# below (a few thousand characters).
MAX_TURN_CHARS = 100_000


@dataclass
class IngestResult:
    """The canonical tables read from one source file, and what was dropped or repaired."""

    conversations: list[Conversation]
    turns: list[Turn]
    questions: list[Question]
    dropped: dict[str, int]
    repaired: dict[str, int]
    notes: list[str]
    source_format: str = ""

    def report(self) -> dict[str, Any]:
        """The ingest report contract (docs/data_formats.md, "Ingest report")."""
        by_category = Counter(question.category for question in self.questions)
        return {
            "source_format": self.source_format,
            "conversations": len(self.conversations),
            "memories": len({conversation.memory_id for conversation in self.conversations}),
            "sessions": sum(conversation.n_sessions for conversation in self.conversations),
            "turns": len(self.turns),
            "questions": len(self.questions),
            "questions_by_category": dict(sorted(by_category.items())),
            "dropped": dict(self.dropped),
            "repaired": dict(self.repaired),
            "notes": list(self.notes),
        }


class IngestTally:
    """Counts of what was dropped or repaired, with a few record ids per kind as notes.

    Kinds named at construction appear in the report even at zero, so that a report says
    "checked, none found" rather than leaving the reader to guess.
    """

    def __init__(self, dropped_kinds: list[str], repaired_kinds: list[str]) -> None:
        self.dropped: dict[str, int] = dict.fromkeys(dropped_kinds, 0)
        self.repaired: dict[str, int] = dict.fromkeys(repaired_kinds, 0)
        self.notes: list[str] = []
        self._noted: Counter[str] = Counter()

    def drop(self, kind: str, example: str) -> None:
        self.dropped[kind] = self.dropped.get(kind, 0) + 1
        self._note(f"dropped {kind}", example)

    def repair(self, kind: str, example: str) -> None:
        self.repaired[kind] = self.repaired.get(kind, 0) + 1
        self._note(f"repaired {kind}", example)

    def summary(self, text: str) -> None:
        """A note about a rule applied to every record alike (not a repair of one record)."""
        self.notes.append(text)

    def _note(self, label: str, example: str) -> None:
        self._noted[label] += 1
        if self._noted[label] <= NOTES_PER_KIND:
            self.notes.append(f"{label}: {example}")

    def result(
        self,
        source_format: str,
        conversations: list[Conversation],
        turns: list[Turn],
        questions: list[Question],
    ) -> IngestResult:
        return IngestResult(
            conversations=conversations,
            turns=turns,
            questions=questions,
            dropped=dict(self.dropped),
            repaired=dict(self.repaired),
            notes=list(self.notes),
            source_format=source_format,
        )


# --------------------------------------------------------------------------- records and fields


@dataclass(frozen=True)
class RecordRef:
    """Where a value lives, for error messages: the file and a record such as ``qa[17]``."""

    path: Path
    record: str

    def error(self, field_name: str, problem: str) -> InputDataError:
        return InputDataError(str(self.path), self.record, field_name, problem)

    def within(self, suffix: str) -> RecordRef:
        return RecordRef(self.path, f"{self.record} {suffix}")


_TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean",
    list: "a list",
    dict: "an object",
}


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def require_object(value: Any, ref: RecordRef, field_name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ref.error(field_name, f"expected a JSON object, got {type_name(value)}")
    return value


def require(obj: dict[str, Any], key: str, expected: type, ref: RecordRef, field_name: str) -> Any:
    """The value of a required key, of exactly the expected JSON type (a bool is not an int)."""
    if key not in obj or obj[key] is None:
        raise ref.error(field_name, "required field is missing")
    return _checked(obj[key], expected, ref, field_name)


def optional(obj: dict[str, Any], key: str, expected: type, ref: RecordRef, field_name: str) -> Any:
    """The value of an optional key, or None when absent or null."""
    if obj.get(key) is None:
        return None
    return _checked(obj[key], expected, ref, field_name)


def require_turn_text(obj: dict[str, Any], key: str, ref: RecordRef, field_name: str) -> str:
    """A turn's text: a required string of at most MAX_TURN_CHARS characters."""
    text = require(obj, key, str, ref, field_name)
    if len(text) > MAX_TURN_CHARS:
        raise ref.error(
            field_name,
            f"the turn is {len(text):,} characters long, more than the {MAX_TURN_CHARS:,} a "
            "conversation turn can have (a pasted file or a broken export?)",
        )
    return text


def _checked(value: Any, expected: type, ref: RecordRef, field_name: str) -> Any:
    if isinstance(value, bool) and expected is not bool:
        raise ref.error(field_name, f"expected {_TYPE_NAMES[expected]}, got a boolean")
    if not isinstance(value, expected):
        raise ref.error(field_name, f"expected {_TYPE_NAMES[expected]}, got {type_name(value)}")
    return value


def answer_text(value: Any, ref: RecordRef, field_name: str, tally: IngestTally) -> str:
    """Answers are strings; the benchmarks sometimes store a year or a count as a JSON number."""
    if value is None:
        raise ref.error(field_name, "required field is missing")
    if isinstance(value, bool):
        raise ref.error(field_name, "expected a string, got a boolean")
    if isinstance(value, int):
        tally.repair("answer_int_to_str", f"{ref.record} {field_name}={value}")
        return str(value)
    if isinstance(value, float):
        tally.repair("answer_float_to_str", f"{ref.record} {field_name}={value}")
        return str(int(value)) if value.is_integer() else str(value)
    if not isinstance(value, str):
        raise ref.error(field_name, f"expected a string, got {type_name(value)}")
    if not value.strip():
        raise ref.error(field_name, "the answer is empty: a question needs a reference answer")
    return value


def session_time(
    raw: Any, ref: RecordRef, field_name: str, tally: IngestTally
) -> tuple[datetime | None, str | None]:
    """(parsed time, raw string). A missing or unparseable date is kept as None and counted."""
    if raw is None:
        tally.repair("session_date_missing", f"{ref.record} {field_name}")
        return None, None
    if not isinstance(raw, str):
        raise ref.error(field_name, f"expected a date string, got {type_name(raw)}")
    moment = wall_clock(parse_timestamp(raw), ref, field_name, tally)
    if moment is None:
        tally.repair("session_date_unparsed", f"{ref.record} {field_name}={raw!r}")
    return moment, raw


def wall_clock(
    moment: datetime | None, ref: RecordRef, field_name: str, tally: IngestTally
) -> datetime | None:
    """Times are naive local wall-clock times, as in both benchmarks; an ISO offset is dropped.

    Mixing aware and naive times would make sorting fail, and relative expressions ("this
    morning") refer to the speaker's local time, not UTC.
    """
    if moment is None or moment.tzinfo is None:
        return moment
    tally.repair("time_zone_dropped", f"{ref.record} {field_name}")
    return moment.replace(tzinfo=None)


def latest_iso(moments: list[datetime | None]) -> str | None:
    known = [moment for moment in moments if moment is not None]
    return to_iso(max(known)) if known else None


def question_date_or_last_session(
    raw: Any,
    ref: RecordRef,
    field_name: str,
    last_session_iso: str | None,
    tally: IngestTally,
) -> str | None:
    """Questions are asked after the whole history: without a usable date, use the last session's."""
    if raw is not None and not isinstance(raw, str):
        raise ref.error(field_name, f"expected a date string, got {type_name(raw)}")
    moment = wall_clock(parse_timestamp(raw), ref, field_name, tally)
    if moment is not None:
        return to_iso(moment)
    if raw is not None:
        tally.repair("question_date_unparsed", f"{ref.record} {field_name}={raw!r}")
    tally.repair("question_date_from_last_session", ref.record)
    return last_session_iso


# --------------------------------------------------------------------------- evidence ids

_EVIDENCE_SEPARATORS = re.compile(r"[;,\s]+")
_STRAY_COLON = re.compile(r"^D:(\d+:\d+)$")  # "D:11:26" written for "D11:26"


def resolve_evidence(
    raw_ids: list[Any], turn_ids: set[str], ref: RecordRef, field_name: str, tally: IngestTally
) -> list[str]:
    """Gold turn ids that name a turn of this memory, in order, without duplicates.

    Malformed strings ("D8:6; D9:17", "D9:1 D4:4") are split; "D:11:26" becomes "D11:26" when
    that names a turn; ids naming no turn ("D", a turn past the session's end) are dropped.
    """
    if not raw_ids:
        tally.drop("evidence_empty", ref.record)
        return []
    resolved: list[str] = []
    for position, raw in enumerate(raw_ids):
        if not isinstance(raw, str):
            raise ref.error(
                f"{field_name}[{position}]", f"expected a turn id string, got {type_name(raw)}"
            )
        parts = [part for part in _EVIDENCE_SEPARATORS.split(raw) if part]
        if len(parts) > 1:
            tally.repair("evidence_split", f"{ref.record} {field_name}[{position}]={raw!r}")
        for part in parts:
            turn_id = _resolve_one(part, turn_ids, ref, tally)
            if turn_id is None:
                continue
            if turn_id in resolved:
                tally.repair("evidence_duplicate_removed", f"{ref.record} {turn_id}")
                continue
            resolved.append(turn_id)
        if not parts:
            tally.drop("evidence_ids_unresolved", f"{ref.record} {field_name}[{position}]={raw!r}")
    if not resolved:
        tally.drop("evidence_none_resolved", ref.record)
    return resolved


def _resolve_one(part: str, turn_ids: set[str], ref: RecordRef, tally: IngestTally) -> str | None:
    if part in turn_ids:
        return part
    fixed = _STRAY_COLON.sub(r"D\1", part)
    if fixed != part and fixed in turn_ids:
        tally.repair("evidence_id_fixed", f"{ref.record} {part!r} -> {fixed!r}")
        return fixed
    tally.drop("evidence_ids_unresolved", f"{ref.record} {part!r} names no turn")
    return None


# --------------------------------------------------------------------------- files


def check_file(path: Path) -> None:
    if not path.exists():
        raise InputDataError(str(path), "(file)", "source.path", "the file does not exist")
    if not path.is_file():
        raise InputDataError(
            str(path), "(file)", "source.path", "expected a file, found a directory"
        )


class _Utf8Chunks:
    """Strict UTF-8 decoding of a binary file, chunk by chunk, that can say where a bad byte is."""

    def __init__(self, path: Path, handle: BinaryIO) -> None:
        self._path = path
        self._handle = handle
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self._bytes_done = 0
        self._lines_done = 0
        self._at_start = True

    def read(self, n_chars: int) -> str:
        """Up to about n_chars of text; "" only at the end of the file."""
        while True:
            data = self._handle.read(n_chars)
            text = self._decode(data, final=not data)
            if text or not data:  # a chunk can end inside a multi-byte character: read on
                return text

    def _decode(self, data: bytes, final: bool) -> str:
        pending = len(self._decoder.getstate()[0])
        try:
            text = self._decoder.decode(data, final=final)
        except UnicodeDecodeError as exc:
            offset = self._bytes_done - pending + exc.start
            line = self._lines_done + exc.object[: exc.start].count(b"\n") + 1
            raise InputDataError(
                str(self._path),
                f"line {line}",
                "(encoding)",
                f"the file is not valid UTF-8 (bad byte at offset {offset}); save it as UTF-8",
            ) from None
        self._bytes_done += len(data)
        self._lines_done += text.count("\n")
        if self._at_start and text:
            self._at_start = False
            text = text.removeprefix("\ufeff")  # a byte-order mark is encoding, not data
        return text


_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_SCALAR_STARTS = {'"': "a string", "t": "a boolean", "f": "a boolean", "n": "null"}


def iter_json_array(path: Path, item_name: str, chunk_chars: int = 1 << 20) -> Iterator[Any]:
    """The elements of a file holding one top-level JSON list, parsed one at a time.

    Only the current element and one chunk are held in memory, so LongMemEval-M (2.75 GB)
    streams. Syntax errors name the line and column, like ``json.load`` would.
    """
    with path.open("rb") as handle:
        scanner = _JsonArrayScanner(path, _Utf8Chunks(path, handle), item_name, chunk_chars)
        yield from scanner.elements()


class _JsonArrayScanner:
    def __init__(self, path: Path, chunks: _Utf8Chunks, item_name: str, chunk_chars: int) -> None:
        self._path = path
        self._chunks = chunks
        self._item_name = item_name
        self._chunk_chars = chunk_chars
        self._buffer = ""
        self._pos = 0
        self._eof = False
        self._lines_before = 0  # newlines in text already discarded from the buffer
        self._column_before = 0  # characters after the last discarded newline

    def elements(self) -> Iterator[Any]:
        first = self._peek()
        if first != "[":
            raise self._top_level_error(first)
        self._pos += 1
        if self._peek() == "]":
            self._pos += 1
            self._expect_end()
            return
        while True:
            if self._peek() is None:
                raise self._syntax_error(self._pos, "the file ends inside the top-level list")
            yield self._decode_value()
            after = self._peek()
            if after == ",":
                self._pos += 1
            elif after == "]":
                self._pos += 1
                self._expect_end()
                return
            elif after is None:
                raise self._syntax_error(
                    self._pos, "the file ends inside the top-level list (truncated?)"
                )
            else:
                raise self._syntax_error(self._pos, "expected ',' or ']' after a list element")

    def _decode_value(self) -> Any:
        while True:
            try:
                value, end = _DECODER.raw_decode(self._buffer, self._pos)
            except json.JSONDecodeError as exc:
                if not self._eof and self._may_continue(exc):
                    self._fill()
                    continue
                raise self._syntax_error(exc.pos, exc.msg) from None
            if end == len(self._buffer) and not self._eof:
                self._fill()  # a number or literal could go on in the next chunk
                continue
            self._pos = end
            return value

    def _may_continue(self, exc: json.JSONDecodeError) -> bool:
        """True when the error may only mean the element goes on past the buffer."""
        near_end = exc.pos >= len(self._buffer) - 16
        return near_end or exc.msg.startswith("Unterminated string")

    def _peek(self) -> str | None:
        while True:
            self._pos = _WHITESPACE.match(self._buffer, self._pos).end()
            if self._pos < len(self._buffer):
                return self._buffer[self._pos]
            if self._eof:
                return None
            self._fill()

    def _fill(self) -> None:
        # Reading at least as much as is already buffered keeps retries of a long element linear.
        self._discard_consumed()
        text = self._chunks.read(max(self._chunk_chars, len(self._buffer)))
        if text:
            self._buffer += text
        else:
            self._eof = True

    def _discard_consumed(self) -> None:
        consumed = self._buffer[: self._pos]
        newlines = consumed.count("\n")
        if newlines:
            self._lines_before += newlines
            self._column_before = len(consumed) - consumed.rfind("\n") - 1
        else:
            self._column_before += len(consumed)
        self._buffer = self._buffer[self._pos :]
        self._pos = 0

    def _expect_end(self) -> None:
        if self._peek() is not None:
            raise self._syntax_error(self._pos, "extra data after the top-level list")

    def _line_column(self, pos: int) -> tuple[int, int]:
        newlines = self._buffer.count("\n", 0, pos)
        if newlines:
            return self._lines_before + newlines + 1, pos - self._buffer.rfind("\n", 0, pos)
        return self._lines_before + 1, self._column_before + pos + 1

    def _syntax_error(self, pos: int, problem: str) -> InputDataError:
        line, column = self._line_column(pos)
        return InputDataError(
            str(self._path),
            f"line {line} column {column}",
            "(JSON syntax)",
            f"broken JSON: {problem}",
        )

    def _top_level_error(self, first: str | None) -> InputDataError:
        if first is None:
            problem = "the file is empty"
        elif first == "{":
            problem = "found a JSON object"
        elif first in _SCALAR_STARTS:
            problem = f"found {_SCALAR_STARTS[first]}"
        elif first == "-" or first.isdigit():
            problem = "found a number"
        else:
            return self._syntax_error(self._pos, f"not JSON: unexpected character {first!r}")
        return InputDataError(
            str(self._path),
            "top level",
            "(root)",
            f"expected a JSON list of {self._item_name}, {problem}",
        )


def iter_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed object) for each non-blank line, one line in memory at a time."""
    with path.open("rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputDataError(
                    str(path),
                    f"line {line_number}",
                    "(encoding)",
                    f"the line is not valid UTF-8 (bad byte at column {exc.start + 1}); save the file as UTF-8",
                ) from None
            if line_number == 1:
                text = text.removeprefix("\ufeff")
            if not text.strip():
                continue
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                raise InputDataError(
                    str(path),
                    f"line {line_number}",
                    "(JSON syntax)",
                    f"broken JSON at column {exc.colno}: {exc.msg}",
                ) from None
            yield line_number, value


# --------------------------------------------------------------------------- building blocks


@dataclass
class SessionDraft:
    """A session read from a file, before it gets its place in time order."""

    session_id: str
    moment: datetime | None
    raw_time: str | None
    items: list[Any]  # the raw turns, format-specific
    ref: RecordRef
    field_prefix: str  # e.g. "haystack_sessions[3]", for errors inside the session


def order_sessions(
    sessions: list[SessionDraft], memory_ref: RecordRef, tally: IngestTally
) -> list[SessionDraft]:
    """Sessions in time order (stable). If any date is unknown the file order is kept as is."""
    if any(session.moment is None for session in sessions):
        return sessions
    ordered = sorted(sessions, key=lambda session: session.moment)
    if any(a is not b for a, b in zip(ordered, sessions, strict=True)):
        tally.repair("session_order_sorted", memory_ref.record)
    return ordered


def speakers_in_order(turns: list[Turn]) -> list[str]:
    return list(dict.fromkeys(turn.speaker for turn in turns))
