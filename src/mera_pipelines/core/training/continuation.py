"""The rest of a question's trajectory after a sampled plan: ``reward.horizon: trajectory``.

A planner state's reward normally counts the evidence its plan's own search recovers. But a
plan's search also changes what the verifier accepts, the graph, the next plans, and whether
the loop stops. Here a plan is played at its state and the loop runs on to its end with the
teacher's (heuristic) roles, so the reward can count the gold turns the whole remaining
trajectory shows. (On the LoCoMo split, with 3 rounds, it tells the rules' plans apart on no
more states than the round's own search: docs/training.md, "Reward horizon".)

With ``play_on_with`` another planner plans the rounds after the sampled plan's: the policy
being trained (``reward.continuation: policy``), so a plan is credited with what the planner
itself, not the teacher, makes of it later, as in evaluation.

The state is reached by replaying the question from round 1 with the same roles: the heuristic
roles are deterministic, so the replay arrives at the state the teacher saved, which is checked
(the turns viewed before the plan must be the saved ones) rather than assumed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.graph import EvidenceGraph
from mera_pipelines.core.llm.transformers_backend import TransformersBackend
from mera_pipelines.core.loop import LoopSettings, Roles, run_mera
from mera_pipelines.core.memory import MemoryIndex
from mera_pipelines.core.records import Intent, Question
from mera_pipelines.core.roles.planner import Planner, PlannerState, PlanResult
from mera_pipelines.core.training.states import prompted_planner


class ReplayMismatch(ConfigError):
    """A saved state the replay does not reach: other roles, loop settings or memory."""


@dataclass
class _PlanAtRound:
    """The loop's planner: the teacher's plans before ``round_index`` (they lead to the saved
    state), ``intents`` at it, and ``after``'s plans (the teacher's if none) later."""

    teacher: Planner
    round_index: int
    intents: list[Intent]
    after: Planner | None = None
    name: str = "sampled plan, then the teacher"
    later_rounds: int = 0  # rounds planned after the sampled plan's

    def plan(self, state: PlannerState) -> PlanResult:
        if state.round_index == self.round_index:
            return PlanResult(intents=list(self.intents))
        if state.round_index < self.round_index:
            return self.teacher.plan(state)
        self.later_rounds += 1
        return (self.after or self.teacher).plan(state)


class TrajectoryReplay:
    """Plays a plan at a saved state and the rest of the question with ``roles``.

    ``loop`` is the evaluation loop: from the plan's round on, the loop stops as it would in
    evaluation (a "sufficient" verdict, exhaustion, the round budget). Before it, the loop may
    not stop, as the teacher's collection run did not (it saved a state at that round)."""

    def __init__(
        self,
        questions: Sequence[Question],
        memory: MemoryIndex,
        roles: Roles,
        loop: LoopSettings,
    ) -> None:
        self.questions = {q.question_id: q for q in questions}
        self.memory = memory
        self.roles = roles
        self.loop = loop
        self.replays = 0
        # rounds the loop ran on after a sampled plan's, over all replays: how often the
        # continuation (teacher or policy) had a say in the reward at all
        self.later_rounds = 0
        self.planner_after: Planner | None = None

    def play_on_with(self, planner: Planner) -> None:
        """Plan the rounds after a sampled plan's with ``planner`` instead of the teacher."""
        self.planner_after = planner

    def viewed_by_the_end(
        self,
        question_id: str,
        round_index: int,
        intents: list[Intent],
        viewed_before: Sequence[str],
    ) -> list[str]:
        """Every turn the trajectory shows, with ``intents`` as the plan of ``round_index``."""
        question = self.questions.get(question_id)
        if question is None:
            raise ReplayMismatch(
                f"reward.horizon trajectory: question '{question_id}' of a training state is "
                "not among the synthetic questions; collect the states again from them"
            )
        arrived: list[list[str]] = []

        def check(_q: Question, state: PlannerState, _g: EvidenceGraph, viewed, _accepted):
            if state.round_index == round_index:
                arrived.append(list(viewed))

        planner = _PlanAtRound(self.roles.planner, round_index, intents, self.planner_after)
        roles = replace(self.roles, planner=planner)
        loop = replace(self.loop, min_rounds=max(self.loop.min_rounds, round_index))
        trajectory = run_mera(question, self.memory, roles, loop, system="replay", on_plan=check)
        self.replays += 1
        self.later_rounds += planner.later_rounds
        if not arrived or arrived[0] != list(viewed_before):
            raise ReplayMismatch(
                f"reward.horizon trajectory: the replay of question '{question_id}' does not "
                f"reach its saved round-{round_index} state (turns viewed before the plan "
                "differ). The replay uses the heuristic roles and the evaluation loop; states "
                "collected by an LLM teacher, or with other loop or memory settings, cannot be "
                "replayed: collect them again, or use reward.horizon round"
            )
        return list(trajectory.viewed_turn_ids)


class PolicyContinuation:
    """``reward.continuation: policy``: once GRPO has built its trainer, the model being
    trained plans a replay's rounds after the sampled plan's, as evaluation runs it (greedy,
    on the prompt it trains on, the heuristic stepping in on a failed reply). Counts its calls
    for the training report."""

    def __init__(self, replay: TrajectoryReplay, prompt: dict[str, Any]) -> None:
        self.replay = replay
        self.prompt = prompt  # ``training.prompt`` settings: graph_chars, max_tokens, ...
        self.backend: TransformersBackend | None = None

    def attach(self, model: Any, tokenizer: Any) -> None:
        self.backend = TransformersBackend.from_loaded(model, tokenizer, "policy")
        complement = self.prompt.get("complement", False)
        self.replay.play_on_with(prompted_planner(self.backend, self.prompt, complement))

    def report(self) -> dict[str, Any]:
        usage = self.backend.usage if self.backend else None
        return {
            **continuation_report(self.replay, "policy"),
            "calls": usage.calls if usage else 0,
            "repaired_calls": usage.repaired_calls if usage else 0,
            # replies that stayed unusable after the re-ask: the heuristic planned that round
            "failed_calls": usage.failed_calls if usage else 0,
        }


def continuation_report(replay: TrajectoryReplay, planner: str = "teacher") -> dict[str, Any]:
    """How often rounds after the sampled plans could change the trajectory reward at all: the
    replays scored and the later rounds planned in them (by ``planner``)."""
    return {"planner": planner, "replays": replay.replays, "later_rounds": replay.later_rounds}
