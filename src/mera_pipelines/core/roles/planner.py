"""The query planner: from question, evidence graph and query history, a few structured intents.

An intent ``I = (d, k, c)`` is the desired fact, its key entities/concepts and coarse topic
labels; its fields are concatenated into one retrieval query over the whole memory. Later
rounds build on anchors the verifier newly admitted (the second hop of a multi-hop question)
and never repeat an earlier query.

Two implementations behind one interface: ``HeuristicPlanner`` (offline default) and
``LLMPlanner`` over any backend (the packaged SmolLM2, a trained planner folder, a server).
An unparseable LLM plan is counted (``parse_failed``) and replaced by the heuristic plan for
that round, so a weak model costs recall, never a crash.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from mera_pipelines.core.errors import ConfigError, LLMCallError
from mera_pipelines.core.llm import ChatMessage, LLMBackend
from mera_pipelines.core.records import Intent
from mera_pipelines.core.roles.common import build_role, load_prompt, render_messages, spent_tokens
from mera_pipelines.core.text import (
    GENERAL_TOPIC,
    content_words,
    detect_topics,
    proper_names,
    tokenize,
)

DEFAULT_PLAN_PROMPT = "plan.txt"
# the same prompt with the heuristic planner's plan for the state as a draft to edit
DRAFT_PLAN_PROMPT = "plan_draft.txt"

INTENTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "intents": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "desired_fact": {"type": "string"},
                    "entities": {"type": "array", "items": {"type": "string"}},
                    "topics": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["desired_fact"],
            },
        }
    },
    "required": ["intents"],
}


@dataclass
class PlannerState:
    """What the planner sees before a round (also what training stores per state)."""

    question: str
    graph_text: str
    query_history: list[str]
    anchors: list[str]  # active anchors of the evidence graph (labels)
    new_anchors: list[str]  # anchors the verifier admitted since the previous plan
    uncovered_words: list[str]  # question words no accepted evidence mentions yet
    round_index: int  # 1-based
    max_intents: int = 3
    # facts of the evidence admitted in the previous round that matched a query, best first:
    # "more like this" queries recover further turns of list-like and multi-part answers
    new_evidence: list[str] = field(default_factory=list)


@dataclass
class PlanResult:
    intents: list[Intent]
    raw_output: str | None = None
    parse_failed: bool = False
    tokens_in: int = 0
    tokens_out: int = 0
    error: str | None = None


class Planner(Protocol):
    name: str

    def plan(self, state: PlannerState) -> PlanResult: ...


def normalise_query(text: str) -> str:
    return " ".join(sorted(set(tokenize(text))))


def is_repeat(query: str, history: list[str]) -> bool:
    """A query whose word set equals an earlier one would only find excluded turns again."""
    key = normalise_query(query)
    return not key or any(normalise_query(old) == key for old in history)


def complement_intents(
    intents: list[Intent], heuristic: list[Intent], history: list[str], limit: int
) -> list[Intent]:
    """A learned plan's intents, then the heuristic planner's for the same state, repeats
    dropped and cut to ``limit``: the plan a complementing planner searches with (and the one
    the GRPO reward scores when training one), so the learned queries add to the rules'
    instead of replacing them."""
    return dedupe_intents([*intents, *heuristic], history, limit)


def dedupe_intents(intents: list[Intent], history: list[str], limit: int) -> list[Intent]:
    kept: list[Intent] = []
    seen = list(history)
    for intent in intents:
        query = intent.query_text()
        if is_repeat(query, seen):
            continue
        kept.append(intent)
        seen.append(query)
        if len(kept) == limit:
            break
    return kept


def question_topics(question: str) -> list[str]:
    """The coarse topic labels ("hobbies") the heuristic planner gives a question's intents."""
    return [t for t in detect_topics(question, max_topics=2) if t != GENERAL_TOPIC]


