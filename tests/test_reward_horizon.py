"""benchmarks/reward_horizon.py: the teacher's and variant rules' plans scored by their own round
and by the rest of the trajectory, on the small two-hop memory of the loop tests."""

from __future__ import annotations

import pytest

from mera_pipelines.core.roles.planner import HeuristicPlanner
from mera_pipelines.core.training.states import collect_states
from tests.core.test_loop import QUESTION, memory, roles  # noqa: F401 (fixtures)
from tests.core.training.test_states_rollouts import LOOP
from tests.support.benchmark_scripts import load_benchmark_script


@pytest.fixture(scope="module")
def reward_horizon():
    return load_benchmark_script("reward_horizon")


def test_separation_counts_states_the_shares_tell_apart(reward_horizon):
    shares = [[0.5, 0.5], [0.0, 1.0], [1.0, 0.0, 1.0], [0.25]]
    counts = reward_horizon.separation(shares)
    assert counts["states"] == 4
    assert counts["states_where_plans_differ"] == 2
    assert counts["states_where_a_variant_recovers_more"] == 1  # the teacher's share is first
    assert counts["mean_teacher_share"] == pytest.approx((0.5 + 0.0 + 1.0 + 0.25) / 4)
    assert counts["mean_best_share"] == pytest.approx((0.5 + 1.0 + 1.0 + 0.25) / 4)
    assert reward_horizon.separation([])["mean_teacher_share"] is None


def test_measure_scores_every_plan_by_both_horizons(reward_horizon, memory, roles):
    records, _ = collect_states([QUESTION], memory, roles, LOOP, HeuristicPlanner())
    variants = {"one_query": {"keyword_intent": False}, "no_topics": {"topic_labels": False}}
    result = reward_horizon.measure(records, [QUESTION], variants, memory, LOOP)
    assert result["states"] == len(records)
    assert 1 <= result["states_with_several_plans"] <= len(records)
    by_round, whole = result["round"], result["trajectory"]
    # the rest of the trajectory only adds turns: no plan recovers less by it
    assert whole["mean_teacher_share"] >= by_round["mean_teacher_share"]
    assert whole["mean_best_share"] >= by_round["mean_best_share"]
    assert whole["mean_teacher_share"] > by_round["mean_teacher_share"]  # round 1's second hop
    assert result["replays"] >= len(records) and result["median_replay_seconds"] > 0
    by_round = result["by_round"]
    assert sorted(by_round, key=int) == [str(r.round_index) for r in records]  # one state each
    assert (
        sum(part["round"]["states_where_plans_differ"] for part in by_round.values())
        == (result["round"]["states_where_plans_differ"])
    )
