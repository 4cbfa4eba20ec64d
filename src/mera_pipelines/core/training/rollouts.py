"""Executing a planner output against the memory, the GRPO reward function, and rollout
filtering (keep states where the planner's samples disagree about what they recover)."""

from __future__ import annotations

import json
import logging
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.loop import LoopSettings, retrieve_round
from mera_pipelines.core.memory import MemoryIndex
from mera_pipelines.core.records import Intent
from mera_pipelines.core.roles.planner import (
    HeuristicPlanner,
    complement_intents,
    intents_to_json,
    parse_intents,
)
from mera_pipelines.core.training.continuation import TrajectoryReplay
from mera_pipelines.core.training.reward import (
    RewardSettings,
    gold_progress,
    parse_plan_output,
    retrieval_reward,
    total_reward,
)
from mera_pipelines.core.training.states import PlannerStateRecord

logger = logging.getLogger(__name__)


@dataclass
class RolloutOutcome:
    reward: float
    recovered_share: float  # x
    found_share: float  # p
    new_gold_hits: int
    parse_failed: bool
    penalty: float
    retrieved_turn_ids: list[str] = field(default_factory=list)
    cut_off: bool = False  # by the token limit (so also parse_failed)
    no_intent: bool = False  # parsed, but no usable intent (so also parse_failed)
    retrieval: float = 0.0  # R_ret alone: no format penalty; 0 if unparseable


def teacher_regret(own: RolloutOutcome, teacher: RolloutOutcome) -> float:
    """What the teacher's plan at the state earns (R_ret) beyond this output: 0 if not more."""
    return max(0.0, teacher.retrieval - own.retrieval)


def score_completion(
    text: str,
    memory_id: str,
    gold_turn_ids: Sequence[str],
    viewed_turn_ids: Sequence[str],
    round_index: int,
    memory: MemoryIndex,
    loop: LoopSettings,
    reward: RewardSettings,
    replay: TrajectoryReplay | None = None,
    question_id: str = "",
    complement: Sequence[Intent] = (),
) -> RolloutOutcome:
    """Run the intents of ``text`` as the loop would at this state and score what they find:
    their own search, or with ``reward.horizon: trajectory`` every turn the rest of the
    question's trajectory shows (``replay`` plays it; ``question_id`` names the question).
    ``complement``: the heuristic's intents for the state, searched after the output's, as a
    complementing planner deploys them (``training.prompt.complement``)."""
    plan = parse_plan_output(text, reward)
    if plan.parse_failed:
        return RolloutOutcome(
            reward=total_reward(plan, None, reward),
            recovered_share=0.0,
            found_share=0.0,
            new_gold_hits=0,
            parse_failed=True,
            penalty=0.0,
            cut_off=plan.cut_off,
            no_intent=plan.no_intent,
        )
    intents = plan.intents
    if complement:
        intents = complement_intents(intents, list(complement), [], loop.max_intents)
    if reward.horizon == "trajectory":
        if replay is None:
            raise ConfigError("reward.horizon trajectory needs the questions to replay")
        shown = replay.viewed_by_the_end(question_id, round_index, intents, viewed_turn_ids)
        seen = set(viewed_turn_ids)
        retrieved = [turn for turn in shown if turn not in seen]
    else:
        queries = [intent.query_text() for intent in intents]
        candidates = retrieve_round(memory, queries, memory_id, loop, round_index, viewed_turn_ids)
        retrieved = [c.turn_id for c in candidates]
    progress = gold_progress(gold_turn_ids, viewed_turn_ids, retrieved)
    return RolloutOutcome(
        reward=total_reward(plan, progress, reward),
        retrieval=retrieval_reward(progress.recovered_share, progress.found_share),
        recovered_share=progress.recovered_share,
        found_share=progress.found_share,
        new_gold_hits=len(progress.new_hits),
        parse_failed=False,
        penalty=plan.penalty,
        retrieved_turn_ids=retrieved,
    )


def score_at_state(
    record: PlannerStateRecord,
    text: str,
    memory: MemoryIndex,
    loop: LoopSettings,
    reward: RewardSettings,
    replay: TrajectoryReplay | None = None,
    complement: bool = False,
) -> RolloutOutcome:
    """``score_completion`` at a collected state: its memory, gold and viewed turns, round
    (and with ``complement`` the heuristic's intents there after the output's)."""
    return score_completion(
        text,
        record.memory_id,
        record.gold_turn_ids,
        record.viewed_turn_ids,
        record.round_index,
        memory,
        loop,
        reward,
        replay,
        record.question_id,
        heuristic_intents(record) if complement else (),
    )


def heuristic_intents(record: PlannerStateRecord) -> list[Intent]:
    """The heuristic planner's intents at a collected state: what a complementing planner adds."""
    return HeuristicPlanner().plan(record.planner_state()).intents


