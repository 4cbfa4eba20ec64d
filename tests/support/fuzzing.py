"""Mutated benchmark files for property-based tests of the source readers.

A *mutation* takes a valid record list (LoCoMo samples, LongMemEval questions, JSONL objects)
and breaks it the way real files break: dropped or renamed fields, wrong types, duplicate ids,
huge turns, evidence naming no turn, empty conversations, non-UTF-8 bytes, truncation, or a
wrong format name. ``read_outcome`` then reads the file with the real reader and classifies
what happened; anything but a clean ``MeraError`` or a valid result is a crash.

Used by ``tests/core/test_sources_fuzz.py`` (hypothesis) and by ``python -m
tests.support.fuzz_readers`` (prints how many bad inputs of each kind were tried).
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from mera_pipelines.core.errors import ConfigError, InputDataError, MeraError
from mera_pipelines.core.sources import IngestResult, read_source
from mera_pipelines.core.sources.base import MAX_TURN_CHARS

FIXTURES = Path(__file__).parents[1] / "fixtures" / "sources"
FORMATS = ("locomo", "longmemeval", "jsonl")

TREE_KINDS = ("drop_field", "rename_field", "wrong_type")
RECORD_KINDS = ("duplicate_record", "duplicate_turn", "huge_turn", "evidence_no_turn")
RECORD_KINDS += ("empty_conversation",)
BYTE_KINDS = ("non_utf8", "truncated")
FORMAT_KINDS = ("unknown_format", "wrong_format")
KINDS = TREE_KINDS + RECORD_KINDS + BYTE_KINDS + FORMAT_KINDS

# Values of every JSON type (and a few awkward ones) to put where another type belongs.
WRONG_VALUES: list[Any] = [None, True, 0, -1, 2.5, "", "x", [], [1], {}, {"a": 1}, "\x00", "🙂"]


def load_valid(fmt: str) -> list[Any]:
    """The valid base records of a format (the quirks fixtures, which also exercise repairs)."""
    if fmt == "jsonl":
        lines = (FIXTURES / "turns_questions.jsonl").read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]
    name = {"locomo": "locomo_quirks.json", "longmemeval": "longmemeval_quirks.json"}[fmt]
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def encode(fmt: str, records: list[Any]) -> bytes:
    if fmt == "jsonl":
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")
    return json.dumps(records, ensure_ascii=False).encode("utf-8")


# ---------------------------------------------------------------------------- tree mutations


def paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path into a JSON value (dict keys and list indices), parents first."""
    found: list[tuple] = []
    if isinstance(value, dict | list):
        for key, child in value.items() if isinstance(value, dict) else enumerate(value):
            found.append((*prefix, key))
            found.extend(paths(child, (*prefix, key)))
    return found


def _parent(data: Any, path: tuple) -> Any:
    for key in path[:-1]:
        data = data[key]
    return data


def apply_tree_mutation(records: list[Any], kind: str, path: tuple, value: Any) -> None:
    parent, key = _parent(records, path), path[-1]
    if kind == "drop_field":
        del parent[key]
    elif kind == "rename_field":
        if isinstance(parent, dict):
            parent[f"{key}_renamed"] = parent.pop(key)
        else:
            parent[key] = {"renamed": parent[key]}
    elif kind == "wrong_type":
        parent[key] = value
    else:
        raise ValueError(kind)


# -------------------------------------------------------------------------- record mutations


def _turn_lists(fmt: str, records: list[Any]) -> list[list[dict]]:
    """The lists of turn objects of a file (LoCoMo / LongMemEval sessions)."""
    if fmt == "locomo":
        return [
            value
            for sample in records
            for key, value in sample["conversation"].items()
            if key.startswith("session_") and isinstance(value, list)
        ]
    if fmt == "longmemeval":
        return [session for item in records for session in item["haystack_sessions"]]
    return [[r for r in records if r.get("type") == "turn"]]


