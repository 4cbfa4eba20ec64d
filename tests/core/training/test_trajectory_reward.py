"""``reward.horizon: trajectory``: a plan scored by what the rest of its question's trajectory
recovers, the state reached by replaying the heuristic roles (checked, not assumed)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.loop import run_mera
from mera_pipelines.core.records import Question, to_frame
from mera_pipelines.core.roles.planner import HeuristicPlanner
from mera_pipelines.core.training.continuation import (
    PolicyContinuation,
    ReplayMismatch,
    TrajectoryReplay,
    continuation_report,
)
from mera_pipelines.core.training.reward import RewardSettings
from mera_pipelines.core.training.rollouts import RetrievalReward, score_at_state
from mera_pipelines.core.training.states import PlannerStateRecord, collect_states
from mera_pipelines.core.training.trainers import planner_prompt_settings
from tests.core.llm.test_transformers_backend import build_tiny_model
from tests.core.test_loop import QUESTION, memory, roles  # noqa: F401 (fixtures)
from tests.core.training.test_states_rollouts import LOOP, plan

TRAJECTORY = RewardSettings(horizon="trajectory")
POLICY = RewardSettings(horizon="trajectory", continuation="policy")
PASTA = plan("Theo cooked pasta dinner")
ROUND = RewardSettings()


@pytest.fixture
def replay(memory, roles) -> TrajectoryReplay:
    return TrajectoryReplay([QUESTION], memory, roles, LOOP)


@pytest.fixture
def states(memory, roles) -> list[PlannerStateRecord]:
    records, _ = collect_states([QUESTION], memory, roles, LOOP, HeuristicPlanner())
    return records


def test_the_teachers_own_plans_replay_the_collected_trajectory(memory, roles, replay, states):
    trajectory = run_mera(QUESTION, memory, roles, LOOP)
    assert len(states) == len(trajectory.rounds) >= 2
    scored = 0
    for record in states:
        outcome = score_at_state(record, record.teacher_output, memory, LOOP, TRAJECTORY, replay)
        if outcome.parse_failed:  # an empty teacher plan earns the unparseable reward
            continue
        scored += 1
        # every turn shown from the state's round to the end of the teacher's run, in order
        assert (
            outcome.retrieved_turn_ids == trajectory.viewed_turn_ids[len(record.viewed_turn_ids) :]
        )
    assert scored >= 1 and replay.replays == scored


def test_a_round_one_plan_is_credited_with_the_second_hop_later_rounds_find(memory, replay, states):
    first = states[0]  # nothing viewed; gold D1:1 (the gym) and D2:1 (the dog)
    gym = plan("Maya met Jonas at the climbing gym")
    pasta = plan("Theo cooked pasta dinner")
    by_round = score_at_state(first, gym, memory, LOOP, ROUND)
    assert by_round.retrieved_turn_ids == ["D1:1"] and by_round.reward == pytest.approx(0.5)
    # the loop then follows the anchor Jonas to his dog: x = 2/2, p = 0, R = 1
    whole = score_at_state(first, gym, memory, LOOP, TRAJECTORY, replay)
    assert whole.retrieved_turn_ids[0] == "D1:1" and "D2:1" in whole.retrieved_turn_ids
    assert whole.new_gold_hits == 2 and whole.reward == pytest.approx(1.0)
    # with four rounds the loop recovers both hops after a detour too; with two, a first
    # search off the question costs the second hop: x = 1/2
    detour = score_at_state(first, pasta, memory, LOOP, TRAJECTORY, replay)
    assert detour.retrieved_turn_ids[0] == "D3:1" and detour.reward == pytest.approx(1.0)
    two_rounds = replace(LOOP, max_rounds=2)
    short = TrajectoryReplay([QUESTION], memory, replay.roles, two_rounds)
    assert score_at_state(first, gym, memory, two_rounds, TRAJECTORY, short).reward == 1.0
    detour = score_at_state(first, pasta, memory, two_rounds, TRAJECTORY, short)
    assert detour.retrieved_turn_ids == ["D3:1", "D1:1"] and detour.reward == pytest.approx(0.5)
    broken = score_at_state(first, "no json", memory, LOOP, TRAJECTORY, replay)
    assert broken.reward == TRAJECTORY.unparseable and replay.replays == 2  # none for it


def test_the_replay_stops_as_evaluation_would_after_the_plans_round(memory, roles):
    # Lena's single-hop question: the verifier calls it sufficient after round 1, but the
    # teacher ran 3 rounds (training.collect.min_rounds), so states of rounds 2 and 3 exist
    lena = Question("m/q1", "m", "Where does Maya's sister Lena live?", "Lisbon", "4", ["D2:2"])
    evaluation_loop = replace(LOOP, max_rounds=3)
    records, _ = collect_states(
        [lena], memory, roles, replace(evaluation_loop, min_rounds=3), HeuristicPlanner()
    )
    assert [r.round_index for r in records] == [1, 2, 3]
    replay = TrajectoryReplay([lena], memory, roles, evaluation_loop)
    second = records[1]
    shown = replay.viewed_by_the_end("m/q1", 2, [], second.viewed_turn_ids)
    # round 2 runs (a plan with no intents shows nothing) and the sufficient verdict of the
    # first round still holds: the loop stops there instead of running round 3
    assert shown == second.viewed_turn_ids


def test_a_state_the_replay_does_not_reach_is_a_clear_error(memory, replay, states):
    later = next(r for r in states if r.round_index == 2)
    moved = replace(later, viewed_turn_ids=["D3:2"])
    with pytest.raises(ReplayMismatch, match="'m/q0' does not reach its saved round-2 state"):
        score_at_state(moved, plan("Jonas dog Pepper breed"), memory, LOOP, TRAJECTORY, replay)
    stranger = replace(later, question_id="m/q9")
    with pytest.raises(ReplayMismatch, match="'m/q9' of a training state is not among"):
        score_at_state(stranger, plan("Jonas dog Pepper breed"), memory, LOOP, TRAJECTORY, replay)
    with pytest.raises(ConfigError, match="needs the questions to replay"):
        score_at_state(later, plan("Jonas dog Pepper breed"), memory, LOOP, TRAJECTORY)


def test_horizon_is_checked():
    assert RewardSettings.from_params({"horizon": "trajectory"}).horizon == "trajectory"
    with pytest.raises(
        ConfigError, match=r"reward.horizon must be one of \['round', 'trajectory'\]"
    ):
        RewardSettings.from_params({"horizon": "episode"})
    with pytest.raises(ConfigError, match=r"continuation must be one of \['teacher', 'policy'\]"):
        RewardSettings.from_params({"horizon": "trajectory", "continuation": "oracle"})
    with pytest.raises(ConfigError, match="continuation policy .* needs reward.horizon trajectory"):
        RewardSettings.from_params({"continuation": "policy"})


@pytest.fixture(scope="module")
def pasta_policy(tmp_path_factory):
    """A model being trained whose greedy reply is always the pasta plan (its only token)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = build_tiny_model(tmp_path_factory.mktemp("policy"), PASTA)
    model = AutoModelForCausalLM.from_pretrained(folder)
    model.train()
    return model, AutoTokenizer.from_pretrained(folder)