def complement_column(record: PlannerStateRecord) -> str:
    """``heuristic_intents`` as the reply JSON: the GRPO dataset column the reward reads."""
    return intents_to_json(heuristic_intents(record))


@dataclass
class TargetChoiceReport:
    """How ``best_reward_targets`` chose: states where a variant's plan beat the teacher's."""

    states: int = 0
    variant_chosen: int = 0
    # of those, states where it recovers more missing evidence (not only a smaller penalty)
    variant_recovers_more: int = 0
    mean_teacher_reward: float | None = None
    mean_chosen_reward: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return vars(self).copy()


def best_reward_targets(
    records: Sequence[PlannerStateRecord],
    candidates: Sequence[Sequence[str]],
    memory: MemoryIndex,
    loop: LoopSettings,
    reward: RewardSettings,
    progress: Callable[[Sequence], Any] | None = None,
    replay: TrajectoryReplay | None = None,
) -> tuple[list[str], TargetChoiceReport]:
    """Per state, the candidate plan (the teacher's first) that earns the highest reward there.

    Ties go to the earlier candidate, so a variant replaces the teacher's plan only where it
    does strictly better: SFT then imitates the best of the rules' plans state by state
    (docs/training.md, "Best-reward targets", for what that is worth on the LoCoMo split)."""
    chosen: list[str] = []
    teacher_rewards, chosen_rewards = [], []
    report = TargetChoiceReport(states=len(records))
    pairs = list(zip(records, candidates, strict=True))
    for record, plans in progress(pairs) if progress else pairs:
        outcomes = [score_at_state(record, text, memory, loop, reward, replay) for text in plans]
        best = max(range(len(plans)), key=lambda i: (outcomes[i].reward, -i))
        chosen.append(plans[best])
        report.variant_chosen += best > 0
        report.variant_recovers_more += outcomes[best].recovered_share > outcomes[0].recovered_share
        teacher_rewards.append(outcomes[0].reward)
        chosen_rewards.append(outcomes[best].reward)
    if records:
        report.mean_teacher_reward = sum(teacher_rewards) / len(records)
        report.mean_chosen_reward = sum(chosen_rewards) / len(records)
    return chosen, report


