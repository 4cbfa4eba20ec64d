"""LoCoMo (``locomo10.json`` schema): a JSON list of samples, one conversation each.

Quirks of the public file, each repaired and counted (docs/data_formats.md):
date keys with no session behind them (conv-26), answers stored as numbers, malformed
evidence strings ("D8:6; D9:17", "D9:1 D4:4", "D:11:26", "D"), evidence ids naming no turn,
empty evidence lists, and category-5 items carrying ``adversarial_answer`` instead of ``answer``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mera_pipelines.core.records import Conversation, Question, Turn
from mera_pipelines.core.sources.base import (
    IngestResult,
    IngestTally,
    RecordRef,
    answer_text,
    iter_json_array,
    latest_iso,
    optional,
    require,
    require_object,
    require_turn_text,
    resolve_evidence,
    session_time,
)
from mera_pipelines.core.temporal import to_iso

FORMAT = "locomo"

# From LoCoMo's official evaluation code; several public projects use another mapping.
CATEGORY_NAMES = {
    "1": "multi-hop",
    "2": "temporal",
    "3": "open-domain",
    "4": "single-hop",
    "5": "adversarial",
}
ADVERSARIAL_CATEGORY = "5"
# LoCoMo's evaluation scores category 5 as correct when the prediction says the information is
# not mentioned / not available; the item's own `adversarial_answer` is the trap, not the target.
ABSTENTION_ANSWER = "Not mentioned in the conversation"

_SESSION_KEY = re.compile(r"^session_(\d+)$")
_DATE_KEY = re.compile(r"^session_(\d+)_date_time$")

_DROPPED_KINDS = [
    "evidence_ids_unresolved",
    "evidence_empty",
    "evidence_none_resolved",
    "session_empty",
    "session_date_without_session",
]
_REPAIRED_KINDS = [
    "evidence_split",
    "evidence_id_fixed",
    "evidence_duplicate_removed",
    "answer_int_to_str",
    "session_date_missing",
    "session_date_unparsed",
    "category5_answer_replaced",
]


def read_locomo(path: Path) -> IngestResult:
    tally = IngestTally(_DROPPED_KINDS, _REPAIRED_KINDS)
    conversations: list[Conversation] = []
    turns: list[Turn] = []
    questions: list[Question] = []
    first_seen: dict[str, int] = {}
    for position, raw_sample in enumerate(iter_json_array(path, "samples"), start=1):
        ref = RecordRef(path, f"sample {position}")
        sample = require_object(raw_sample, ref, "(sample)")
        sample_id = require(sample, "sample_id", str, ref, "sample_id")
        if sample_id in first_seen:
            raise ref.error(
                "sample_id",
                f"duplicate sample_id {sample_id!r} (also sample {first_seen[sample_id]})",
            )
        first_seen[sample_id] = position
        ref = RecordRef(path, f"sample {position} (sample_id {sample_id})")
        history = _read_conversation(sample, sample_id, ref, tally)
        conversations.append(history.conversation)
        turns.extend(history.turns)
        questions.extend(_read_questions(sample, history, ref, tally))
    if not conversations:
        raise RecordRef(path, "top level").error("(root)", "the list holds no samples")
    _summarise_rules(questions, tally)
    return tally.result(FORMAT, conversations, turns, questions)


@dataclass(frozen=True)
class _History:
    """One sample's conversation as read, with what its questions need to know about it."""

    conversation: Conversation
    turns: list[Turn]
    turn_ids: set[str]
    last_session: str | None  # ISO time of the latest dated session


