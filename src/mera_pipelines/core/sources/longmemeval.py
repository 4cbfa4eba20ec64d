"""LongMemEval (S / M / oracle schema): a JSON list of questions, each with its own haystack.

Each question is its own memory (memory_id = question_id): histories are not shared.
Sessions are put in time order (the oracle file is not in order) and numbered 1.. in that
order; turn ids are ``S<session_index>:<turn number>`` (1-based), unique within the memory.
Gold evidence is the set of turns marked ``has_answer: true``. The file is streamed one question
at a time (see ``iter_json_array``), so M (2.75 GB) is never held as one parsed document.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mera_pipelines.core.records import Conversation, Question, Turn
from mera_pipelines.core.sources.base import (
    IngestResult,
    IngestTally,
    RecordRef,
    SessionDraft,
    answer_text,
    iter_json_array,
    latest_iso,
    optional,
    order_sessions,
    question_date_or_last_session,
    require,
    require_object,
    require_turn_text,
    session_time,
    speakers_in_order,
)
from mera_pipelines.core.temporal import to_iso

FORMAT = "longmemeval"
ABSTENTION_SUFFIX = "_abs"

_DROPPED_KINDS = ["session_empty", "evidence_empty"]
_REPAIRED_KINDS = [
    "answer_int_to_str",
    "session_order_sorted",
    "session_date_missing",
    "session_date_unparsed",
    "question_date_unparsed",
    "question_date_from_last_session",
]


def turn_id_for(session_index: int, turn_index: int) -> str:
    """``S3:7`` = the 7th turn of the 3rd session in time order (both 1-based)."""
    return f"S{session_index}:{turn_index + 1}"


def read_longmemeval(path: Path) -> IngestResult:
    tally = IngestTally(_DROPPED_KINDS, _REPAIRED_KINDS)
    conversations: list[Conversation] = []
    turns: list[Turn] = []
    questions: list[Question] = []
    first_seen: dict[str, int] = {}
    for position, raw_item in enumerate(iter_json_array(path, "questions"), start=1):
        ref = RecordRef(path, f"question {position}")
        item = require_object(raw_item, ref, "(question)")
        question_id = require(item, "question_id", str, ref, "question_id")
        if question_id in first_seen:
            raise ref.error(
                "question_id",
                f"duplicate question_id {question_id!r} (also question {first_seen[question_id]})",
            )
        first_seen[question_id] = position
        ref = RecordRef(path, f"question {position} (question_id {question_id})")
        conversation, memory_turns, question = _read_instance(item, question_id, ref, tally)
        conversations.append(conversation)
        turns.extend(memory_turns)
        questions.append(question)
    if not questions:
        raise RecordRef(path, "top level").error("(root)", "the list holds no questions")
    return tally.result(FORMAT, conversations, turns, questions)


def _read_instance(
    item: dict[str, Any], question_id: str, ref: RecordRef, tally: IngestTally
) -> tuple[Conversation, list[Turn], Question]:
    question_type = require(item, "question_type", str, ref, "question_type")
    question_text = require(item, "question", str, ref, "question")
    answer = answer_text(item.get("answer"), ref, "answer", tally)
    sessions = order_sessions(_session_drafts(item, ref, tally), ref, tally)
    turns: list[Turn] = []
    gold_turn_ids: list[str] = []
    for session_index, session in enumerate(sessions, start=1):
        for turn_index, raw_turn in enumerate(session.items):
            turn, has_answer = _read_turn(raw_turn, session, session_index, turn_index, question_id)
            turns.append(turn)
            if has_answer:
                gold_turn_ids.append(turn.turn_id)
    if not gold_turn_ids:
        tally.drop("evidence_empty", f"{ref.record} has no has_answer turn")
    last_session = latest_iso([session.moment for session in sessions])
    question = Question(
        question_id=question_id,
        memory_id=question_id,
        question=question_text,
        answer=answer,
        category=question_type,
        gold_turn_ids=gold_turn_ids,
        question_date=question_date_or_last_session(
            item.get("question_date"), ref, "question_date", last_session, tally
        ),
        is_abstention=question_id.endswith(ABSTENTION_SUFFIX),
    )
    conversation = Conversation(
        memory_id=question_id,
        source_format=FORMAT,
        speakers=speakers_in_order(turns),
        n_sessions=len(sessions),
        n_turns=len(turns),
    )
    return conversation, turns, question


def _session_drafts(item: dict[str, Any], ref: RecordRef, tally: IngestTally) -> list[SessionDraft]:
    sessions = require(item, "haystack_sessions", list, ref, "haystack_sessions")
    session_ids = require(item, "haystack_session_ids", list, ref, "haystack_session_ids")
    dates = require(item, "haystack_dates", list, ref, "haystack_dates")
    for name, values in (("haystack_session_ids", session_ids), ("haystack_dates", dates)):
        if len(values) != len(sessions):
            raise ref.error(
                name, f"has {len(values)} entries but haystack_sessions has {len(sessions)}"
            )
    if not sessions:
        raise ref.error("haystack_sessions", "the haystack is empty: the question has no history")
    drafts = []
    for position, (session_id, raw_date, items) in enumerate(
        zip(session_ids, dates, sessions, strict=True)
    ):
        prefix = f"haystack_sessions[{position}]"
        if not isinstance(session_id, str):
            raise ref.error(f"haystack_session_ids[{position}]", "expected a string")
        if not isinstance(items, list):
            raise ref.error(prefix, "expected a list of turns")
        if not items:
            # S and M contain empty filler sessions; the LongMemEval authors say to drop them.
            tally.drop("session_empty", f"{ref.record} {prefix} ({session_id})")
            continue
        moment, raw_time = session_time(raw_date, ref, f"haystack_dates[{position}]", tally)
        drafts.append(SessionDraft(session_id, moment, raw_time, items, ref, prefix))
    if not drafts:
        raise ref.error("haystack_sessions", "every session is empty: the question has no history")
    return drafts


def _read_turn(
    raw: Any, session: SessionDraft, session_index: int, turn_index: int, memory_id: str
) -> tuple[Turn, bool]:
    ref, prefix = session.ref, f"{session.field_prefix}[{turn_index}]"
    raw = require_object(raw, ref, prefix)
    turn = Turn(
        memory_id=memory_id,
        session_id=session.session_id,
        session_index=session_index,
        turn_id=turn_id_for(session_index, turn_index),
        turn_index=turn_index,
        speaker=require(raw, "role", str, ref, f"{prefix}.role"),
        text=require_turn_text(raw, "content", ref, f"{prefix}.content"),
        session_time=to_iso(session.moment),
        session_time_raw=session.raw_time,
    )
    has_answer = optional(raw, "has_answer", bool, ref, f"{prefix}.has_answer") or False
    return turn, has_answer
