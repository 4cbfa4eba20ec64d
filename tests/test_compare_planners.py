"""benchmarks/compare_planners.py's summary: means over the questions every planner finished,
paired differences with hand-computed standard errors, and the summary figure.

No planner runs here: the per-question result files are written by the test."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support.benchmark_scripts import load_benchmark_script


@pytest.fixture(scope="module")
def compare():
    return load_benchmark_script("compare_planners")


def _write(out: Path, name: str, rows: dict[str, tuple[float | None, float | None]]) -> None:
    lines = [
        json.dumps(
            {
                "question_id": qid,
                "round1": round1,
                "final": final,
                "rounds": 2,
                "turns": 5,
                "seconds": 1.0,
                "planner_usage": None,
            }
        )
        for qid, (round1, final) in rows.items()
    ]
    out.with_suffix(f".{name}.jsonl").write_text("\n".join(lines) + "\n")


def _questions(*ids: str, category: str = "4") -> list[SimpleNamespace]:
    return [SimpleNamespace(question_id=q, category=category) for q in ids]


@pytest.fixture
def results(tmp_path, compare):
    out = tmp_path / "compare.json"
    _write(out, "heuristic", {"q1": (0.5, 0.5), "q2": (0.0, 1.0), "q3": (1.0, 1.0)})
    # q3 has no gold evidence (final None) for the second planner: it leaves the comparison
    _write(out, "grpo", {"q1": (1.0, 1.0), "q2": (0.0, 1.0), "q3": (None, None)})
    questions = _questions("q1", "q2", "q3", "q4")
    return out, compare.summarise(["heuristic", "grpo"], questions, out)


def test_means_cover_only_questions_every_planner_finished(results):
    _, summary = results
    assert summary["n_questions"] == 2
    assert summary["planners"]["heuristic"]["round1_recall"] == pytest.approx(0.25)
    assert summary["planners"]["grpo"]["final_recall"] == pytest.approx(1.0)


def test_round_one_query_counts_only_when_every_record_has_one(compare):
    records = [{"round1_queries": 1}, {"round1_queries": 2}, {"round1_queries": 1}]
    counts = compare.round_one_query_counts(records)
    assert counts["round1_mean_queries"] == pytest.approx(4 / 3)
    assert counts["round1_single_query_share"] == pytest.approx(2 / 3)
    older = compare.round_one_query_counts([{"round1_queries": 1}, {}])
    assert older == {"round1_mean_queries": None, "round1_single_query_share": None}


def test_paired_difference_and_standard_error_by_hand(results):
    _, summary = results
    pair = summary["paired_final"]["grpo_minus_heuristic"]
    # differences 0.5 and 0.0: mean 0.25, sample variance 0.125, standard error sqrt(0.125 / 2)
    assert pair["mean"] == pytest.approx(0.25)
    assert pair["standard_error"] == pytest.approx(math.sqrt(0.125 / 2))
    # q1 higher (1.0 against 0.5), q2 equal
    assert (pair["higher"], pair["lower"]) == (1, 0)


def test_a_planner_without_results_is_named(tmp_path, compare):
    with pytest.raises(SystemExit, match="sft"):
        compare.summarise(["sft"], _questions("q1"), tmp_path / "c.json")


def test_summary_figure_is_written(results, compare):
    out, summary = results
    figure = compare.plot_summary(summary, out.with_suffix(".png"))
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_gaps_from_a_later_planner_flip_the_stored_pair(results, compare):
    _, summary = results
    mean, error = compare.final_recall_gaps(summary, "grpo")["heuristic"]
    assert mean == pytest.approx(-0.25)
    assert error == pytest.approx(math.sqrt(0.125 / 2))
    with pytest.raises(SystemExit, match="sft"):
        compare.final_recall_gaps(summary, "sft")


def test_an_average_row_pairs_the_members_per_question_mean(tmp_path, compare):
    out = tmp_path / "compare.json"
    _write(out, "heuristic", {"q1": (0.5, 0.5), "q2": (0.0, 1.0), "q3": (1.0, 1.0)})
    _write(out, "seed0", {"q1": (1.0, 1.0), "q2": (0.0, 0.5), "q3": (1.0, 1.0)})
    # seed1 has no gold evidence on q3: the average keeps only q1 and q2
    _write(out, "seed1", {"q1": (0.5, 0.5), "q2": (0.0, 1.0), "q3": (None, None)})
    questions = _questions("q1", "q2", "q3")
    summary = compare.summarise(
        ["heuristic", "seed0", "seed1"], questions, out, {"seeds": ["seed0", "seed1"]}
    )
    assert summary["n_questions"] == 2
    # per question: q1 (1.0 + 0.5) / 2 = 0.75, q2 (0.5 + 1.0) / 2 = 0.75
    assert summary["planners"]["seeds"]["final_recall"] == pytest.approx(0.75)
    pair = summary["paired_final"]["seeds_minus_heuristic"]
    # differences 0.25 and -0.25: mean 0, sample variance 0.125
    assert pair["mean"] == pytest.approx(0.0)
    assert pair["standard_error"] == pytest.approx(math.sqrt(0.125 / 2))
    assert (pair["higher"], pair["lower"]) == (1, 1)


def test_a_repeated_member_pairs_each_seed_with_its_own_start(tmp_path, compare):
    out = tmp_path / "compare.json"
    # two seeds from start_a, one from start_b
    _write(out, "start_a", {"q1": (0.0, 0.0), "q2": (0.0, 0.0)})
    _write(out, "start_b", {"q1": (0.5, 0.5), "q2": (0.5, 0.5)})
    _write(out, "g1", {"q1": (0.5, 0.5), "q2": (0.5, 0.5)})
    _write(out, "g2", {"q1": (0.0, 0.0), "q2": (0.5, 0.5)})
    _write(out, "g3", {"q1": (1.0, 1.0), "q2": (0.5, 0.5)})
    assert compare.parse_members("starts=start_a+start_a+start_b", ["start_a", "start_b"]) == (
        "starts",
        ["start_a", "start_a", "start_b"],
    )
    averages = {"seeds": ["g1", "g2", "g3"], "starts": ["start_a", "start_a", "start_b"]}
    names = ["start_a", "start_b", "g1", "g2", "g3"]
    summary = compare.summarise(names, _questions("q1", "q2"), out, averages)
    # each seed's gain over its own start: q1 (0.5 + 0 + 0.5) / 3, q2 (0.5 + 0.5 + 0) / 3
    pair = summary["paired_final"]["starts_minus_seeds"]
    assert pair["mean"] == pytest.approx(-1 / 3)
    assert pair["standard_error"] == pytest.approx(0.0)
    # start_a counted twice: (0 + 0 + 0.5) / 3 on both questions (once each would give 0.25)
    assert summary["planners"]["starts"]["final_recall"] == pytest.approx(1 / 6)


def test_agreement_counts_how_many_members_beat_the_reference_per_question(tmp_path, compare):
    out = tmp_path / "compare.json"
    _write(out, "heuristic", {"q1": (0.5, 0.5), "q2": (0.0, 1.0), "q3": (1.0, 1.0), "q4": (0, 0)})
    _write(out, "seed0", {"q1": (1.0, 1.0), "q2": (0.0, 0.5), "q3": (1.0, 1.0), "q4": (0, 0.5)})
    _write(out, "seed1", {"q1": (1.0, 1.0), "q2": (0.0, 1.0), "q3": (1.0, 1.0), "q4": (0, 0)})
    _write(out, "seed2", {"q1": (0.5, 1.0), "q2": (0.0, 0.5), "q3": (1.0, 1.0), "q4": (0, 0)})
    seeds = {"seeds": ["seed0", "seed1", "seed2"]}
    names = ["heuristic", "seed0", "seed1", "seed2"]
    questions = _questions("q1", "q2", "q3", "q4")
    summary = compare.summarise(names, questions, out, seeds, reference="heuristic")
    # q1: all three higher; q2: two lower, one level; q3: all level; q4: one higher
    assert summary["agreement"]["seeds"] == {
        "members": 3,
        "higher_only": {"1": 1, "3": 1},
        "lower_only": {"2": 1},
        "mixed": 0,
        "same": 1,
    }
    # no reference, or an average that holds it: nothing to count against
    assert "agreement" not in compare.summarise(names, questions, out, seeds)
    with_it = {"with": ["heuristic", "seed0"]}
    assert (
        compare.summarise(names, questions, out, with_it, reference="heuristic")["agreement"] == {}
    )


def test_a_best_of_row_takes_the_better_member_per_question(tmp_path, compare):
    out = tmp_path / "compare.json"
    _write(out, "heuristic", {"q1": (0.5, 0.5), "q2": (0.0, 1.0), "q3": (1.0, 1.0)})
    _write(out, "grpo", {"q1": (1.0, 1.0), "q2": (0.0, 0.5), "q3": (None, None)})
    summary = compare.summarise(
        ["heuristic", "grpo"],
        _questions("q1", "q2", "q3"),
        out,
        best_of={"best": ["heuristic", "grpo"]},
    )
    # q3 has no gold evidence for grpo; q1 from grpo (1.0), q2 from the heuristic (1.0)
    assert summary["n_questions"] == 2
    assert summary["planners"]["best"]["final_recall"] == pytest.approx(1.0)
    assert summary["planners"]["best"]["round1_recall"] == pytest.approx(0.5)
    pair = summary["paired_final"]["best_minus_heuristic"]
    assert (pair["mean"], pair["higher"], pair["lower"]) == (pytest.approx(0.25), 1, 0)


def test_an_average_must_name_two_known_planners(compare):
    assert compare.parse_members("g=a+b", ["a", "b"]) == ("g", ["a", "b"])
    with pytest.raises(SystemExit, match="two or more"):
        compare.parse_members("g=a", ["a", "b"])
    with pytest.raises(SystemExit, match=r"\['c'\] are not --planner names"):
        compare.parse_members("g=a+c", ["a", "b"])
    with pytest.raises(SystemExit, match="'a' is already a --planner name"):
        compare.parse_members("a=a+b", ["a", "b"])
    with pytest.raises(SystemExit, match="--best-of 'g=a'"):
        compare.parse_members("g=a", ["a", "b"], "--best-of")


def test_results_of_another_comparison_join_on_common_questions(tmp_path, compare):
    # an older comparison of every question, and a newer one of every second question
    older = tmp_path / "older.json"
    _write(older, "heuristic", {"q1": (0.5, 0.5), "q2": (0.0, 1.0), "q3": (1.0, 1.0)})
    _write(older, "grpo", {"q1": (1.0, 0.0), "q2": (0.0, 0.0), "q3": (0.0, 0.0)})
    newer = tmp_path / "newer.json"
    _write(newer, "heuristic", {"q1": (0.0, 0.0), "q3": (0.0, 0.0)})
    _write(newer, "grpo2", {"q1": (1.0, 1.0), "q3": (1.0, 1.0)})
    questions = _questions("q1", "q2", "q3")
    summary = compare.summarise(
        ["heuristic", "grpo", "grpo2"], questions, newer, results_from=[older]
    )
    assert summary["n_questions"] == 2  # q2 has no grpo2 result
    # heuristic comes from next to --out (newer), grpo only from the older comparison
    assert summary["planners"]["heuristic"]["final_recall"] == pytest.approx(0.0)
    assert summary["planners"]["grpo"]["round1_recall"] == pytest.approx(0.5)
    assert compare.results_file("absent", newer, [older]) is None


def test_a_bare_planner_name_is_enough_only_to_summarise(compare):
    assert compare.parse_planner("grpo=/models/g") == ("grpo", "/models/g")
    assert compare.parse_planner("heuristic") == ("heuristic", None)
    assert compare.parse_planner("sft9", summarise_only=True) == ("sft9", None)
    with pytest.raises(SystemExit, match="name=<model folder>"):
        compare.parse_planner("sft9")


def test_a_heuristic_variant_takes_its_settings_from_the_spec(compare):
    name, folder = compare.parse_planner("plain=heuristic:topic_labels=false,feedback_facts=2")
    assert name == "plain"
    roles = compare.build_roles(folder, [], threads=1)
    assert roles.planner.topic_labels is False and roles.planner.feedback_facts == 2
    with pytest.raises(SystemExit, match="key=value"):
        compare.heuristic_settings("topic_labels")


def test_complement_makes_a_trained_planner_search_with_the_heuristics_intents_too(
    tmp_path, compare
):
    (tmp_path / "config.json").write_text("{}")  # the weights load lazily, on the first call
    plain = compare.build_roles(str(tmp_path), [], threads=1)
    complemented = compare.build_roles(str(tmp_path), [], threads=1, complement=True)
    assert plain.planner.complement is False and complemented.planner.complement is True
    with pytest.raises(SystemExit, match="not a trained model folder"):
        compare.build_roles("heuristic:topic_labels=false", [], threads=1, complement=True)


def test_loop_overrides_replace_conf_base_settings_and_unknown_keys_are_named(compare):
    params = compare.evaluation_params("conv-42", None, None)
    base_rounds = params["loop"]["max_rounds"]
    compare.override_loop(params, "min_rounds=2")
    assert params["loop"]["min_rounds"] == 2 and params["loop"]["max_rounds"] == base_rounds
    with pytest.raises(SystemExit, match="--loop min_round=2: .*min_round"):
        compare.override_loop(params, "min_round=2")
    with pytest.raises(SystemExit, match="--loop min_rounds: use key=value"):
        compare.override_loop(params, "min_rounds")


def test_recall_by_category_covers_only_the_compared_questions(tmp_path, compare):
    out = tmp_path / "compare.json"
    _write(out, "heuristic", {"q1": (0.5, 0.5), "q2": (0.0, 1.0), "q3": (1.0, 1.0)})
    _write(out, "grpo", {"q1": (1.0, 1.0), "q2": (0.0, 0.0), "q3": (None, None)})
    questions = [*_questions("q1", category="1"), *_questions("q2", "q3", category="2")]
    summary = compare.summarise(["heuristic", "grpo"], questions, out)
    # q3 has no gold evidence for grpo, so category 2 holds q2 alone
    assert summary["by_category"]["1"]["n_questions"] == 1
    assert summary["by_category"]["2"]["n_questions"] == 1
    assert summary["by_category"]["1"]["final_recall"] == {"heuristic": 0.5, "grpo": 1.0}
    assert summary["by_category"]["2"]["round1_recall"] == {"heuristic": 0.0, "grpo": 0.0}
    assert summary["by_category"]["2"]["final_recall"] == {"heuristic": 1.0, "grpo": 0.0}
