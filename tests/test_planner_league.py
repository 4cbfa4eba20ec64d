"""benchmarks/planner_league.py: every compared planner against one reference, from the result
files compare_planners.py leaves (written here by the test; no planner runs)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.support.benchmark_scripts import load_benchmark_script

LOOP = {"max_rounds": 3, "turns_per_round": 10}


@pytest.fixture(scope="module")
def league_script():
    return load_benchmark_script("planner_league")


def _comparison(results: Path, stem: str, planners: dict[str, list[float | None]], loop=LOOP):
    """A compare_planners result: its JSON (only the loop is read) and one rows file a planner,
    final recall of questions q0, q1, ... in order (round 1 a tenth lower)."""
    (results / f"{stem}.json").write_text(json.dumps({"loop": loop}))
    for planner, finals in planners.items():
        rows = [
            {
                "question_id": f"q{i}",
                "final": final,
                "round1": None if final is None else final - 0.1,
            }
            for i, final in enumerate(finals)
        ]
        text = "\n".join(json.dumps(row) for row in rows) + "\n"
        (results / f"{stem}.{planner}.jsonl").write_text(text)


@pytest.fixture
def results(tmp_path):
    _comparison(tmp_path, "cmp_a", {"heuristic": [0.5, 1.0, 0.0, None], "sft": [0.5, 0.5, 0.0, 1]})
    _comparison(tmp_path, "cmp_b", {"grpo": [1.0, 1.0, 1.0, 0.0], "grpo_part": [1.0, 1.0]})
    _comparison(tmp_path, "cmp_c", {"grpo_r2": [1.0, 1.0, 1.0, 1.0]}, loop={"max_rounds": 2})
    return tmp_path


def test_league_pairs_every_covering_planner_with_the_reference(results, league_script):
    result = league_script.league(results, "cmp_*", "cmp_a:heuristic")
    # the reference has gold evidence on q0-q2 only (q3 final None): those are the questions
    assert result["n_questions"] == 3
    by_label = {p["label"]: p for p in result["planners"]}
    assert list(by_label) == ["sft (a)", "heuristic (a)", "grpo (b)"]  # sorted by difference
    grpo = by_label["grpo (b)"]
    # differences 0.5, 0.0, 1.0: mean 0.5, sample variance 0.25, standard error sqrt(0.25 / 3)
    assert grpo["minus_reference"]["mean"] == pytest.approx(0.5)
    assert grpo["minus_reference"]["standard_error"] == pytest.approx(math.sqrt(0.25 / 3))
    assert (grpo["minus_reference"]["higher"], grpo["minus_reference"]["lower"]) == (2, 0)
    assert grpo["final_recall"] == pytest.approx(1.0)
    assert grpo["round1_recall"] == pytest.approx(0.9)
    assert grpo["kind"] == "grpo"
    assert result["skipped"] == {
        "cmp_b:grpo_part": "1 of 3 questions missing",
        "cmp_c:grpo_r2": "other loop settings",
    }


def test_summary_by_kind_leaves_the_reference_out(results, league_script):
    summary = league_script.league(results, "cmp_*", "cmp_a:heuristic")["by_kind"]
    assert "heuristic" not in summary  # its only planner is the reference
    assert summary["sft"]["planners"] == 1
    assert summary["sft"]["median_minus_reference"] == pytest.approx(-0.5 / 3)
    assert summary["sft"]["ahead"] == 0
    # grpo: mean 0.5 against two standard errors of 0.577: ahead, not by two
    assert summary["grpo"]["ahead"] == 1
    assert summary["grpo"]["ahead_by_two_standard_errors"] == 0
    assert summary["grpo"]["best"] == "grpo (b)"


def test_a_missing_reference_is_named(results, league_script):
    with pytest.raises(SystemExit, match="cmp_a:rules"):
        league_script.league(results, "cmp_*", "cmp_a:rules")
    with pytest.raises(SystemExit, match="cmp_z.json"):
        league_script.league(results, "cmp_*", "cmp_z:heuristic")
    with pytest.raises(SystemExit, match="stem"):
        league_script.league(results, "cmp_*", "heuristic")


def test_league_figure_is_written(results, league_script, tmp_path):
    result = league_script.league(results, "cmp_*", "cmp_a:heuristic")
    figure = league_script.plot_league(result, tmp_path / "league.png")
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