def completion_text(completion: Any) -> str:
    """trl passes a conversational completion as [{"role": "assistant", "content": ...}]."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    return str(completion)


class RetrievalReward:
    """The GRPO reward function: each completion's intents searched over the memory its row
    names; gold, viewed turns and the round are dataset columns. Keeps running totals.
    With ``reward.teacher_regret`` the rows' ``teacher_plan`` column is scored too, once per
    state, and each completion pays its regret against it."""

    __name__ = "retrieval_reward"  # trl names the reward's logged metrics after this

    def __init__(
        self,
        memory: MemoryIndex,
        loop: LoopSettings,
        reward: RewardSettings,
        replay: TrajectoryReplay | None = None,
    ) -> None:
        self.memory = memory
        self.loop = loop
        self.reward = reward
        self.replay = replay
        self.completions = 0
        self.parse_failures = 0
        self.cut_off = 0  # of the parse failures, completions cut off by the token limit
        self.no_intent = 0  # of the parse failures, replies that name no usable intent
        self.below_teacher = 0  # completions that earned less than the teacher's plan at the state

    def __call__(
        self,
        prompts: list[Any],
        completions: list[Any],
        memory_id: list[str],
        gold_turn_ids: list[list[str]],
        viewed_turn_ids: list[list[str]],
        round_index: list[int],
        question_id: list[str] | None = None,
        complement_plan: list[str] | None = None,
        teacher_plan: list[str] | None = None,
        log_metric: Callable[[str, float], None] | None = None,
        **_: Any,
    ) -> list[float]:
        # a complementing planner's rows carry the heuristic's plan for their state
        complements = [
            parse_intents(json.loads(plan)) if plan else [] for plan in complement_plan or []
        ]

        def score(text: str, i: int) -> RolloutOutcome:
            return score_completion(
                text,
                memory_id[i],
                gold_turn_ids[i],
                viewed_turn_ids[i],
                int(round_index[i]),
                self.memory,
                self.loop,
                self.reward,
                self.replay,
                question_id[i] if question_id else "",
                complements[i] if complements else (),
            )

        outcomes = [score(completion_text(c), i) for i, c in enumerate(completions)]
        rewards = [o.reward for o in outcomes]
        regrets: list[float] = []
        if self.reward.teacher_regret > 0:
            if not teacher_plan:
                raise ConfigError("reward.teacher_regret needs the rows' teacher_plan column")
            # a group's completions share their state: score its teacher plan once
            taught: dict[tuple, RolloutOutcome] = {}
            for i, outcome in enumerate(outcomes):
                key = (
                    memory_id[i],
                    question_id[i] if question_id else "",
                    round_index[i],
                    tuple(viewed_turn_ids[i]),
                    tuple(gold_turn_ids[i]),
                    teacher_plan[i],
                )
                if key not in taught:
                    taught[key] = score(teacher_plan[i], i)
                regrets.append(teacher_regret(outcome, taught[key]))
            rewards = [
                r - self.reward.teacher_regret * g for r, g in zip(rewards, regrets, strict=True)
            ]
            self.below_teacher += sum(g > 0 for g in regrets)
        self.completions += len(outcomes)
        failures = sum(o.parse_failed for o in outcomes)
        self.parse_failures += failures
        cut_off = sum(o.cut_off for o in outcomes)
        self.cut_off += cut_off
        no_intent = sum(o.no_intent for o in outcomes)
        self.no_intent += no_intent
        if log_metric is not None and outcomes:
            log_metric("recall_gained", sum(o.recovered_share for o in outcomes) / len(outcomes))
            log_metric("parse_failure_rate", failures / len(outcomes))
            # the part of those failures cut off by max_completion_length: plans too long
            log_metric("cut_off_rate", cut_off / len(outcomes))
            # and the part that names no intent: {"intents": []} is valid JSON, not a broken reply
            log_metric("no_intent_rate", no_intent / len(outcomes))
            # short or long queries, too many intents or entities: is the format learnt?
            log_metric("format_penalty", sum(o.penalty for o in outcomes) / len(outcomes))
            if regrets:  # how far below the teacher's plan the samples fall, on average
                log_metric("teacher_regret", sum(regrets) / len(regrets))
        return rewards


# ---- rollout filtering ----------------------------------------------------------------------

Sampler = Callable[[PlannerStateRecord, int], list[str]]  # (state, n) -> n completions


@dataclass
class FilterReport:
    memories: int = 0
    questions: int = 0
    states_collected: int = 0
    states_with_missing_evidence: int = 0
    # of those, states where the teacher's own plan leaves missing evidence unrecovered: the
    # ones a student can improve on (a measure of how hard the synthetic questions are)
    teacher_short_states: int = 0
    states_into_filtering: int = 0
    dropped_all_zero: int = 0
    dropped_all_full: int = 0
    dropped_format_only: int = 0  # with drop_format_only: groups that only teach the format
    retained: int = 0
    group_size: int = 0
    rollouts: int = 0
    rollout_parse_failures: int = 0
    rollout_cut_off: int = 0  # of those, rollouts cut off by the token limit
    rollout_no_intent: int = 0  # of those, rollouts that parse but name no usable intent
    # retained states whose parsed rollouts all recover the same share: only the unparseable
    # ones differ, so there GRPO learns to reply in the planner's format, not to search better
    retained_format_only: int = 0
    mean_rollout_reward: float | None = None
    mean_rollout_recovered: float | None = None

    @property
    def retained_share(self) -> float:
        return self.retained / self.states_into_filtering if self.states_into_filtering else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**vars(self), "retained_share": self.retained_share}

    def table(self) -> list[dict[str, Any]]:
        """The paper-style state table, one row."""
        return [
            {
                "memories": self.memories,
                "qas": self.questions,
                "states_collected": self.states_collected,
                "states_into_filtering": self.states_into_filtering,
                "retained": self.retained,
                "retained_pct": round(100 * self.retained_share, 1),
            }
        ]


def group_verdict(shares: Sequence[float], parse_failed: Sequence[bool]) -> str:
    """What one state's group of rollouts (each one's recovered share, and whether it failed to
    parse) can teach GRPO. "all_zero" / "all_full": nothing (every sample recovers none / all
    of the missing evidence; filtering drops the state); "format_only": the parsed samples all
    recover the same share, only the unparseable ones differ, so the group rewards replying in
    the planner's format; "search": parsed samples recover different shares, so it rewards the
    better queries."""
    if all(share == 0.0 for share in shares):
        return "all_zero"
    if all(share == 1.0 for share in shares):
        return "all_full"
    parsed = {share for share, failed in zip(shares, parse_failed, strict=True) if not failed}
    return "format_only" if len(parsed) <= 1 else "search"


def _take(
    ordered: list[PlannerStateRecord], count: int, later_round_share: float | None
) -> list[PlannerStateRecord]:
    """The first ``count`` states, with ``later_round_share`` of the places (rounded up) kept
    for states after round 1; both parts keep ``ordered``'s order."""
    if later_round_share is None:
        return ordered[:count]
    later = [r for r in ordered if r.round_index > 1]
    quota = min(len(later), math.ceil(later_round_share * count))
    chosen = {r.state_id for r in later[:quota]}
    rest = [r.state_id for r in ordered if r.state_id not in chosen]
    chosen.update(rest[: count - len(chosen)])
    return [r for r in ordered if r.state_id in chosen]