def _read_conversation(
    sample: dict[str, Any], sample_id: str, ref: RecordRef, tally: IngestTally
) -> _History:
    body = require(sample, "conversation", dict, ref, "conversation")
    speakers = [
        require(body, "speaker_a", str, ref, "conversation.speaker_a"),
        require(body, "speaker_b", str, ref, "conversation.speaker_b"),
    ]
    session_numbers = sorted(int(m[1]) for key in body if (m := _SESSION_KEY.match(key)))
    dated_numbers = sorted(int(m[1]) for key in body if (m := _DATE_KEY.match(key)))
    for number in sorted(set(dated_numbers) - set(session_numbers)):
        # conv-26 has dates for sessions 20-35 but no such sessions: the sessions are what exists.
        tally.drop("session_date_without_session", f"{ref.record} session_{number}_date_time")
    if not session_numbers:
        raise ref.error("conversation", "no session_<n> keys: the conversation is empty")

    turns: list[Turn] = []
    seen_turn_ids: dict[str, str] = {}
    session_moments = []
    session_index = 0
    for number in session_numbers:
        key = f"session_{number}"
        items = require(body, key, list, ref, f"conversation.{key}")
        if not items:
            tally.drop("session_empty", f"{ref.record} conversation.{key}")
            continue
        session_index += 1
        moment, raw_time = session_time(
            body.get(f"{key}_date_time"), ref, f"conversation.{key}_date_time", tally
        )
        session_moments.append(moment)
        for turn_index, item in enumerate(items):
            field_prefix = f"conversation.{key}[{turn_index}]"
            turn = _read_turn(item, ref, field_prefix)
            if turn["dia_id"] in seen_turn_ids:
                raise ref.error(
                    f"{field_prefix}.dia_id",
                    f"duplicate turn id {turn['dia_id']!r} (also {seen_turn_ids[turn['dia_id']]})",
                )
            seen_turn_ids[turn["dia_id"]] = field_prefix
            turns.append(
                Turn(
                    memory_id=sample_id,
                    session_id=key,
                    session_index=session_index,
                    turn_id=turn["dia_id"],
                    turn_index=turn_index,
                    speaker=turn["speaker"],
                    text=turn["text"],
                    image_caption=turn["blip_caption"],
                    session_time=to_iso(moment),
                    session_time_raw=raw_time,
                )
            )
    if not turns:
        raise ref.error("conversation", "every session is empty: the conversation has no turns")
    conversation = Conversation(
        memory_id=sample_id,
        source_format=FORMAT,
        speakers=speakers,
        n_sessions=session_index,
        n_turns=len(turns),
    )
    return _History(conversation, turns, set(seen_turn_ids), latest_iso(session_moments))


def _read_turn(item: Any, ref: RecordRef, field_prefix: str) -> dict[str, Any]:
    item = require_object(item, ref, field_prefix)
    return {
        "dia_id": require(item, "dia_id", str, ref, f"{field_prefix}.dia_id"),
        "speaker": require(item, "speaker", str, ref, f"{field_prefix}.speaker"),
        "text": require_turn_text(item, "text", ref, f"{field_prefix}.text"),
        # Image turns: the caption is the only trace of the picture, and facts often hinge on it.
        "blip_caption": optional(item, "blip_caption", str, ref, f"{field_prefix}.blip_caption"),
    }


def _read_questions(
    sample: dict[str, Any], history: _History, ref: RecordRef, tally: IngestTally
) -> list[Question]:
    items = require(sample, "qa", list, ref, "qa")
    return [
        _read_question(raw, index, history, ref.within(f"qa[{index}]"), tally)
        for index, raw in enumerate(items)
    ]


def _read_question(
    raw: Any, index: int, history: _History, ref: RecordRef, tally: IngestTally
) -> Question:
    item = require_object(raw, ref, "(question)")
    question = require(item, "question", str, ref, "question")
    category = _category(item, ref)
    evidence = require(item, "evidence", list, ref, "evidence")
    adversarial = item.get("adversarial_answer")
    adversarial_answer = (
        None if adversarial is None else answer_text(adversarial, ref, "adversarial_answer", tally)
    )
    if category == ADVERSARIAL_CATEGORY:
        if item.get("answer") is not None:
            tally.repair("category5_answer_replaced", f"{ref.record} answer={item['answer']!r}")
        answer = ABSTENTION_ANSWER
    else:
        answer = answer_text(item.get("answer"), ref, "answer", tally)
    memory_id = history.conversation.memory_id
    return Question(
        question_id=f"{memory_id}/q{index}",
        memory_id=memory_id,
        question=question,
        answer=answer,
        category=category,
        gold_turn_ids=resolve_evidence(evidence, history.turn_ids, ref, "evidence", tally),
        # LoCoMo gives no question date. The questions are asked after the conversation ends,
        # so the last session's date is the "now" that relative questions refer to.
        question_date=history.last_session,
        is_abstention=category == ADVERSARIAL_CATEGORY,
        adversarial_answer=adversarial_answer,
    )


def _summarise_rules(questions: list[Question], tally: IngestTally) -> None:
    tally.summary(
        "question_date: LoCoMo has none; every question gets the date of its conversation's "
        "last session"
    )
    n_adversarial = sum(question.category == ADVERSARIAL_CATEGORY for question in questions)
    if n_adversarial:
        tally.summary(
            f"category 5: {n_adversarial} questions are scored against {ABSTENTION_ANSWER!r} "
            "(is_abstention=True); their adversarial_answer is kept in its own column"
        )


def _category(item: dict[str, Any], ref: RecordRef) -> str:
    raw = item.get("category")
    if raw is None:
        raise ref.error("category", "required field is missing")
    text = str(raw).strip() if isinstance(raw, int | str) and not isinstance(raw, bool) else None
    if text not in CATEGORY_NAMES:
        raise ref.error("category", f"expected one of 1, 2, 3, 4, 5, got {raw!r}")
    return text
