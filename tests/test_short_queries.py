"""benchmarks/short_queries.py's counting, on plans written by the test (hand-counted)."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from tests.support.benchmark_scripts import BENCHMARKS, load_benchmark_script


def _plan(*queries: str) -> str:
    return json.dumps({"intents": [{"desired_fact": q} for q in queries]})


PADDED = _plan("visit visit visit")  # 1 distinct content word: too short
GOOD = _plan("state Nate travel")
MIXED = _plan("state Nate travel", "mentioned Maria")  # one of two too short
EMPTY = '{"intents": []}'
GARBLED = "I would search for the gym"


@pytest.fixture(scope="module")
def short():
    return load_benchmark_script("short_queries")


def test_plans_are_counted_by_intent_and_by_plan(short):
    settings = short.RewardSettings()
    counts = short.count_plans([PADDED, GOOD, MIXED, EMPTY, GARBLED], settings)
    assert counts["plans"] == 3
    assert counts["plans_without_intents"] == 2
    assert counts["intents"] == 4
    assert counts["intents_with_bad_length"] == 2
    assert counts["share_of_intents"] == pytest.approx(0.5)
    assert counts["plans_with_a_bad_query"] == 2


def test_recovered_share_is_split_by_plans_with_a_short_query(short):
    rollouts = pd.DataFrame(
        {
            "completion": [PADDED, MIXED, GOOD, GOOD, GARBLED],
            "recovered_share": [0.0, 0.5, 1.0, 0.5, 0.9],
        }
    )
    split = short.recovered_by_query_length(rollouts, short.RewardSettings())
    assert split["with_bad_query"] == {"plans": 2, "mean_recovered": pytest.approx(0.25)}
    assert split["without"] == {"plans": 2, "mean_recovered": pytest.approx(0.75)}


def test_the_script_writes_its_json_and_names_a_missing_column(tmp_path):
    rollouts = tmp_path / "rollouts.parquet"
    states = tmp_path / "planner_states.parquet"
    pd.DataFrame({"completion": [PADDED, GOOD], "recovered_share": [0.0, 1.0]}).to_parquet(rollouts)
    pd.DataFrame({"teacher_output": [GOOD, EMPTY]}).to_parquet(states)
    out = tmp_path / "short.json"
    done = _run_script("--rollouts", rollouts, "--states", states, "--out", out)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["sampled_plans"]["intents_with_bad_length"] == 1
    assert result["teacher_plans"]["plans_without_intents"] == 1

    pd.DataFrame({"question": ["q"]}).to_parquet(states)
    failed = _run_script("--rollouts", rollouts, "--states", states, "--out", tmp_path / "x.json")
    assert failed.returncode != 0
    assert "teacher_output" in failed.stderr and str(states) in failed.stderr
    assert not (tmp_path / "x.json").exists()


def _run_script(*args) -> subprocess.CompletedProcess:
    command = [sys.executable, str(BENCHMARKS / "short_queries.py"), *map(str, args)]
    return subprocess.run(command, check=False, capture_output=True, text=True)