def filter_states(
    records: Sequence[PlannerStateRecord],
    sampler: Sampler,
    memory: MemoryIndex,
    loop: LoopSettings,
    reward: RewardSettings,
    group_size: int,
    max_states: int | None = None,
    seed: int = 0,
    progress: Callable[[Sequence], Any] | None = None,
    prefer_teacher_short: bool = True,
    later_round_share: float | None = None,
    replay: TrajectoryReplay | None = None,
    complement: bool = False,
    drop_format_only: bool = False,
) -> tuple[list[PlannerStateRecord], list[dict[str, Any]], FilterReport]:
    """Sample ``group_size`` outputs per state and keep the states that teach something: drop
    those where every rollout recovers nothing, or every one recovers all missing evidence.
    States with nothing missing never enter (no output can earn a reward there).
    ``group_size=0`` turns the rollouts off: every state with missing evidence is kept.

    When ``max_states`` cuts the candidates, ``prefer_teacher_short`` takes the states where
    the teacher's plan falls short first: there the SFT planner, which imitates the teacher,
    has something to gain, while states the teacher solves tend to be solved by every sample
    and dropped after costing their rollouts. ``later_round_share`` reserves that share of the
    ``max_states`` places for states after round 1 (fewer if there are fewer): most collected
    states are round-1 states, while the rounds after it are where a planner adds to what the
    first search found. ``complement``: score each rollout as a complementing planner
    deploys it, the heuristic's intents for the state after the rollout's.
    ``drop_format_only`` also drops the groups whose parsed samples all recover the same share
    (``group_verdict`` "format_only"): GRPO then trains only where better queries find more."""
    if later_round_share is not None and not 0.0 <= later_round_share <= 1.0:
        raise ConfigError(
            f"training.filtering.later_round_share must be in [0, 1], got {later_round_share}"
        )
    report = FilterReport(
        memories=len({r.memory_id for r in records}),
        questions=len({r.question_id for r in records}),
        states_collected=len(records),
        group_size=group_size,
    )
    candidates = [r for r in records if r.missing_turn_ids]
    report.states_with_missing_evidence = len(candidates)
    short = {
        r.state_id
        for r in candidates
        if score_at_state(r, r.teacher_output, memory, loop, reward, replay).recovered_share < 1.0
    }
    report.teacher_short_states = len(short)
    if max_states is not None and len(candidates) > max_states:
        candidates = random.Random(seed).sample(candidates, len(candidates))
        if prefer_teacher_short:  # a stable sort keeps the shuffled order within each part
            candidates.sort(key=lambda r: r.state_id not in short)
        candidates = _take(candidates, max_states, later_round_share)
    report.states_into_filtering = len(candidates)
    if group_size == 0:  # filtering off: every state with missing evidence trains
        report.retained = len(candidates)
        return list(candidates), [], report
    retained: list[PlannerStateRecord] = []
    rollout_rows: list[dict[str, Any]] = []
    rewards, recovered = [], []
    for record in progress(candidates) if progress else candidates:
        outcomes = []
        for sample_index, text in enumerate(sampler(record, group_size)):
            outcome = score_at_state(record, text, memory, loop, reward, replay, complement)
            outcomes.append(outcome)
            rollout_rows.append(
                {
                    "state_id": record.state_id,
                    "sample": sample_index,
                    "completion": text,
                    "reward": outcome.reward,
                    "recovered_share": outcome.recovered_share,
                    "parse_failed": outcome.parse_failed,
                    "no_intent": outcome.no_intent,
                }
            )
        report.rollouts += len(outcomes)
        report.rollout_parse_failures += sum(o.parse_failed for o in outcomes)
        report.rollout_cut_off += sum(o.cut_off for o in outcomes)
        report.rollout_no_intent += sum(o.no_intent for o in outcomes)
        rewards.extend(o.reward for o in outcomes)
        recovered.extend(o.recovered_share for o in outcomes)
        verdict = group_verdict(
            [o.recovered_share for o in outcomes], [o.parse_failed for o in outcomes]
        )
        if verdict == "all_zero":
            report.dropped_all_zero += 1
        elif verdict == "all_full":
            report.dropped_all_full += 1
        elif verdict == "format_only" and drop_format_only:
            report.dropped_format_only += 1
        else:
            retained.append(record)
            report.retained_format_only += verdict == "format_only"
    report.retained = len(retained)
    report.mean_rollout_reward = sum(rewards) / len(rewards) if rewards else None
    report.mean_rollout_recovered = sum(recovered) / len(recovered) if recovered else None
    return retained, rollout_rows, report
