"""One question through MERA: seed -> (plan -> retrieve -> verify)* -> answer.

The evidence state is ``s_t = (q, G_t, Q_t, S_t, E_t)``: the question, the evidence graph, the
query history, the viewed turns and the accepted evidence. Each round the planner's intents are
searched over the *whole* memory (excluding viewed turns), the verifier admits what helps and
updates the graph, and the loop stops when the evidence is sufficient (after a minimum
exploration), when several rounds in a row bring nothing (exhaustion), or at ``max_rounds``.

``use_graph=False`` is the "flat" ablation: the verifier still gates evidence, but the planner
and the answerer see the accepted evidence as a flat list, with no graph or anchors.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from mera_pipelines.core.graph import EvidenceGraph
from mera_pipelines.core.memory import MemoryIndex, SearchSettings, TurnCandidate
from mera_pipelines.core.records import Question, RoleUsage, RoundLog, Trajectory
from mera_pipelines.core.roles.answerer import Answerer
from mera_pipelines.core.roles.planner import Planner, PlannerState
from mera_pipelines.core.roles.seeder import Seeder
from mera_pipelines.core.roles.verifier import Verifier
from mera_pipelines.core.settings import settings_from_params
from mera_pipelines.core.text import content_words

TERMINATIONS = ("sufficient", "exhausted", "max_rounds", "single_shot")


@dataclass(frozen=True)
class LoopSettings:
    max_rounds: int = 10  # T_max (paper: 10)
    min_rounds: int = 1  # rounds before "sufficient" may stop the loop
    exhaustion_rounds: int = 2  # consecutive rounds with nothing new -> exhausted
    max_intents: int = 3
    turns_first_round: int = 12  # new parent turns shown to the verifier in round 1
    turns_per_round: int = 6  # ... and in each later round
    search: SearchSettings = SearchSettings()
    use_graph: bool = True
    graph_text_chars: int = 2000

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> LoopSettings:
        params = dict(params)
        search = SearchSettings.from_params(params.pop("retrieval", {}))
        return settings_from_params(cls, {**params, "search": search}, "loop")


@dataclass
class Roles:
    seeder: Seeder
    planner: Planner
    verifier: Verifier
    answerer: Answerer


@dataclass
class _State:
    """The mutable evidence state of one question."""

    graph: EvidenceGraph
    queries: list[str] = field(default_factory=list)
    viewed: dict[str, TurnCandidate] = field(default_factory=dict)
    accepted: list[TurnCandidate] = field(default_factory=list)
    anchor_mark: int = 0
    new_evidence: list[str] = field(default_factory=list)
    usage: dict[str, RoleUsage] = field(default_factory=dict)


# Called before every planner call with (question, planner state, graph, viewed, accepted);
# training uses it to save states.
StateHook = Callable[[Question, PlannerState, EvidenceGraph, list[str], list[str]], None]


def run_mera(
    question: Question,
    memory: MemoryIndex,
    roles: Roles,
    settings: LoopSettings = LoopSettings(),
    system: str = "mera",
    on_plan: StateHook | None = None,
) -> Trajectory:
    started = time.perf_counter()
    gold = set(question.gold_turn_ids)
    seed = roles.seeder.seed(question)
    state = _State(graph=seed.graph if settings.use_graph else EvidenceGraph())
    _charge(state.usage, "seeder", seed.tokens_in, seed.tokens_out, failed=seed.error is not None)
    rounds: list[RoundLog] = []
    idle_rounds = 0
    termination = "max_rounds"
    for round_index in range(1, settings.max_rounds + 1):
        round_started = time.perf_counter()
        round_usage: dict[str, RoleUsage] = {}
        planner_state = _planner_state(question, state, round_index, settings)
        if on_plan is not None:
            on_plan(
                question,
                planner_state,
                state.graph,
                list(state.viewed),
                [c.turn_id for c in state.accepted],
            )
        plan = roles.planner.plan(planner_state)
        _charge(round_usage, "planner", plan.tokens_in, plan.tokens_out, failed=plan.parse_failed)
        queries = [intent.query_text() for intent in plan.intents]
        state.queries.extend(queries)
        candidates = retrieve_round(
            memory, queries, question.memory_id, settings, round_index, state.viewed
        )
        for candidate in candidates:
            state.viewed[candidate.turn_id] = candidate
        state.anchor_mark = state.graph.mark()
        verdict = roles.verifier.verify(
            question, state.graph, candidates, state.accepted, round_index
        )
        _charge(
            round_usage,
            "verifier",
            verdict.tokens_in,
            verdict.tokens_out,
            failed=verdict.error is not None,
        )
        by_id = {c.turn_id: c for c in candidates}
        newly_accepted = [by_id[t] for t in verdict.accepted_turn_ids if t in by_id]
        state.accepted.extend(newly_accepted)
        state.new_evidence = [c.matched_facts[0] for c in newly_accepted if c.matched_facts]
        graph_changed = False
        if settings.use_graph:
            graph_changed = state.graph.merge(verdict.delta).changed
        rounds.append(
            RoundLog(
                round=round_index,
                intents=plan.intents,
                queries=queries,
                retrieved_turn_ids=[c.turn_id for c in candidates],
                accepted_turn_ids=[c.turn_id for c in newly_accepted],
                graph_nodes=state.graph.size()[0],
                graph_relations=state.graph.size()[1],
                sufficient=verdict.sufficient,
                recall_retrieved=_recall(gold, state.viewed),
                recall_accepted=_recall(gold, [c.turn_id for c in state.accepted]),
                usage=round_usage,
                seconds=time.perf_counter() - round_started,
            )
        )
        _merge_usage(state.usage, round_usage)
        if verdict.sufficient and round_index >= settings.min_rounds:
            termination = "sufficient"
            break
        nothing_new = not plan.intents or not candidates or not (newly_accepted or graph_changed)
        idle_rounds = idle_rounds + 1 if nothing_new else 0
        if idle_rounds >= settings.exhaustion_rounds:
            termination = "exhausted"
            break
    answer = roles.answerer.answer(
        question,
        state.graph.to_text(settings.graph_text_chars) if settings.use_graph else "",
        state.accepted,
        termination == "exhausted",
    )
    _charge(
        state.usage,
        "answerer",
        answer.tokens_in,
        answer.tokens_out,
        failed=answer.error is not None,
    )
    return Trajectory(
        question_id=question.question_id,
        memory_id=question.memory_id,
        system=system,
        rounds=rounds,
        termination=termination,
        answer=answer.answer,
        viewed_turn_ids=list(state.viewed),
        accepted_turn_ids=[c.turn_id for c in state.accepted],
        graph=state.graph.to_dict() if settings.use_graph else {},
        usage=state.usage,
        seconds=time.perf_counter() - started,
    )


def round_budget(settings: LoopSettings, round_index: int) -> int:
    """New parent turns shown to the verifier in round ``round_index`` (1-based)."""
    return settings.turns_first_round if round_index == 1 else settings.turns_per_round


def retrieve_round(
    memory: MemoryIndex,
    queries: list[str],
    memory_id: str,
    settings: LoopSettings,
    round_index: int,
    viewed: Iterable[str],
) -> list[TurnCandidate]:
    """One round's retrieval over the whole memory: the queries' merged top turns, viewed
    turns excluded, cut to the round's budget. Training's reward runs exactly this."""
    budget = round_budget(settings, round_index)
    # Each query may fill the whole round budget; the merged list keeps the best turns.
    search = replace(settings.search, k=max(settings.search.k, budget))
    return memory.search(queries, memory_id, search, exclude_turn_ids=viewed)[:budget]


def _planner_state(
    question: Question, state: _State, round_index: int, settings: LoopSettings
) -> PlannerState:
    evidence_words = {
        word.lower()
        for candidate in state.accepted
        for fact in candidate.facts
        for word in content_words(fact)
    }
    uncovered = [w for w in content_words(question.question) if w.lower() not in evidence_words]
    if settings.use_graph:
        graph_text = state.graph.to_text(settings.graph_text_chars)
        anchors = state.graph.anchor_labels()
        new_anchors = state.graph.new_anchors_since(state.anchor_mark)
    else:  # flat: the accepted evidence as a list, no structure to follow
        graph_text = "\n".join(c.render() for c in state.accepted)[: settings.graph_text_chars]
        anchors, new_anchors = [], []
    return PlannerState(
        question=question.question,
        graph_text=graph_text,
        query_history=list(state.queries),
        anchors=anchors,
        new_anchors=new_anchors,
        uncovered_words=uncovered if state.accepted else [],
        round_index=round_index,
        max_intents=settings.max_intents,
        new_evidence=list(state.new_evidence),
    )


def _recall(gold: set[str], found) -> float | None:
    if not gold:
        return None
    return len(gold & set(found)) / len(gold)


def _charge(
    usage: dict[str, RoleUsage], role: str, tokens_in: int, tokens_out: int, failed: bool = False
) -> None:
    entry = usage.setdefault(role, RoleUsage())
    entry.tokens_in += tokens_in
    entry.tokens_out += tokens_out
    entry.calls += 1
    entry.parse_failures += int(failed)


def _merge_usage(total: dict[str, RoleUsage], part: dict[str, RoleUsage]) -> None:
    for role, entry in part.items():
        target = total.setdefault(role, RoleUsage())
        target.tokens_in += entry.tokens_in
        target.tokens_out += entry.tokens_out
        target.calls += entry.calls
        target.parse_failures += entry.parse_failures
