"""benchmarks/state_mix.py: which question kinds the training states come from, per stage, on
versioned datasets written by the test in a project's layout."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.support.benchmark_scripts import load_benchmark_script


@pytest.fixture(scope="module")
def state_mix():
    return load_benchmark_script("state_mix")


QUESTIONS = pd.DataFrame(
    {
        "question_id": ["q1", "q2", "q3"],
        "question": [
            "What pets does Nate have at home?",  # a category question
            "What has Nate mentioned about turtles?",
            "What did Nate say about tournament and final?",
        ],
        "category": ["multi_hop", "multi_hop", "single_hop"],
    }
)
STATES = pd.DataFrame(
    {
        "state_id": ["q1-r1", "q1-r2", "q2-r1", "q3-r1"],
        "question_id": ["q1", "q1", "q2", "q3"],
        "round_index": [1, 2, 1, 1],
        "gold_turn_ids": [["D1:1", "D2:1"], ["D1:1", "D2:1"], ["D1:2"], ["D3:1"]],
        "found_turn_ids": [[], ["D1:1"], [], []],
    }
)
# q1-r1: the rollouts disagree (retained); q1-r2: all recover everything; q2-r1: none
ROLLOUTS = pd.DataFrame(
    {
        "state_id": ["q1-r1", "q1-r1", "q1-r2", "q1-r2", "q2-r1", "q2-r1"],
        "recovered_share": [0.0, 0.5, 1.0, 1.0, 0.0, 0.0],
    }
)
RETAINED = pd.DataFrame({"state_id": ["q1-r1"]})


def test_counts_each_kind_through_collection_and_filtering(state_mix):
    mix = state_mix.state_mix(QUESTIONS, STATES, ROLLOUTS, RETAINED)
    assert set(mix) == {"multi_hop_category", "multi_hop", "single_hop"}
    category = mix["multi_hop_category"]
    assert category["questions"] == 1 and category["states"] == 2
    assert category["recall_before_round"] == {1: 0.0, 2: 0.5}
    assert (category["into_filtering"], category["all_full"], category["retained"]) == (2, 1, 1)
    assert category["retained_by_round"] == {1: 1}
    assert (mix["multi_hop"]["all_zero"], mix["multi_hop"]["retained"]) == (1, 0)
    assert mix["single_hop"]["into_filtering"] == 0  # never drawn into filtering
    assert category["format_only"] == 0


def test_states_dropped_as_format_only_are_not_counted_as_retained(state_mix):
    # under filtering.drop_format_only, q1-r1 (parsed samples agree, one unparseable) is dropped
    rollouts = ROLLOUTS.assign(
        recovered_share=[0.5, 0.0, 1.0, 1.0, 0.0, 0.0],
        parse_failed=[False, True, False, False, False, False],
    )
    mix = state_mix.state_mix(QUESTIONS, STATES, rollouts, RETAINED.iloc[:0])
    category = mix["multi_hop_category"]
    assert (category["retained"], category["format_only"], category["all_full"]) == (0, 1, 1)


def test_reads_the_newest_versions_of_a_project(state_mix, tmp_path, monkeypatch):
    frames = {"questions": QUESTIONS, "states": STATES, "rollouts": ROLLOUTS, "retained": RETAINED}
    for name, frame in frames.items():
        folder = tmp_path / state_mix.DATASETS[name]
        for version in ("2026-01-01T00.00.00.000Z", "2026-01-02T00.00.00.000Z"):
            (folder / version).mkdir(parents=True)
            frame.to_parquet(folder / version / folder.name)
    out = tmp_path / "mix.json"
    monkeypatch.setattr("sys.argv", ["state_mix", "--project", str(tmp_path), "--out", str(out)])
    state_mix.main()
    result = json.loads(out.read_text())
    assert result["versions"]["filter"] == "2026-01-02T00.00.00.000Z"
    assert result["by_kind"]["multi_hop_category"]["retained"] == 1


def test_a_missing_version_is_a_clear_error(state_mix, tmp_path):
    with pytest.raises(SystemExit, match="no versions"):
        state_mix.read_version(tmp_path, "questions", None)


def test_best_rollout_is_compared_with_the_teachers_next_round(state_mix):
    teacher = state_mix.teacher_recovered(STATES)
    # q1-r1 misses D1:1 and D2:1; after the teacher's plan round 2 had found D1:1
    assert teacher.to_dict() == {"q1-r1": 0.5}
    mix = state_mix.state_mix(QUESTIONS, STATES, ROLLOUTS, RETAINED)
    assert mix["multi_hop_category"]["against_teacher"] == {
        "states": 1,
        "teacher_recovered_mean": 0.5,
        "best_rollout_recovered_mean": 0.5,
        "best_rollout_better": 0,
        "teacher_better": 0,
    }
    better = ROLLOUTS.assign(recovered_share=[0.0, 1.0, 1.0, 1.0, 0.0, 0.0])
    counts = state_mix.state_mix(QUESTIONS, STATES, better, RETAINED)["multi_hop_category"]
    assert counts["against_teacher"]["best_rollout_better"] == 1
    assert mix["multi_hop"]["against_teacher"]["states"] == 0  # q2 has no second round


def test_counts_the_rollouts_that_ask_the_teachers_own_queries(state_mix):
    teacher_plan = json.dumps({"intents": [{"desired_fact": "Nate pets at home", "entities": []}]})
    other_plan = json.dumps({"intents": [{"desired_fact": "Nate turtles tank", "entities": []}]})
    states = STATES.assign(teacher_output=[teacher_plan, teacher_plan, other_plan, other_plan])
    # the same queries in other JSON spacing count; an unparseable reply never does
    rollouts = ROLLOUTS.assign(
        completion=[
            teacher_plan.replace(" ", "  ", 1),
            other_plan,
            "not json",
            teacher_plan,
            other_plan,
            other_plan,
        ]
    )
    mix = state_mix.state_mix(QUESTIONS, states, rollouts, RETAINED)
    assert (
        mix["multi_hop_category"]["rollouts"],
        mix["multi_hop_category"]["rollouts_as_teacher"],
    ) == (4, 2)
    assert (mix["multi_hop"]["rollouts"], mix["multi_hop"]["rollouts_as_teacher"]) == (2, 2)
    assert "rollouts" not in state_mix.state_mix(QUESTIONS, STATES, ROLLOUTS, RETAINED)["multi_hop"]


def test_sample_spread_counts_distinct_valid_plans_and_unequal_recovery(state_mix):
    teacher_plan = json.dumps({"intents": [{"desired_fact": "Nate pets at home", "entities": []}]})
    other_plan = json.dumps({"intents": [{"desired_fact": "Nate turtles tank", "entities": []}]})
    states = STATES.assign(teacher_output=[teacher_plan] * 4)
    rollouts = ROLLOUTS.assign(
        completion=[teacher_plan, other_plan, '{"intents": []}', "not json", other_plan, other_plan]
    )
    spread = state_mix.sample_spread(rollouts, states)
    assert spread["states"] == 3 and spread["rollouts"] == 6
    # q1-r1 two plans, q1-r2 none parseable, q2-r1 one
    assert spread["distinct_parsed_plans_per_state"] == 1.0
    assert (spread["as_teacher"], spread["empty_plans"], spread["broken"]) == (1, 1, 1)
    assert spread["states_with_unequal_recovery"] == 1  # only q1-r1's samples differ
    assert spread["mean_recovered"] == 0.4167


def test_sample_spread_tells_search_signal_from_format_only_groups(state_mix):
    found = json.dumps({"intents": [{"desired_fact": "Nate pets at home", "entities": []}]})
    rollouts = pd.DataFrame(
        {
            # q1-r1: two parsed samples recover different shares; q2-r1: the parsed ones agree
            # and only the empty plan (unparseable, recovers nothing) differs
            "state_id": ["q1-r1", "q1-r1", "q2-r1", "q2-r1", "q2-r1"],
            "recovered_share": [0.0, 0.5, 1.0, 1.0, 0.0],
            "parse_failed": [False, False, False, False, True],
            "completion": [found, found, found, found, '{"intents": []}'],
        }
    )
    spread = state_mix.sample_spread(rollouts, STATES.assign(teacher_output=[found] * 4))
    assert spread["states_with_unequal_recovery"] == 2
    assert spread["states_with_unequal_parsed_recovery"] == 1
    assert state_mix.group_verdicts(rollouts).to_dict() == {
        "q1-r1": "search",
        "q2-r1": "format_only",
    }


def test_compare_filter_reads_another_filterings_samples_on_the_same_states(
    state_mix, tmp_path, monkeypatch
):
    plan = json.dumps({"intents": [{"desired_fact": "Nate pets at home", "entities": []}]})
    rollouts = ROLLOUTS.assign(completion=[plan] * 6)
    other = pd.concat([rollouts, rollouts.head(2).assign(state_id="elsewhere")], ignore_index=True)
    frames = {
        "questions": QUESTIONS,
        "states": STATES.assign(teacher_output=[plan] * 4),
        "rollouts": rollouts,
        "retained": RETAINED,
    }
    for name, frame in frames.items():
        folder = tmp_path / state_mix.DATASETS[name] / "2026-01-02T00.00.00.000Z"
        folder.mkdir(parents=True)
        frame.to_parquet(folder / folder.parent.name)
    older = tmp_path / state_mix.DATASETS["rollouts"] / "2026-01-01T00.00.00.000Z"
    older.mkdir(parents=True)
    other.to_parquet(older / older.parent.name)
    out = tmp_path / "mix.json"
    argv = ["state_mix", "--project", str(tmp_path), "--out", str(out)]
    monkeypatch.setattr("sys.argv", [*argv, "--compare-filter", "old=2026-01-01T00.00.00.000Z"])
    state_mix.main()
    spread = json.loads(out.read_text())["sample_spread"]
    assert spread["this"]["rollouts"] == 6 and spread["old"]["rollouts"] == 6  # not "elsewhere"
    assert spread["old"]["version"] == "2026-01-01T00.00.00.000Z"
    monkeypatch.setattr("sys.argv", [*argv, "--compare-filter", "old"])
    with pytest.raises(SystemExit, match="NAME=VERSION"):
        state_mix.main()


def test_only_multi_hop_questions_count_as_category_questions(state_mix):
    # an annotated question keeps its source category even when worded like a category one
    assert state_mix.question_kind("What pets does Nate have at home?", "1") == "1"
    assert state_mix.question_kind("What pets does Nate have at home?", "multi_hop") == (
        "multi_hop_category"
    )