def test_the_policy_plans_the_rounds_after_the_sampled_plan(memory, roles, states, pasta_policy):
    first = states[0]  # nothing viewed; gold D1:1 (the gym) and D2:1 (the dog)
    gym = plan("Maya met Jonas at the climbing gym")
    two_rounds = replace(LOOP, max_rounds=2)
    replay = TrajectoryReplay([QUESTION], memory, roles, two_rounds)
    # the teacher follows the anchor Jonas to his dog in round 2
    assert score_at_state(first, gym, memory, two_rounds, TRAJECTORY, replay).reward == 1.0
    assert continuation_report(replay) == {"planner": "teacher", "replays": 1, "later_rounds": 1}
    continuation = PolicyContinuation(replay, planner_prompt_settings({}))
    continuation.attach(*pasta_policy)
    # the policy searches pasta instead: round 2 shows Theo's dinner and the dog is missed
    outcome = score_at_state(first, gym, memory, two_rounds, POLICY, replay)
    assert outcome.retrieved_turn_ids == ["D1:1", "D3:1"] and outcome.reward == pytest.approx(0.5)
    assert continuation.report() == {
        "planner": "policy",
        "replays": 2,
        "later_rounds": 2,  # the teacher's round 2 above, the policy's here
        "calls": 1,
        "repaired_calls": 0,
        "failed_calls": 0,
    }
    model, _ = pasta_policy
    assert model.training  # generated in eval mode, then handed back to the trainer as it was


