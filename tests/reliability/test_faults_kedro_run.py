"""`kedro run` with the LLM extractor, answerer and judge on a fault-injecting stub server:
with 30 % of calls faulted the run completes and its facts and per-question answers equal a
fault-free run's; calls that fail for good are reported in MLflow; over budget, the run stops."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
from mlflow.tracking import MlflowClient

from tests.support.fault_server import FaultInjector, FaultPlan
from tests.support.llm_project import (
    answers_table,
    facts_table,
    make_llm_project,
    mlflow_run_ids,
)
from tests.support.openai_stub import StubServer
from tests.support.project import kedro_cli
from tests.support.scripted_llm import scripted_reply

ROLES = ("extractor", "answerer", "judge")
KEY = {"STUB_API_KEY": "k"}


def run_evaluate(tmp_path, name, handler, **project_options):
    with StubServer(handler=handler) as server:
        project = make_llm_project(tmp_path / name, server.base_url, roles=ROLES, **project_options)
        result = kedro_cli(project, "run", "--pipelines=evaluate", "--env", "stub", extra_env=KEY)
    return project, result, server


def run_memory(project):
    return kedro_cli(project, "run", "--pipelines=ingest,memory", "--env", "stub", extra_env=KEY)


def mlflow_metric(project, key):
    client = MlflowClient(f"sqlite:///{project / 'mlflow.db'}")
    (run_id,) = mlflow_run_ids(project)
    return client, run_id, client.get_run(run_id).data.metrics.get(key)


def test_thirty_percent_faults_leave_facts_and_answers_unchanged(tmp_path):
    (tmp_path / "clean").mkdir()
    (tmp_path / "faulty").mkdir()
    clean, clean_result, _ = run_evaluate(tmp_path, "clean", scripted_reply)
    assert clean_result.returncode == 0, clean_result.stderr[-3000:]
    faults = FaultInjector(scripted_reply, FaultPlan(rate=0.3, seed=5, timeout_delay=1.5))
    faulty, faulty_result, server = run_evaluate(tmp_path, "faulty", faults)
    assert faulty_result.returncode == 0, faulty_result.stderr[-3000:]

    assert faults.total_injected >= 0.2 * len(server.chat_requests)
    assert len(faults.injected) >= 5  # faults of many kinds were met
    facts = facts_table(faulty)
    assert facts["text"].str.startswith("LLM: ").all()  # no turn fell back to the heuristic
    pd.testing.assert_frame_equal(facts, facts_table(clean))
    pd.testing.assert_frame_equal(answers_table(faulty), answers_table(clean))
    report = json.loads((faulty / "data/08_reporting/memory_report.json").read_text())
    assert report["extraction_failures"] == 0
    _, _, failed_calls = mlflow_metric(faulty, "llm.failed_calls")
    assert failed_calls == 0.0
    print(f"faults injected and survived: {dict(faults.injected)} of {len(server.chat_requests)}")


def test_calls_failing_for_good_are_reported_in_mlflow(tmp_path):
    plan = FaultPlan(rate=0.2, seed=1, kinds=("unavailable",), max_faults_per_call=None)
    faults = FaultInjector(scripted_reply, plan)
    with StubServer(handler=faults) as server:
        project = make_llm_project(
            tmp_path, server.base_url, max_retries=0, backend_extra="    failure_budget: 1000\n"
        )
        result = run_memory(project)
    assert result.returncode == 0, result.stderr[-3000:]
    stats = pd.read_csv(project / "data/08_reporting/extraction_stats.csv")
    client, run_id, failed_calls = mlflow_metric(project, "llm.failed_calls")
    assert failed_calls == stats["failures"].sum() > 0
    local = client.download_artifacts(run_id, "reports/llm_failures.json", str(tmp_path))
    failures = json.loads(Path(local).read_text())
    assert len(failures) == failed_calls
    assert all(
        f["item"].startswith("turn demo-1/D") and "HTTP 503" in f["reason"] for f in failures
    )
    assert {f["dataset"] for f in failures} == {"extractor_llm"}
    failed_turns = {f["item"].split("/", 1)[1] for f in failures}
    assert failed_turns == set(
        re.findall(r"(D\d+:\d+): ", " ".join(stats["failed_turns"].dropna()))
    )


def test_a_run_over_its_failure_budget_stops_with_a_clear_error(tmp_path):
    plan = FaultPlan(rate=1.0, kinds=("server_error",), max_faults_per_call=None)
    with StubServer(handler=FaultInjector(scripted_reply, plan)) as server:
        project = make_llm_project(
            tmp_path, server.base_url, max_retries=0, backend_extra="    failure_budget: 2\n"
        )
        result = run_memory(project)
        requests = len(server.chat_requests)
    assert result.returncode != 0
    assert "LLM failure budget exceeded" in result.stderr
    assert requests <= 2 + 1 + 4  # the budget stops requests (a few were already in flight)
    assert not (project / "data/04_feature/facts.parquet").exists()  # nothing half-written
