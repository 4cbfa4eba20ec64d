"""Our own JSONL format: one JSON object per line, each a turn or a question.

    {"type": "turn", "memory_id": "m1", "session_id": "s1", "session_time": "2023-05-08T13:56",
     "turn_id": "s1:1", "speaker": "Ana", "text": "I adopted a cat.", "image_caption": null}
    {"type": "question", "memory_id": "m1", "question_id": "m1/q0", "question": "...",
     "answer": "...", "category": "single-hop", "evidence": ["s1:1"],
     "question_date": "2023-06-01", "abstention": false}

Lines may come in any order; a memory's sessions are put in time order. The full
specification is in docs/data_formats.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mera_pipelines.core.records import Conversation, Question, Turn
from mera_pipelines.core.sources.base import (
    IngestResult,
    IngestTally,
    RecordRef,
    SessionDraft,
    answer_text,
    iter_jsonl,
    latest_iso,
    optional,
    order_sessions,
    question_date_or_last_session,
    require,
    require_object,
    require_turn_text,
    resolve_evidence,
    session_time,
    speakers_in_order,
    type_name,
)
from mera_pipelines.core.temporal import to_iso

FORMAT = "jsonl"
DEFAULT_CATEGORY = "uncategorized"
TURN_FIELDS = frozenset(
    {
        "type",
        "memory_id",
        "session_id",
        "session_time",
        "turn_id",
        "speaker",
        "text",
        "image_caption",
    }
)
QUESTION_FIELDS = frozenset(
    {
        "type", "memory_id", "question_id", "question", "answer", "category", "evidence",
        "question_date", "abstention", "adversarial_answer",
    }
)  # fmt: skip

_DROPPED_KINDS = [
    "evidence_ids_unresolved",
    "evidence_empty",
    "evidence_none_resolved",
    "unknown_field",
]
_REPAIRED_KINDS = [
    "turn_id_generated",
    "answer_int_to_str",
    "session_date_missing",
    "session_date_unparsed",
    "session_order_sorted",
    "question_date_from_last_session",
]


def generated_turn_id(session_id: str, number: int) -> str:
    """The id of a turn given without one: ``<session_id>:<n>``, n 1-based within the session."""
    return f"{session_id}:{number}"


@dataclass
class _SessionLines:
    session_id: str
    first_ref: RecordRef
    raw_time: str | None = None
    time_line: int = 0
    turns: list[tuple[RecordRef, dict[str, Any]]] = field(default_factory=list)


@dataclass
class _MemoryLines:
    memory_id: str
    sessions: dict[str, _SessionLines] = field(default_factory=dict)


def read_jsonl(path: Path) -> IngestResult:
    tally = IngestTally(_DROPPED_KINDS, _REPAIRED_KINDS)
    memories: dict[str, _MemoryLines] = {}
    question_lines: list[tuple[RecordRef, dict[str, Any]]] = []
    for line_number, value in iter_jsonl(path):
        ref = RecordRef(path, f"line {line_number}")
        obj = require_object(value, ref, "(line)")
        kind = require(obj, "type", str, ref, "type")
        if kind == "turn":
            _drop_unknown_fields(obj, TURN_FIELDS, ref, tally)
            _add_turn_line(obj, line_number, ref, memories)
        elif kind == "question":
            _drop_unknown_fields(obj, QUESTION_FIELDS, ref, tally)
            question_lines.append((ref, obj))
        else:
            raise ref.error("type", f"expected 'turn' or 'question', got {kind!r}")
    if not memories:
        raise RecordRef(path, "(file)").error("type", "the file holds no turns")

    conversations: list[Conversation] = []
    turns: list[Turn] = []
    last_session_by_memory: dict[str, str | None] = {}
    for memory in memories.values():
        conversation, memory_turns, last_session = _build_memory(memory, path, tally)
        conversations.append(conversation)
        turns.extend(memory_turns)
        last_session_by_memory[memory.memory_id] = last_session
    turn_ids_by_memory: dict[str, set[str]] = {}
    for turn in turns:
        turn_ids_by_memory.setdefault(turn.memory_id, set()).add(turn.turn_id)
    questions = _read_questions(question_lines, turn_ids_by_memory, last_session_by_memory, tally)
    return tally.result(FORMAT, conversations, turns, questions)


def _drop_unknown_fields(
    obj: dict[str, Any], known: frozenset[str], ref: RecordRef, tally: IngestTally
) -> None:
    for key in obj:
        if key not in known:
            tally.drop("unknown_field", f"{ref.record} field {key!r}")


def _add_turn_line(
    obj: dict[str, Any], line_number: int, ref: RecordRef, memories: dict[str, _MemoryLines]
) -> None:
    memory_id = require(obj, "memory_id", str, ref, "memory_id")
    session_id = require(obj, "session_id", str, ref, "session_id")
    memory = memories.setdefault(memory_id, _MemoryLines(memory_id))
    session = memory.sessions.setdefault(session_id, _SessionLines(session_id, ref))
    raw_time = obj.get("session_time")
    if raw_time is not None:
        if not isinstance(raw_time, str):
            raise ref.error("session_time", f"expected a date string, got {type_name(raw_time)}")
        if session.raw_time is None:
            session.raw_time, session.time_line = raw_time, line_number
        elif raw_time != session.raw_time:
            raise ref.error(
                "session_time",
                f"{raw_time!r} differs from {session.raw_time!r} given for session "
                f"{session_id!r} on line {session.time_line}",
            )
    session.turns.append((ref, obj))


def _build_memory(
    memory: _MemoryLines, path: Path, tally: IngestTally
) -> tuple[Conversation, list[Turn], str | None]:
    memory_ref = RecordRef(path, f"memory_id {memory.memory_id}")
    drafts = []
    for session in memory.sessions.values():
        moment, raw_time = session_time(session.raw_time, session.first_ref, "session_time", tally)
        drafts.append(
            SessionDraft(session.session_id, moment, raw_time, session.turns, session.first_ref, "")
        )
    ordered = order_sessions(drafts, memory_ref, tally)
    turns: list[Turn] = []
    first_line_of_id: dict[str, str] = {}
    for session_index, draft in enumerate(ordered, start=1):
        for turn_index, (ref, obj) in enumerate(draft.items):
            turn_id = optional(obj, "turn_id", str, ref, "turn_id")
            if turn_id is None:
                turn_id = generated_turn_id(draft.session_id, turn_index + 1)
                tally.repair("turn_id_generated", f"{ref.record} -> {turn_id}")
            if turn_id in first_line_of_id:
                raise ref.error(
                    "turn_id",
                    f"duplicate turn id {turn_id!r} in memory {memory.memory_id!r} "
                    f"(also {first_line_of_id[turn_id]})",
                )
            first_line_of_id[turn_id] = ref.record
            turns.append(
                Turn(
                    memory_id=memory.memory_id,
                    session_id=draft.session_id,
                    session_index=session_index,
                    turn_id=turn_id,
                    turn_index=turn_index,
                    speaker=require(obj, "speaker", str, ref, "speaker"),
                    text=require_turn_text(obj, "text", ref, "text"),
                    image_caption=optional(obj, "image_caption", str, ref, "image_caption"),
                    session_time=to_iso(draft.moment),
                    session_time_raw=draft.raw_time,
                )
            )
    conversation = Conversation(
        memory_id=memory.memory_id,
        source_format=FORMAT,
        speakers=speakers_in_order(turns),
        n_sessions=len(ordered),
        n_turns=len(turns),
    )
    return conversation, turns, latest_iso([draft.moment for draft in ordered])


def _read_questions(
    question_lines: list[tuple[RecordRef, dict[str, Any]]],
    turn_ids_by_memory: dict[str, set[str]],
    last_session_by_memory: dict[str, str | None],
    tally: IngestTally,
) -> list[Question]:
    questions: list[Question] = []
    first_line_of_id: dict[str, str] = {}
    for ref, obj in question_lines:
        question_id = require(obj, "question_id", str, ref, "question_id")
        if question_id in first_line_of_id:
            raise ref.error(
                "question_id",
                f"duplicate question_id {question_id!r} (also {first_line_of_id[question_id]})",
            )
        first_line_of_id[question_id] = ref.record
        memory_id = require(obj, "memory_id", str, ref, "memory_id")
        if memory_id not in turn_ids_by_memory:
            raise ref.error("memory_id", f"no turn in this file has memory_id {memory_id!r}")
        category = optional(obj, "category", str, ref, "category") or DEFAULT_CATEGORY
        evidence = optional(obj, "evidence", list, ref, "evidence") or []
        adversarial = obj.get("adversarial_answer")
        questions.append(
            Question(
                question_id=question_id,
                memory_id=memory_id,
                question=require(obj, "question", str, ref, "question"),
                answer=answer_text(obj.get("answer"), ref, "answer", tally),
                category=category,
                gold_turn_ids=resolve_evidence(
                    evidence, turn_ids_by_memory[memory_id], ref, "evidence", tally
                ),
                question_date=question_date_or_last_session(
                    obj.get("question_date"),
                    ref,
                    "question_date",
                    last_session_by_memory[memory_id],
                    tally,
                ),
                is_abstention=optional(obj, "abstention", bool, ref, "abstention") or False,
                adversarial_answer=None
                if adversarial is None
                else answer_text(adversarial, ref, "adversarial_answer", tally),
            )
        )
    return questions