def test_the_teacher_still_leads_the_replay_to_a_later_state(memory, roles, states, pasta_policy):
    replay = TrajectoryReplay([QUESTION], memory, roles, LOOP)
    continuation = PolicyContinuation(replay, planner_prompt_settings({}))
    continuation.attach(*pasta_policy)
    last = states[-1]
    assert last.round_index == len(states) >= 2
    # rounds before the state's are the teacher's (a pasta round 1 would miss the saved state)
    outcome = score_at_state(last, plan("Jonas dog Pepper breed"), memory, LOOP, POLICY, replay)
    assert not outcome.parse_failed and continuation.report()["calls"] == 0


def test_reward_function_reads_the_question_column(memory, replay, states):
    first = states[0]
    reward = RetrievalReward(memory, LOOP, TRAJECTORY, replay)
    gym = [{"role": "assistant", "content": plan("Maya met Jonas at the climbing gym")}]
    columns = dict(
        memory_id=["m"],
        gold_turn_ids=[first.gold_turn_ids],
        viewed_turn_ids=[first.viewed_turn_ids],
        round_index=[1],
    )
    assert reward([gym], [gym], question_id=["m/q0"], **columns) == [pytest.approx(1.0)]
    with pytest.raises(ReplayMismatch, match="not among"):
        reward([gym], [gym], **columns)  # rows without the question cannot be replayed


def test_grpo_node_scores_with_the_replay_of_the_synthetic_questions(
    memory, states, monkeypatch, tmp_path, pasta_policy
):
    from mera_pipelines.core.training.model_store import PlannerModel
    from mera_pipelines.core.training.trainers import TrainingLog
    from mera_pipelines.pipelines.train_planner import nodes

    scored = {}

    def fake_grpo(folder, rows, reward_function, settings, threads, log_metrics, on_policy):
        if on_policy is not None:
            on_policy(*pasta_policy)
        columns = {key: [row[key] for row in rows] for key in rows[0] if key != "prompt"}
        text = scored.get("completion", plan("Maya met Jonas at the climbing gym"))
        reply = [{"role": "assistant", "content": text}]
        scored["rewards"] = reward_function([None] * len(rows), [reply] * len(rows), **columns)
        return tmp_path, TrainingLog(steps=1, step_seconds=[1.0])

    monkeypatch.setattr(nodes, "run_grpo", fake_grpo)
    monkeypatch.setattr(nodes, "_grpo_start", lambda store, params: PlannerModel(tmp_path, {}))
    retained = to_frame(states[:1], PlannerStateRecord)
    questions = to_frame([QUESTION], Question)
    loop = {"turns_first_round": 1, "turns_per_round": 1, "max_rounds": 4, "exhaustion_rounds": 4}
    params = {"reward": {"horizon": "round"}}
    _, report, _ = nodes.train_planner_grpo(retained, None, memory, questions, params, loop)
    assert scored["rewards"] == [pytest.approx(0.5)] and "continuation" not in report
    params = {"reward": {"horizon": "trajectory"}}
    _, report, _ = nodes.train_planner_grpo(retained, None, memory, questions, params, loop)
    assert scored["rewards"] == [pytest.approx(1.0)]
    # the teacher played rounds 2-4 after the plan's (following the anchor Jonas to his dog)
    assert report["continuation"] == {"planner": "teacher", "replays": 1, "later_rounds": 3}
    # the model GRPO trains plans rounds 2-4 (pasta; a repeat of it is no new query, so the
    # heuristic steps in and the dog is still found within the four rounds)
    params = {"reward": {"horizon": "trajectory", "continuation": "policy"}}
    _, report, _ = nodes.train_planner_grpo(retained, None, memory, questions, params, loop)
    assert scored["rewards"] == [pytest.approx(1.0)]
    assert report["continuation"]["planner"] == "policy" and report["continuation"]["calls"] >= 1
    # with teacher_regret the rows carry the teacher's plan: a plan that misses what it finds
    # (the gym turn, half the gold) pays that on top of earning nothing
    scored["completion"] = plan("Theo cooked pasta for dinner")
    params = {"reward": {"teacher_regret": 1.0}}
    _, report, _ = nodes.train_planner_grpo(retained, None, memory, questions, params, loop)
    assert scored["rewards"] == [pytest.approx(-0.5)] and report["below_teacher"] == 1
