"""benchmarks/later_round_queries.py's counting: query shapes by hand, the multi-round sample,
totals over later rounds only, and round-1 queries per question. No planner runs here:
trajectories are written by the test."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from tests.support.benchmark_scripts import load_benchmark_script


@pytest.fixture(scope="module")
def later():
    return load_benchmark_script("later_round_queries")


def test_a_query_repeating_its_one_word_is_counted_as_such(later):
    shape = later.query_shape("visit visit visit")
    assert shape["distinct_words"] == 1
    assert shape["repeats_a_word"] == 1
    assert shape["at_most_two_distinct_words"] == 1
    shape = later.query_shape("state Nate travel")
    assert (shape["distinct_words"], shape["repeats_a_word"]) == (3, 0)
    assert shape["at_most_two_distinct_words"] == 0


def test_only_rounds_after_the_first_are_counted(later):
    def rounds(*queries):
        return SimpleNamespace(rounds=[SimpleNamespace(queries=q) for q in queries])

    shapes = later.later_round_shapes(
        [
            rounds(["first round only never counts"], ["use use use", "use Joanna food"]),
            rounds(["x y"], []),
        ]
    )
    assert shapes["later_rounds"] == 2
    assert shapes["rounds_without_query"] == 1
    assert shapes["queries"] == 2
    assert shapes["repeats_a_word"] == 1
    assert shapes["mean_distinct_words"] == pytest.approx((1 + 3) / 2)
    assert shapes["examples_repeating_a_word"] == ["use use use"]


def test_round_one_plans_count_queries_per_question(later):
    def trajectory(qid, recall, *queries):
        first = SimpleNamespace(queries=list(queries), recall_retrieved=recall)
        later_round = SimpleNamespace(queries=["never counted here"], recall_retrieved=1.0)
        return SimpleNamespace(question_id=qid, rounds=[first, later_round])

    plans = later.round_one_plans(
        [
            trajectory("q1", 0.5, "books read Tim", "What books has Tim read?"),
            trajectory("q2", 0.0, "x"),
        ]
    )
    assert plans["questions"] == 2
    assert plans["mean_queries"] == pytest.approx(1.5)
    assert plans["single_query"] == 1
    assert plans["plans"]["q2"] == {"recall": 0.0, "queries": ["x"]}


def test_the_sample_takes_multi_round_questions_with_gold(tmp_path, later):
    rows = [
        {"question_id": "q1", "final": 1.0, "rounds": 1},
        {"question_id": "q2", "final": 0.5, "rounds": 3},
        {"question_id": "q3", "final": None, "rounds": 2},
        {"question_id": "q4", "final": 0.0, "rounds": 2},
    ]
    path = tmp_path / "c.grpo.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert later.multi_round_sample(path, 5) == ["q2", "q4"]
    assert later.multi_round_sample(path, 1) == ["q2"]
    path.write_text(json.dumps(rows[0]) + "\n")
    with pytest.raises(SystemExit, match="no question"):
        later.multi_round_sample(path, 5)
