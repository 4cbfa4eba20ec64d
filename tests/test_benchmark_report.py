"""The benchmark report's contract: figures keyed by size, each with its baseline and ratio.

Built from the quick-suite result files committed in benchmarks/results/ (no benchmark runs
here: speed is measured by the benchmarks, never in tests)."""

from __future__ import annotations

import json

import pytest

from tests.support.benchmark_scripts import BENCHMARKS, load_benchmark_script


@pytest.fixture(scope="module")
def suite():
    return load_benchmark_script("run_suite")


@pytest.fixture(scope="module")
def report(suite):
    names = ["indexing", "retrieval", "loop", "longmemeval", "grpo"]
    results = {
        n: json.loads((BENCHMARKS / "results" / f"{n}_quick.json").read_text()) for n in names
    }
    return json.loads(json.dumps(suite.collect(results, "quick")))


def test_sized_figures_are_keyed_by_size(report):
    for key in ("index_facts_per_s", "retrieval_p50_ms", "retrieval_p95_ms", "ann_recall_at_8"):
        assert "10k" in report[key], key


def test_every_figure_has_a_baseline_and_the_ratio(report):
    for entry in (
        report["retrieval_p50_ms"]["10k"],
        report["index_facts_per_s"]["10k"],
        report["loop_overhead_ms_per_question"],
    ):
        assert entry["value"] > 0 and entry["baseline"] > 0
        assert entry["ratio"] == pytest.approx(entry["value"] / entry["baseline"])


def test_the_report_records_the_machine_load(report):
    assert len(report["machine"]["loadavg_at_start"]) == 3


def test_a_size_run_separately_joins_the_report(suite, tmp_path, monkeypatch):
    retrieval = {"sizes": {"10k": {}}}
    extra = {"machine": {"loadavg_at_start": [1, 1, 1]}, "sizes": {"1m": {"summary": {}}}}
    (tmp_path / "retrieval_1m.json").write_text(json.dumps(extra))
    monkeypatch.setattr(suite, "RESULTS", tmp_path)
    suite.merge_separate_sizes(retrieval, "")
    assert set(retrieval["sizes"]) == {"10k", "1m"}
    assert retrieval["sizes"]["1m"]["machine"]["loadavg_at_start"] == [1, 1, 1]