def question_hints(question: str) -> str:
    """The prompt lines of ``hints``: the question's topic labels and names, as the heuristic
    planner reads them, for a learned planner to copy rather than infer. A small model
    trained on synthetic questions leaves the labels out of real questions' plans
    (docs/benchmarks.md, forty-eighth session); given here, they need no inferring."""
    topics = ", ".join(question_topics(question)) or "(none)"
    names = ", ".join(proper_names(question)) or "(none)"
    return f"\nQuestion topics: {topics}\nNames in the question: {names}"


@dataclass
class HeuristicPlanner:
    """Deterministic intents: the question, its key terms, then follow-ups on new anchors.

    Round 1 asks for the question as a whole and for its key entities/terms alone (a short
    keyword query matches names and objects the full sentence dilutes). Later rounds pair each
    newly verified anchor with the question's focus, search for more facts like the evidence
    just admitted, then re-ask the words no accepted evidence covers yet.
    """

    feedback_facts: int = 0  # off by default: on LoCoMo dev5 it cost ~1 point of recall
    keyword_intent: bool = True  # round 1 also asks for the question's key terms alone
    # later rounds keep one intent on the question itself: with viewed turns excluded it reads
    # further down the question's own ranking (a repeat in words, not in results)
    continue_question: bool = False
    # coarse topic labels ("hobbies") with the intents' queries; off: an ablation of what they
    # give (docs/benchmarks.md, twenty-ninth session)
    topic_labels: bool = True
    name: str = field(default="heuristic", init=False)

    def plan(self, state: PlannerState) -> PlanResult:
        question = state.question
        names = proper_names(question)
        focus = [w for w in content_words(question) if w.lower() not in {n.lower() for n in names}]
        topics = question_topics(question) if self.topic_labels else []
        candidates: list[Intent] = []
        if state.round_index == 1:
            candidates.append(Intent(question, names, topics))
            if self.keyword_intent:
                candidates.append(Intent(" ".join(focus), names, []))
            return PlanResult(dedupe_intents(candidates, state.query_history, state.max_intents))
        for anchor in state.new_anchors:
            candidates.append(Intent(" ".join(focus[:6]), [anchor], topics))
        for fact in state.new_evidence[: self.feedback_facts]:
            candidates.append(Intent(fact, [], topics))
        if state.uncovered_words:
            candidates.append(Intent(" ".join(state.uncovered_words), names, topics))
        for anchor in state.anchors:
            if anchor not in state.new_anchors:
                candidates.append(Intent(" ".join(focus[:6]), [anchor], []))
        intents = dedupe_intents(candidates, state.query_history, state.max_intents)
        if self.continue_question:
            intents = [*intents[: state.max_intents - 1], Intent(question, names, topics)]
        return PlanResult(intents)


class LLMPlanner:
    """Intents as JSON from a chat model; a failed parse is counted and the heuristic steps in."""

    def __init__(
        self,
        backend: LLMBackend,
        prompt_template: str | None = None,
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        max_entities: int = 6,
        graph_chars: int | None = None,
        draft: bool = False,
        complement: bool = False,
        hints: bool = False,
    ) -> None:
        self.backend = backend
        # a trained planner sees the graph cut as in training (its metadata records the length)
        # and, when it was trained with one, the heuristic's draft plan
        self.graph_chars = graph_chars
        self.template = prompt_template or plan_template(draft)
        self.hints = hints  # the question's topic labels and names in the prompt
        if hints and "${hints}" not in self.template:
            raise ConfigError(
                "roles.planner.hints: the planner prompt has no ${hints} placeholder "
                "(put it after ${question}, as prompts/plan.txt does)"
            )
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.max_entities = max_entities
        # true: the heuristic's intents for the state follow the model's (``complement_intents``)
        self.complement = complement
        self.fallback = HeuristicPlanner()
        self.name = f"llm:{getattr(backend, 'model_name', 'model')}"

    def messages(self, state: PlannerState) -> list[ChatMessage]:
        return render_plan_prompt(self.template, state, self.graph_chars, self.hints)

    def plan(self, state: PlannerState) -> PlanResult:
        try:
            completion = self.backend.complete_json(
                self.messages(state),
                schema=INTENTS_SCHEMA,
                max_tokens=self.max_tokens,
                temperature=self.temperature,
            )
        except LLMCallError as exc:
            fallback = self.fallback.plan(state)
            fallback.parse_failed = True
            fallback.error = str(exc)
            fallback.tokens_in, fallback.tokens_out = spent_tokens(exc)
            return fallback
        intents = parse_intents(completion.parsed, self.max_entities)
        intents = dedupe_intents(intents, state.query_history, state.max_intents)
        if intents and self.complement:
            heuristic = self.fallback.plan(state).intents
            intents = complement_intents(intents, heuristic, state.query_history, state.max_intents)
        result = PlanResult(
            intents,
            raw_output=completion.text,
            tokens_in=completion.tokens_in,
            tokens_out=completion.tokens_out,
        )
        if not intents:  # parsed, but nothing usable or only repeats: the heuristic steps in
            result.intents = self.fallback.plan(state).intents
            result.parse_failed = completion.parsed is None
            result.error = "no new valid intent"
        return result


