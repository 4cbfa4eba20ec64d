"""Canonical records shared by every stage. Tables are lists of these, turned into DataFrames.

Ids: a *memory* is one searchable history (a LoCoMo conversation, a LongMemEval question's
own haystack). A *parent turn id* such as ``D1:3`` is unique within its memory.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypeVar

import pandas as pd

T = TypeVar("T")


@dataclass(frozen=True)
class Conversation:
    memory_id: str
    source_format: str
    speakers: list[str]
    n_sessions: int
    n_turns: int


@dataclass(frozen=True)
class Turn:
    memory_id: str
    session_id: str  # e.g. "session_3" (LoCoMo) or the LongMemEval haystack session id
    session_index: int  # 1-based position of the session in time order
    turn_id: str  # parent turn id, unique within the memory, e.g. "D3:7"
    turn_index: int  # 0-based position within the session
    speaker: str  # a name (LoCoMo) or "user"/"assistant" (LongMemEval)
    text: str
    image_caption: str | None = None
    session_time: str | None = None  # ISO 8601, parsed from session_time_raw
    session_time_raw: str | None = None


@dataclass(frozen=True)
class Question:
    question_id: str
    memory_id: str
    question: str
    answer: str
    category: str  # LoCoMo "1".."5"; LongMemEval question_type
    gold_turn_ids: list[str] = field(default_factory=list)
    question_date: str | None = None  # ISO 8601
    is_abstention: bool = False  # LoCoMo category 5 / LongMemEval "_abs"
    adversarial_answer: str | None = None


@dataclass(frozen=True)
class Fact:
    fact_id: str  # "<memory_id>|<turn_id>|<n>"
    memory_id: str
    turn_id: str
    text: str  # self-contained: pronouns resolved, relative times normalised
    keywords: list[str]
    topics: list[str]
    speaker: str
    timestamp: str | None  # the turn's (session's) time, ISO 8601; not the event time
    turn_facts: list[str]  # every fact text of the parent turn, for aggregation
    source_text: str = ""  # the sentence the fact came from, for provenance


def to_frame(records: list[Any], record_type: type) -> pd.DataFrame:
    """Records -> DataFrame with one column per dataclass field, also when empty."""
    columns = [f.name for f in fields(record_type)]
    return pd.DataFrame([asdict(r) for r in records], columns=columns)


def from_frame(frame: pd.DataFrame, record_type: type[T]) -> list[T]:
    """DataFrame -> records; list columns come back from parquet as arrays, so re-list them."""
    names = [f.name for f in fields(record_type)]
    out = []
    for row in frame[names].to_dict("records"):
        clean = {k: _plain(v) for k, v in row.items()}
        out.append(record_type(**clean))
    return out


def _plain(value: Any) -> Any:
    if hasattr(value, "tolist") and not isinstance(value, str):
        value = value.tolist()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, float) and math.isnan(value):  # parquet nulls come back as NaN
        return None
    return value


@dataclass
class Intent:
    """One planner intent I = (d, k, c): the desired fact, key entities/concepts, topic labels."""

    desired_fact: str
    entities: list[str] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)

    def query_text(self) -> str:
        """The retrieval query: the intent's fields concatenated (as in the paper)."""
        parts = [self.desired_fact.strip(), " ".join(self.entities), " ".join(self.topics)]
        return " ".join(p for p in parts if p)


@dataclass
class RoleUsage:
    """Tokens and calls spent by one role (planner, verifier, answerer, ...)."""

    tokens_in: int = 0
    tokens_out: int = 0
    calls: int = 0
    parse_failures: int = 0


@dataclass
class RoundLog:
    round: int  # 1-based
    intents: list[Intent]
    queries: list[str]
    retrieved_turn_ids: list[str]  # new turns shown to the verifier this round
    accepted_turn_ids: list[str]  # admitted by the verifier this round
    graph_nodes: int
    graph_relations: int
    sufficient: bool
    recall_retrieved: float | None = None  # cumulative gold-turn recall (None without gold)
    recall_accepted: float | None = None
    usage: dict[str, RoleUsage] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass
class Trajectory:
    """One question through a system: every round, why it stopped, the answer."""

    question_id: str
    memory_id: str
    system: str
    rounds: list[RoundLog]
    termination: str  # sufficient | exhausted | max_rounds | single_shot
    answer: str
    viewed_turn_ids: list[str]
    accepted_turn_ids: list[str]
    graph: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, RoleUsage] = field(default_factory=dict)
    seconds: float = 0.0
