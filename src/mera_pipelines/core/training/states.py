"""Planner-state collection: full MERA trajectories on training questions, one record saved
before every planner call (question, graph, query history, gold turns E*, found turns F_t,
memory id), with the teacher planner's plan for that state (the SFT target).

The teacher plans the trajectories it is recorded on: the heuristic planner by default, or an
LLM planner (any backend) when one is configured."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from mera_pipelines.core.errors import ConfigError, LLMCallError
from mera_pipelines.core.evaluation import RoleBackends, build_roles
from mera_pipelines.core.graph import EvidenceGraph
from mera_pipelines.core.llm import ChatMessage, LLMBackend
from mera_pipelines.core.llm.concurrency import ItemFailure, map_bounded
from mera_pipelines.core.loop import LoopSettings, Roles, round_budget, run_mera
from mera_pipelines.core.memory import MemoryIndex
from mera_pipelines.core.records import Question, RoleUsage
from mera_pipelines.core.roles.planner import (
    HeuristicPlanner,
    LLMPlanner,
    Planner,
    PlannerState,
    PlanResult,
    intents_to_json,
    plan_template,
    render_plan_prompt,
)
from mera_pipelines.core.settings import settings_from_params


@dataclass(frozen=True)
class CollectSettings:
    """``training.collect``: how the teacher runs over the training questions."""

    concurrency: int = 1
    # rounds before the verifier's "sufficient" may stop a teacher run (None: the loop's own).
    # The verifier calls most synthetic questions sufficient after round 1, so a deeper
    # minimum is how training sees the later rounds' states (follow-ups on anchors).
    min_rounds: int | None = None

    @classmethod
    def from_params(cls, params: dict[str, Any] | None) -> CollectSettings:
        settings = settings_from_params(cls, params, "training.collect")
        rounds = settings.min_rounds
        if rounds is not None and (not isinstance(rounds, int) or rounds < 1):
            raise ConfigError(
                f"training.collect.min_rounds must be an integer >= 1 or null, got {rounds!r}"
            )
        return settings

    def teacher_loop(self, loop: LoopSettings) -> LoopSettings:
        """The loop settings the teacher runs with."""
        return loop if self.min_rounds is None else replace(loop, min_rounds=self.min_rounds)


@dataclass
class PlannerStateRecord:
    state_id: str  # "<question_id>#<round>"
    memory_id: str
    question_id: str
    question: str
    round_index: int
    graph_text: str
    query_history: list[str]
    anchors: list[str]
    new_anchors: list[str]
    uncovered_words: list[str]
    new_evidence: list[str]
    max_intents: int
    gold_turn_ids: list[str]  # E*
    viewed_turn_ids: list[str]  # every turn shown so far (excluded from the next search)
    found_turn_ids: list[str]  # F_t: gold turns among the viewed ones
    turn_budget: int  # new turns the next search may show
    teacher_output: str  # the teacher planner's intents for this state, as the reply JSON

    @property
    def missing_turn_ids(self) -> list[str]:
        found = set(self.found_turn_ids)
        return [t for t in self.gold_turn_ids if t not in found]

    def planner_state(self) -> PlannerState:
        return PlannerState(
            question=self.question,
            graph_text=self.graph_text,
            query_history=list(self.query_history),
            anchors=list(self.anchors),
            new_anchors=list(self.new_anchors),
            uncovered_words=list(self.uncovered_words),
            round_index=self.round_index,
            max_intents=self.max_intents,
            new_evidence=list(self.new_evidence),
        )


@dataclass
class CollectionReport:
    questions: int = 0
    failed_questions: list[str] = field(default_factory=list)
    states: int = 0
    states_with_missing_evidence: int = 0
    mean_rounds: float = 0.0
    final_recall: float | None = None
    teacher: str = ""
    teacher_calls: int = 0
    # calls whose reply was unusable after the backend's re-ask: the state's SFT target is then
    # the heuristic planner's plan (LLMPlanner's fallback), so these are counted, not hidden
    teacher_parse_failures: int = 0
    teacher_tokens_in: int = 0
    teacher_tokens_out: int = 0
    teacher_failure_examples: list[str] = field(default_factory=list)  # the first few errors

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class _RecordingTeacher:
    """The teacher as the loop's planner: its plan for a state becomes that state's SFT target.

    ``collect_states`` appends the state's record just before the loop asks for the plan, so
    the plan belongs to the newest record."""

    teacher: Planner
    records: list[PlannerStateRecord]
    errors: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.teacher.name

    def plan(self, state: PlannerState) -> PlanResult:
        result = self.teacher.plan(state)
        self.records[-1].teacher_output = intents_to_json(result.intents)
        if result.parse_failed:
            self.errors.append(f"{self.records[-1].state_id}: {result.error}")
        return result


def collection_roles() -> Roles:
    """The roles of a collection run: heuristic seeder, verifier and answerer (the teacher
    plans). A replay of a collected trajectory (``core.training.continuation``) must use the
    same ones to arrive at the saved states."""
    return build_roles({}, RoleBackends(), {})


def make_teacher(backend: LLMBackend | None, prompt: dict[str, Any]) -> Planner:
    """The heuristic planner, or an LLM planner over ``backend`` that sees the prompt the
    student will see (``prompt``: graph_chars, draft and max_tokens, as ``training.prompt``)."""
    if backend is None:
        return HeuristicPlanner()
    return prompted_planner(backend, prompt)


def prompted_planner(
    backend: LLMBackend, prompt: dict[str, Any], complement: bool = False
) -> LLMPlanner:
    """An LLM planner over ``backend`` that renders the ``training.prompt`` settings' prompt
    (graph cut, draft plan, hints, reply limit); ``complement``: the heuristic's intents follow its
    own, as a complementing trained planner deploys them."""
    return LLMPlanner(
        backend,
        graph_chars=prompt["graph_chars"],
        max_tokens=prompt["max_tokens"],
        draft=prompt.get("draft", False),
        complement=complement,
        hints=prompt.get("hints", False),
    )


def record_prompt(prompt: dict[str, Any]) -> Callable[[PlannerStateRecord], list[ChatMessage]]:
    """The chat messages for a collected state under the ``training.prompt`` settings: the one
    place SFT, filtering and GRPO build their prompts, the same ones ``prompted_planner`` sends
    when the trained planner is evaluated."""
    template = plan_template(prompt["draft"])

    def render(record: PlannerStateRecord) -> list[ChatMessage]:
        return render_plan_prompt(
            template, record.planner_state(), prompt["graph_chars"], prompt["hints"]
        )

    return render


def sft_targets(record: PlannerStateRecord, variants: Sequence[Planner] = ()) -> list[str]:
    """The SFT targets of one state: the teacher's plan, then each variant planner's plan for the
    same state when it asks something and differs from the targets before it.

    Several valid plans for one prompt teach the warm-started planner to sample among them, so
    GRPO's groups can differ in reward while the JSON stays valid (a copy-SFT's samples are all
    the teacher's plan; a 2-step SFT's differ by breaking the format, docs/benchmarks.md).
    """
    targets = [record.teacher_output]
    if not variants:
        return targets
    state = record.planner_state()
    for planner in variants:
        intents = planner.plan(state).intents
        text = intents_to_json(intents)
        if intents and text not in targets:
            targets.append(text)
    return targets


def collect_states(
    questions: Sequence[Question],
    memory: MemoryIndex,
    roles: Roles,
    settings: LoopSettings,
    teacher: Planner,
    concurrency: int = 1,
) -> tuple[list[PlannerStateRecord], CollectionReport]:
    """Run MERA with the teacher as planner on each question; keep the state before every
    planner call and the teacher's plan for it."""

    def one(question: Question) -> tuple[list[PlannerStateRecord], Any, list[str]]:
        records: list[PlannerStateRecord] = []
        recorder = _RecordingTeacher(teacher, records)
        teacher_roles = replace(roles, planner=recorder)

        def keep(q: Question, state: PlannerState, _graph: EvidenceGraph, viewed, _accepted):
            gold = list(q.gold_turn_ids)
            records.append(
                PlannerStateRecord(
                    state_id=f"{q.question_id}#{state.round_index}",
                    memory_id=q.memory_id,
                    question_id=q.question_id,
                    question=q.question,
                    round_index=state.round_index,
                    graph_text=state.graph_text,
                    query_history=list(state.query_history),
                    anchors=list(state.anchors),
                    new_anchors=list(state.new_anchors),
                    uncovered_words=list(state.uncovered_words),
                    new_evidence=list(state.new_evidence),
                    max_intents=state.max_intents,
                    gold_turn_ids=gold,
                    viewed_turn_ids=list(viewed),
                    found_turn_ids=[t for t in gold if t in set(viewed)],
                    turn_budget=round_budget(settings, state.round_index),
                    teacher_output="",  # the teacher's plan, set when it has planned
                )
            )

        trajectory = run_mera(
            question, memory, teacher_roles, settings, system="collect", on_plan=keep
        )
        return records, trajectory, recorder.errors

    results = map_bounded(one, list(questions), concurrency=concurrency, desc="collect states")
    report = CollectionReport(questions=len(questions), teacher=teacher.name)
    records: list[PlannerStateRecord] = []
    rounds, recalls = [], []
    for question, result in zip(questions, results, strict=True):
        if isinstance(result, ItemFailure):
            report.failed_questions.append(f"{question.question_id}: {result.message}")
            continue
        question_records, trajectory, teacher_errors = result
        records.extend(question_records)
        _count_teacher_usage(report, trajectory.usage.get("planner"), teacher_errors)
        rounds.append(len(trajectory.rounds))
        if trajectory.rounds and trajectory.rounds[-1].recall_retrieved is not None:
            recalls.append(trajectory.rounds[-1].recall_retrieved)
    if report.teacher_calls and report.teacher_parse_failures == report.teacher_calls:
        raise LLMCallError(
            f"The teacher planner '{teacher.name}' gave no usable plan in any of its "
            f"{report.teacher_calls} calls, e.g. {report.teacher_failure_examples[:1]}; "
            "check llm.teacher_planner"
        )
    report.states = len(records)
    report.states_with_missing_evidence = sum(1 for r in records if r.missing_turn_ids)
    report.mean_rounds = sum(rounds) / len(rounds) if rounds else 0.0
    report.final_recall = sum(recalls) / len(recalls) if recalls else None
    return records, report


def _count_teacher_usage(
    report: CollectionReport, usage: RoleUsage | None, errors: list[str], examples: int = 3
) -> None:
    report.teacher_failure_examples.extend(
        errors[: examples - len(report.teacher_failure_examples)]
    )
    if usage is None:
        return
    report.teacher_calls += usage.calls
    report.teacher_parse_failures += usage.parse_failures
    report.teacher_tokens_in += usage.tokens_in
    report.teacher_tokens_out += usage.tokens_out