def parse_intents(value: Any, max_entities: int = 6) -> list[Intent]:
    """Accept {"intents": [...]}, a bare list, or one intent object; drop malformed items."""
    if isinstance(value, dict) and "intents" in value:
        value = value["intents"]
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return []
    intents = []
    for item in value:
        if not isinstance(item, dict):
            continue
        desired = item.get("desired_fact") or item.get("fact") or item.get("query")
        if not isinstance(desired, str) or not desired.strip():
            continue
        entities = [e for e in _strings(item.get("entities")) if e][:max_entities]
        topics = [t for t in _strings(item.get("topics")) if t][:3]
        intents.append(Intent(desired.strip(), entities, topics))
    return intents


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [v.strip() for v in re.split(r"[,;]", value)]
    if isinstance(value, list):
        return [str(v).strip() for v in value if isinstance(v, str | int | float)]
    return []


def plan_template(draft: bool = False) -> str:
    """The packaged planner prompt: plain, or with the heuristic's draft plan to edit."""
    return load_prompt(DRAFT_PLAN_PROMPT if draft else DEFAULT_PLAN_PROMPT)


def render_plan_prompt(
    template: str, state: PlannerState, graph_chars: int | None = None, hints: bool = False
) -> list[ChatMessage]:
    """The planner's chat messages; training builds its prompts with this very function.

    A template with ``${draft}`` gets the heuristic planner's plan for the state, in the reply
    format: a learned planner that starts from it only has to find what the rules miss.
    ``hints``: lines with the question's topic labels and names follow the question
    (``question_hints``); off, the prompt is the one planners trained before them saw.
    """
    graph = state.graph_text if graph_chars is None else state.graph_text[:graph_chars]
    values = {
        "question": state.question,
        "graph": graph or "(empty)",
        "history": "\n".join(f"- {q}" for q in state.query_history) or "(none)",
        "new_anchors": ", ".join(state.new_anchors) or "(none)",
        "uncovered": ", ".join(state.uncovered_words) or "(none)",
        "max_intents": str(state.max_intents),
        "round": str(state.round_index),
        "hints": question_hints(state.question) if hints else "",
    }
    if "${draft}" in template:
        values["draft"] = intents_to_json(HeuristicPlanner().plan(state).intents)
    return render_messages(template, values)


def intents_to_json(intents: list[Intent]) -> str:
    """The planner's reply format, compact: what SFT teaches and what ``parse_intents`` reads."""
    items = [
        {"desired_fact": i.desired_fact, "entities": i.entities, "topics": i.topics}
        for i in intents
    ]
    return json.dumps({"intents": items}, ensure_ascii=False)


_PLANNERS = {"heuristic": HeuristicPlanner, "llm": LLMPlanner}
PLANNER_KINDS = tuple(_PLANNERS)


def make_planner(kind: str, backend: LLMBackend | None = None, **params: Any) -> Planner:
    """Build a planner from configuration: ``kind`` is "heuristic" or "llm"."""
    return build_role("planner", kind, _PLANNERS, backend, params)
