"""benchmarks/train_record.py reads a train run back from a real MLflow store (SQLite, local
artifacts), as `kedro run --pipeline=train` leaves it: node seconds as metrics, stage reports as
artifacts under reports/. The run here is written by the test, not by the pipeline."""

from __future__ import annotations

import json

import pytest

from tests.support.benchmark_scripts import load_benchmark_script


@pytest.fixture(scope="module")
def train_record():
    return load_benchmark_script("train_record")


@pytest.fixture
def project(tmp_path):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment(
        "mera_pipelines", artifact_location=(tmp_path / "mlruns").as_uri()
    )
    older = client.create_run(experiment, run_name="evaluate", start_time=1_000)
    client.set_terminated(older.info.run_id)
    run = client.create_run(
        experiment,
        run_name="train",
        start_time=2_000,  # newer than the evaluate run
        tags={
            "kedro_command": "kedro run --pipeline=train",
            "env": "locomo_split",
            "package.transformers": "5.25.0",
            "package.trl": "1.16.0",
            "cpu.capability": "AVX2",
        },
    )
    run_id = run.info.run_id
    client.log_metric(run_id, "seconds.train_planner_grpo", 120.04)
    client.log_metric(run_id, "seconds.filter_training_states", 60.0)
    client.log_metric(run_id, "train.grpo.reward_mean", 0.5)  # not a node time
    # a decaying rate whose middle step is logged last
    for step, rate in ((1, 1e-5), (3, 2e-6), (2, 6e-6)):
        client.log_metric(run_id, "grpo.learning_rate", rate, step=step)
    grpo_report = {"reward_curve": [0.0, 0.2, 0.4, 1.0], "reward_std_curve": [0.1, 0.0, 0.3, 0.0]}
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "grpo_report.json").write_text(json.dumps(grpo_report))
    (reports / "filter_report.json").write_text(json.dumps({"retained": 7}))
    for name in ("grpo_report.json", "filter_report.json"):
        client.log_artifact(run_id, str(reports / name), artifact_path="reports")
    client.set_terminated(run_id)
    return tmp_path, run_id


def test_newest_run_with_node_seconds_reports_and_grpo_figures(train_record, project):
    folder, run_id = project
    client = train_record.open_client(folder)
    run = train_record.find_run(client, None)
    assert run.info.run_id == run_id

    record = train_record.build_record(
        run, train_record.stage_reports(client, run_id), note="n", commit="abc"
    )
    assert record["status"] == "FINISHED"
    assert record["command"] == "kedro run --pipeline=train"
    assert record["packages"] == {"transformers": "5.25.0", "trl": "1.16.0"}
    assert record["cpu"] == {"capability": "AVX2"}
    assert record["node_seconds"] == {"train_planner_grpo": 120.0, "filter_training_states": 60.0}
    assert record["filter_report"] == {"retained": 7}
    assert record["missing_reports"] == ["synthesis", "collect", "sft"]
    assert record["wall_seconds_total"] >= 0
    figures = record["grpo_figures"]
    # four steps, so the first and last 10 are all of them: (0 + 0.2 + 0.4 + 1.0) / 4
    assert figures["reward_mean_first_10_steps"] == pytest.approx(0.4)
    assert figures["steps_with_equal_rewards"] == 2
    # the rate of the last step (3), not the last value logged
    assert figures["last_step_learning_rate"] == pytest.approx(2e-6)


def test_grpo_figures_over_the_edges(train_record):
    # 3.2e-8: equal rewards after float rounding; 0.002: one completion's length penalty
    report = {"reward_curve": [0.0, 1.0, 0.5, 0.5], "reward_std_curve": [0.0, 3.2e-8, 0.002, 0.3]}
    figures = train_record.grpo_figures(report, edge=2)
    assert figures == {
        "reward_mean_first_2_steps": 0.5,
        "reward_mean_last_2_steps": 0.5,
        "steps_with_equal_rewards": 2,
    }
    assert train_record.grpo_figures({}) == {}
    # the last step's rewards differ because one of its replies did not parse
    report["parse_failure_curve"] = [0.0, 0.0, 0.0, 0.125]
    assert train_record.grpo_figures(report, edge=2)["steps_with_unequal_rewards_all_parsed"] == 1
    # trl's num_iterations=2: four batches scored over eight steps
    report["scored_steps"] = [1, 3, 5, 7]
    assert train_record.grpo_figures(report, edge=2)["scored_steps"] == 4


def test_a_project_without_an_mlflow_store_is_named(train_record, tmp_path):
    with pytest.raises(SystemExit, match="no MLflow store"):
        train_record.open_client(tmp_path)
