"""RunReportHooks against a real MLflow store: node seconds that include the outputs' saves,
and the package and CPU tags, once per run."""

from __future__ import annotations

from importlib import metadata
from types import SimpleNamespace

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from mera_pipelines.hooks import RunReportHooks


@pytest.fixture
def tracking(tmp_path):
    previous = mlflow.get_tracking_uri()
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    yield MlflowClient(tracking_uri=uri)
    mlflow.set_tracking_uri(previous)


def test_node_seconds_run_to_the_last_output_saved(tracking):
    # Kedro calls after_node_run before the saves; index_facts embeds and writes in its save
    ticks = iter([10.0, 12.0, 15.0, 19.0])
    hooks = RunReportHooks(clock=lambda: next(ticks))
    node = SimpleNamespace(name="index_facts")
    with mlflow.start_run() as run:
        hooks.before_node_run(node)  # 10
        hooks.after_node_run(node)  # 12: the node function returned
        hooks.after_dataset_saved("memory_index", None, node)  # 15
        hooks.after_dataset_saved("memory_report", None, node)  # 19: the last output saved
    run_id = run.info.run_id
    history = tracking.get_metric_history(run_id, "seconds.index_facts")
    assert [metric.value for metric in history] == [2.0, 5.0, 9.0]
    assert tracking.get_run(run_id).data.metrics["seconds.index_facts"] == 9.0


def test_each_run_is_tagged_once_with_packages_and_cpu(tracking, monkeypatch):
    calls = []
    monkeypatch.setattr(
        "mera_pipelines.hooks.package_versions",
        lambda: calls.append(1) or {"trl": metadata.version("trl"), "not-installed": None},
    )
    hooks = RunReportHooks()
    node = SimpleNamespace(name="extract_facts")
    with mlflow.start_run() as run:
        hooks.before_node_run(node)
        hooks.after_node_run(node)
        hooks.after_dataset_saved("facts", None, node)
    tags = tracking.get_run(run.info.run_id).data.tags
    assert tags["package.trl"] == metadata.version("trl")
    assert tags["package.not-installed"] == "absent"
    assert tags["cpu.capability"]
    assert calls == [1]  # the second log of the node's seconds does not tag again


def test_without_an_active_run_nothing_is_logged(tracking):
    hooks = RunReportHooks(clock=iter([1.0, 2.0]).__next__)
    node = SimpleNamespace(name="n")
    hooks.before_node_run(node)
    hooks.after_node_run(node)
    assert tracking.search_runs(experiment_ids=["0"]) == []