def apply_record_mutation(fmt: str, records: list[Any], kind: str, pick: int) -> list[Any]:
    """Returns the mutated records (some mutations rebuild the list)."""
    turn_lists = [turns for turns in _turn_lists(fmt, records) if turns]
    turns = turn_lists[pick % len(turn_lists)]
    turn = turns[pick % len(turns)]
    if kind == "duplicate_record":
        return [*records, copy.deepcopy(records[pick % len(records)])]
    if kind == "duplicate_turn":
        if fmt == "jsonl":  # turn lines live in the record list itself; only given ids clash
            with_id = [r for r in records if r.get("type") == "turn" and r.get("turn_id")]
            return [*records, copy.deepcopy(with_id[pick % len(with_id)])]
        turns.append(copy.deepcopy(turn))
    elif kind == "huge_turn":
        text_key = {"locomo": "text", "longmemeval": "content", "jsonl": "text"}[fmt]
        turn[text_key] = "word " * (MAX_TURN_CHARS // 5 + 1 + pick % 100)
    elif kind == "evidence_no_turn":
        _break_evidence(fmt, records, pick)
    elif kind == "empty_conversation":
        return _empty_conversation(fmt, records, pick)
    else:
        raise ValueError(kind)
    return records


def _break_evidence(fmt: str, records: list[Any], pick: int) -> None:
    if fmt == "longmemeval":  # evidence is has_answer on turns: mark none
        for session in records[pick % len(records)]["haystack_sessions"]:
            for turn in session:
                turn.pop("has_answer", None)
        return
    questions = (
        [q for sample in records for q in sample["qa"]]
        if fmt == "locomo"
        else [r for r in records if r.get("type") == "question"]
    )
    questions[pick % len(questions)]["evidence"] = ["D99:99", "no-such-turn", ""][: 1 + pick % 3]


def _empty_conversation(fmt: str, records: list[Any], pick: int) -> list[Any]:
    if fmt == "locomo":
        body = records[pick % len(records)]["conversation"]
        for key in [k for k in body if k.startswith("session_") and not k.endswith("time")]:
            body[key] = []
        return records
    if fmt == "longmemeval":
        item = records[pick % len(records)]
        item["haystack_sessions"] = [[] for _ in item["haystack_sessions"]]
        return records
    return [r for r in records if r.get("type") != "turn"]


# ---------------------------------------------------------------------------- byte mutations


def apply_byte_mutation(data: bytes, kind: str, position: int) -> bytes:
    cut = position % (len(data) + 1)
    if kind == "non_utf8":
        return data[:cut] + b"\xff\xfe\xc3" + data[cut:]
    if kind == "truncated":
        return data[: cut % max(1, len(data) - 1)]
    raise ValueError(kind)


# ------------------------------------------------------------------------------ the outcome


@dataclass(frozen=True)
class BadInput:
    base: str  # the format the records were written in
    fmt: str  # the format the file is read as ("nonsense" for unknown_format)
    kind: str
    data: bytes


@st.composite
def bad_inputs(draw: st.DrawFn, fmt: str, kinds: tuple[str, ...] = KINDS) -> BadInput:
    kind = draw(st.sampled_from(kinds))
    records = load_valid(fmt)
    read_as = fmt
    if kind in TREE_KINDS:
        # one to three breaks in the same file: errors must not depend on meeting only one
        for _ in range(draw(st.integers(1, 3))):
            candidates = paths(records)
            if not candidates:
                break
            path = draw(st.sampled_from(candidates))
            value = copy.deepcopy(draw(st.sampled_from(WRONG_VALUES)))
            apply_tree_mutation(records, kind, path, value)
    elif kind in RECORD_KINDS:
        records = apply_record_mutation(fmt, records, kind, draw(st.integers(0, 10_000)))
    elif kind == "unknown_format":
        read_as = draw(st.sampled_from(["nonsense", "", "LOCOMO ", "json"]))
    elif kind == "wrong_format":
        read_as = draw(st.sampled_from([f for f in FORMATS if f != fmt]))
    data = encode(fmt, records)
    if kind in BYTE_KINDS:
        data = apply_byte_mutation(data, kind, draw(st.integers(0, len(data))))
    return BadInput(fmt, read_as, kind, data)


def read_outcome(path: Path, fmt: str) -> str:
    """ "error" (a clean MeraError naming file, record and field) or "valid"; AssertionError
    when the error is unclear or the result is inconsistent; anything else propagates (crash).
    """
    try:
        result = read_source(path, fmt)
    except InputDataError as error:
        assert error.path == str(path), error
        assert error.record and error.field and error.problem, error
        assert str(path) in str(error) and error.field in str(error)
        return "error"
    except ConfigError as error:
        assert "source.format" in str(error) and str(path) in str(error), error
        return "error"
    except MeraError as error:  # pragma: no cover - readers raise only the two above
        raise AssertionError(f"unexpected MeraError subclass: {error!r}") from error
    check_valid(result)
    return "valid"


def check_valid(result: IngestResult) -> None:
    """The invariants every reader's result holds, whatever it had to repair."""
    assert result.conversations and result.turns
    memory_ids = {c.memory_id for c in result.conversations}
    turn_keys = [(t.memory_id, t.turn_id) for t in result.turns]
    assert len(turn_keys) == len(set(turn_keys)), "duplicate turn ids in a valid result"
    assert {t.memory_id for t in result.turns} <= memory_ids
    question_ids = [q.question_id for q in result.questions]
    assert len(question_ids) == len(set(question_ids)), "duplicate question ids"
    known = set(turn_keys)
    for question in result.questions:
        assert question.memory_id in memory_ids
        assert all((question.memory_id, t) in known for t in question.gold_turn_ids)
        assert isinstance(question.answer, str) and question.answer
    for turn in result.turns:
        assert isinstance(turn.text, str) and len(turn.text) <= MAX_TURN_CHARS
        assert isinstance(turn.speaker, str)
    report = result.report()
    json.dumps(report)  # the ingest report must be writable as JSON
    assert report["turns"] == len(result.turns)


class OutcomeTally:
    """Bad inputs tried, by kind and outcome, for the reliability figures."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str, str]] = Counter()

    def add(self, fmt: str, kind: str, outcome: str) -> None:
        self.counts[(fmt, kind, outcome)] += 1

    def table(self) -> dict[str, Any]:
        by_kind: dict[str, dict[str, int]] = {}
        for (_, kind, outcome), n in sorted(self.counts.items()):
            by_kind.setdefault(kind, {"error": 0, "valid": 0, "crash": 0})[outcome] += n
        by_format: dict[str, int] = Counter()
        for (fmt, _, _), n in self.counts.items():
            by_format[fmt] += n
        return {
            "tried": sum(self.counts.values()),
            "crashes": sum(n for (_, _, o), n in self.counts.items() if o == "crash"),
            "by_kind": by_kind,
            "by_format": dict(by_format),
        }
