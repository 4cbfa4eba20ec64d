"""End to end through the real `kedro` CLI, in a throwaway copy of the project.

These are the README's commands: the default run (ingest + memory) on the bundled demo, the
run contract's --params for another source, and bad input.
"""

from __future__ import annotations

import json
import sqlite3
from importlib import metadata
from pathlib import Path

import pandas as pd
import pytest
import torch

from mera_pipelines.core.embedding import load_embedder
from mera_pipelines.core.memory import MemoryIndex
from tests.support.project import REPO_ROOT, kedro_cli, make_project_copy

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "sources"


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    return make_project_copy(tmp_path_factory.mktemp("project"))


@pytest.fixture(scope="module")
def default_run(project):
    result = kedro_cli(project, "run")
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def latest(project: Path, dataset_path: str) -> pd.DataFrame:
    versions = sorted((project / dataset_path).iterdir())
    return pd.read_parquet(versions[-1] / Path(dataset_path).name)


def mlflow_runs(project: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(project / "mlflow.db") as db:
        return db.execute("SELECT run_uuid, status FROM runs ORDER BY start_time").fetchall()


def mlflow_metric(project: Path, run_id: str, key: str) -> float:
    with sqlite3.connect(project / "mlflow.db") as db:
        row = db.execute(
            "SELECT value FROM latest_metrics WHERE run_uuid = ? AND key = ?", (run_id, key)
        ).fetchone()
    assert row is not None, f"metric {key} missing from run {run_id}"
    return row[0]


def test_default_run_ingests_the_demo_and_reports_the_contract(project, default_run):
    report = json.loads((project / "data/08_reporting/ingest_report.json").read_text())
    assert report["conversations"] == 3
    assert report["questions"] == sum(report["questions_by_category"].values())
    assert set(report["questions_by_category"]) == {"1", "2", "3", "4", "5"}
    assert report["turns"] == len(latest(project, "data/03_primary/turns.parquet"))
    assert {"dropped", "repaired", "sessions"} <= set(report)


def test_default_run_builds_the_memory_table_from_the_facts(project, default_run):
    facts = latest(project, "data/04_feature/facts.parquet")
    turns = latest(project, "data/03_primary/turns.parquet")
    assert set(facts["turn_id"] + facts["memory_id"]) == set(turns["turn_id"] + turns["memory_id"])
    index = MemoryIndex(
        str(project / "data/05_model_input/memory.lancedb"), "facts", load_embedder()
    )
    assert index.count() == len(facts)
    assert index.memory_ids() == sorted(turns["memory_id"].unique())
    memory = json.loads((project / "data/08_reporting/memory_report.json").read_text())
    assert memory["facts"] == len(facts) and memory["facts_per_turn"] >= 1.0


def test_each_run_is_one_mlflow_run_with_metrics(project, default_run):
    [(run_id, status), *_] = mlflow_runs(project)
    assert status == "FINISHED"
    assert mlflow_metric(project, run_id, "ingest.questions") > 0
    assert mlflow_metric(project, run_id, "memory.facts") > 0
    assert mlflow_metric(project, run_id, "memory.upsert.facts_per_second") > 0
    assert mlflow_metric(project, run_id, "seconds.extract_facts") >= 0
    # the versions that decide the run's numbers, as tags (core.provenance)
    with sqlite3.connect(project / "mlflow.db") as db:
        tags = dict(
            db.execute(
                "SELECT key, value FROM tags WHERE run_uuid = ? AND key LIKE '%.%'", (run_id,)
            ).fetchall()
        )
    assert tags["package.transformers"] == metadata.version("transformers")
    assert tags["package.trl"] == metadata.version("trl")
    assert tags["cpu.capability"] == torch.backends.cpu.get_cpu_capability()


def test_rerun_adds_no_rows_and_embeds_nothing(project, default_run):
    before = len(latest(project, "data/04_feature/facts.parquet"))
    result = kedro_cli(project, "run", "--pipelines=memory")
    assert result.returncode == 0, result.stderr[-3000:]
    index = MemoryIndex(
        str(project / "data/05_model_input/memory.lancedb"), "facts", load_embedder()
    )
    assert index.count() == before
    run_id = mlflow_runs(project)[-1][0]
    assert mlflow_metric(project, run_id, "memory.upsert.memories_unchanged") == 3
    assert mlflow_metric(project, run_id, "memory.upsert.facts_written") == 0


def test_default_run_evaluates_systems_side_by_side(project, default_run):
    summary = json.loads((project / "data/08_reporting/evaluate_summary.json").read_text())
    assert summary["source"]["format"] == "locomo"
    assert {"mera", "naive_rag", "flat"} <= set(summary["systems"])
    mera = summary["systems"]["mera"]
    assert mera["n_questions"] == 63 and mera["accuracy"] is None
    assert mera["evidence_recall_by_round"][0] == mera["round1_recall"]
    assert mera["evidence_recall_by_round"][-1] == mera["evidence_recall_final"]
    naive = summary["systems"]["naive_rag"]
    assert naive["mean_turns_viewed"] == round(mera["mean_turns_viewed"])
    assert "category 5" in summary["recall_note"]
    plots = {p.name for p in (project / "data/08_reporting/plots").iterdir()}
    assert "recall_by_round.png" in plots
    [(run_id, _), *_] = mlflow_runs(project)
    assert mlflow_metric(project, run_id, "evaluate.mera.evidence_recall_final") == pytest.approx(
        mera["evidence_recall_final"]
    )


def test_params_select_another_source(project, default_run):
    source = FIXTURES / "turns_questions.jsonl"
    result = kedro_cli(
        project,
        "run",
        "--pipelines=evaluate",
        f"--params=source.path={source},source.format=jsonl",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((project / "data/08_reporting/ingest_report.json").read_text())
    assert report["source"] == {"path": str(source), "format": "jsonl"}
    assert report["source_format"] == "jsonl"
    summary = json.loads((project / "data/08_reporting/evaluate_summary.json").read_text())
    assert summary["source"]["format"] == "jsonl"
    assert summary["systems"]["mera"]["n_questions"] == report["questions"]


def test_bad_input_fails_clearly_and_writes_nothing(project, default_run, tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text('[{"sample_id": "c1", "conversation": {"speaker_a": "A"}}]')
    versions_before = sorted((project / "data/03_primary/turns.parquet").iterdir())
    result = kedro_cli(
        project, "run", "--pipelines=ingest", f"--params=source.path={bad},source.format=locomo"
    )
    assert result.returncode != 0
    message = next(line for line in result.stderr.splitlines() if line.startswith("ERROR: "))
    assert str(bad) in message and "sample" in message and "field" in message
    assert sorted((project / "data/03_primary/turns.parquet").iterdir()) == versions_before
    assert mlflow_runs(project)[-1][1] == "FAILED"


def test_unknown_format_is_refused(project, default_run):
    result = kedro_cli(project, "run", "--pipelines=ingest", "--params=source.format=csv")
    assert result.returncode != 0
    assert "source.format" in result.stderr and "locomo" in result.stderr


def test_a_stage_run_before_its_inputs_exist_names_the_pipeline_to_run_first(tmp_path):
    fresh = make_project_copy(tmp_path)
    result = kedro_cli(fresh, "run", "--pipelines=memory")
    assert result.returncode != 0
    message = next(line for line in result.stderr.splitlines() if line.startswith("ERROR: "))
    assert "'turns'" in message and "`kedro run --pipeline=ingest`" in message
    assert not (fresh / "data/05_model_input/memory.lancedb").exists()
