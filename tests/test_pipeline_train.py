"""`kedro run --pipeline=train` end to end with a tiny from-config planner, then `evaluate` with
the trained planner, through the real `kedro` CLI in a throwaway project copy.

The tiny model writes no usable JSON, so rollout filtering (which would drop every state) is
off here; filtering itself is unit-tested in tests/core/training with a scripted sampler.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from mera_pipelines.core.llm.tiny_lm import build_tiny_lm
from tests.support.project import kedro_cli, make_project_copy

TRAIN_PARAMS = ",".join(
    [
        "training.base_model.kind=folder",
        "training.base_model.path={model}",
        "training.torch_threads=1",
        "training.synthesis.max_per_memory=8",
        "training.sft.max_steps=2",
        "training.filtering.enabled=false",
        "training.filtering.max_states=4",
        "training.grpo.steps=2",
        "training.grpo.num_generations=2",
        "training.grpo.max_completion_length=8",
    ]
)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    return make_project_copy(tmp_path_factory.mktemp("project"))


@pytest.fixture(scope="module")
def train_run(project, tmp_path_factory):
    model = build_tiny_lm(tmp_path_factory.mktemp("tiny") / "model")
    result = kedro_cli(
        project, "run", "--pipeline=train", f"--params={TRAIN_PARAMS.format(model=model)}"
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def sql(project: Path, query: str, *args) -> list[tuple]:
    with sqlite3.connect(project / "mlflow.db") as db:
        return db.execute(query, args).fetchall()


def test_train_writes_every_stage(project, train_run):
    split = json.loads((project / "data/05_model_input/training_split.json").read_text())
    assert split == {"train_memory_ids": ["demo-1", "demo-2"], "held_out_memory_ids": ["demo-3"]}
    synthesis = json.loads((project / "data/08_reporting/synthesis_report.json").read_text())
    assert 0 < synthesis["questions"] <= 16
    questions = pd.read_parquet(
        next((project / "data/05_model_input/synthetic_questions.parquet").glob("*/*.parquet"))
    )
    assert set(questions["memory_id"]) <= {"demo-1", "demo-2"}  # never the held-out memory
    states = pd.read_parquet(
        next((project / "data/05_model_input/planner_states.parquet").glob("*/*.parquet"))
    )
    assert {
        "question",
        "graph_text",
        "query_history",
        "gold_turn_ids",
        "found_turn_ids",
        "memory_id",
    } <= set(states.columns)
    table = pd.read_csv(project / "data/08_reporting/state_table.csv")
    assert table.loc[0, "states_collected"] == len(states)
    assert table.loc[0, "retained"] == min(
        4, int((states["gold_turn_ids"].map(len) > states["found_turn_ids"].map(len)).sum())
    )


def test_trained_planner_is_a_versioned_model_with_metadata_and_artifact(project, train_run):
    [version] = [p for p in (project / "data/06_models/planner").iterdir()]
    metadata = json.loads((version / "mera_planner.json").read_text())
    assert metadata["stage"] == "grpo"
    assert metadata["train_memory_ids"] == ["demo-1", "demo-2"]
    assert metadata["prompt"]["graph_chars"] > 0
    assert metadata["prompt"]["draft"] is False
    assert metadata["prompt"]["complement"] is False
    assert metadata["prompt"]["hints"] is False
    assert (version / "config.json").is_file()
    [(run_id, status)] = sql(project, "SELECT run_uuid, status FROM runs")
    assert status == "FINISHED"
    artifacts = Path(sql(project, "SELECT artifact_uri FROM runs")[0][0].removeprefix("file://"))
    if not artifacts.is_absolute():
        artifacts = project / artifacts
    assert (artifacts / "models" / "planner" / version.name / "config.json").is_file()
    for table in ("synthetic_questions", "planner_states", "training_states"):
        assert (artifacts / "data" / f"{table}.parquet").is_file(), table
    grpo_steps = sql(
        project, "SELECT step FROM metrics WHERE run_uuid = ? AND key = 'grpo.reward'", run_id
    )
    assert sorted(s for (s,) in grpo_steps) == [1, 2]  # a training curve, step by step
    report = json.loads((project / "data/08_reporting/grpo_report.json").read_text())
    assert report["scored_steps"] == [1, 2]  # each step scored its own completions
    keys = {k for (k,) in sql(project, "SELECT key FROM latest_metrics WHERE run_uuid = ?", run_id)}
    assert {
        "train.synthesis.questions",
        "train.collect.states",
        "sft.loss",
        "grpo.rewards.retrieval_reward.mean",
        "train.grpo.seconds_per_step",
    } <= keys
    assert any(k.startswith("seconds.train_planner_grpo") for k in keys)
    assert (project / "data/08_reporting/plots/training_curves.png").stat().st_size > 1000


def test_evaluate_uses_the_trained_planner_on_held_out_memories(project, train_run):
    result = kedro_cli(
        project,
        "run",
        "--pipeline=evaluate",
        "--params=evaluation.planner_model=latest,evaluation.memories=demo-3,"
        "evaluation.max_questions=3,evaluation.planner_model_backend.max_new_tokens=8",
    )
    assert result.returncode == 0, result.stderr[-4000:]
    summary = json.loads((project / "data/08_reporting/evaluate_summary.json").read_text())
    assert summary["backend"]["roles"]["planner"] == "llm"
    assert "data/06_models/planner" in summary["backend"]["llm"]["planner"]["path"]
    assert any("trained planner" in note for note in summary["notes"])
    assert summary["systems"]["mera"]["n_questions"] == 3


def test_evaluate_refuses_the_planner_on_its_training_memories(project, train_run):
    result = kedro_cli(
        project,
        "run",
        "--pipeline=evaluate",
        "--params=evaluation.planner_model=latest,evaluation.memories=demo-1",
    )
    assert result.returncode != 0
    assert "trained on memories ['demo-1']" in result.stdout + result.stderr


def test_grpo_continues_from_a_trained_planner_with_trl_extra(project, train_run):
    [first] = sorted((project / "data/06_models/planner").iterdir())
    params = (
        # two steps on one batch of completions: trl's num_iterations, through trl_extra
        "training.torch_threads=1,training.grpo.steps=2,training.grpo.num_generations=2,"
        "training.grpo.trl_extra.num_iterations=2,"
        f"training.grpo.max_completion_length=8,training.grpo_start={first},"
        "training.prompt.draft=true,training.prompt.complement=true,training.prompt.hints=true"
    )
    result = kedro_cli(
        project, "run", "--pipeline=train", "--nodes=train_planner_grpo", f"--params={params}"
    )
    assert result.returncode == 0, result.stderr[-4000:]
    second = sorted((project / "data/06_models/planner").iterdir())[-1]
    assert second != first
    metadata = json.loads((second / "mera_planner.json").read_text())
    assert metadata["started_from"] == first.name
    assert metadata["start_stage"] == "grpo"
    assert metadata["prompt"]["draft"] is True  # the prompt GRPO trained with, not the start's
    assert metadata["prompt"]["complement"] is True  # its reward added the heuristic's intents
    assert metadata["prompt"]["hints"] is True
    assert metadata["train_memory_ids"] == ["demo-1", "demo-2"]
    report = json.loads((project / "data/08_reporting/grpo_report.json").read_text())
    assert report["start"]["folder"] == str(first)
    assert report["steps"] == 2
    assert report["scored_steps"] == [1]  # step 2 reused step 1's completions


def test_grpo_start_that_names_nothing_is_a_clear_error(project, train_run):
    result = kedro_cli(
        project,
        "run",
        "--pipeline=train",
        "--nodes=train_planner_grpo",
        "--params=training.grpo_start=no-such-planner",
    )
    assert result.returncode != 0
    assert "training.grpo_start 'no-such-planner' is neither 'latest'" in (
        result.stdout + result.stderr
    )


def test_training_plot_puts_rollout_curves_at_the_steps_that_scored_completions():
    # trl's num_iterations=2 scores completions at steps 1, 3, 5 and reuses them at 2, 4, 6
    from mera_pipelines.pipelines.train_planner.nodes import plot_training

    grpo = {
        "reward_curve": [0.1, 0.2, 0.4],
        "recall_gained_curve": [0.2, 0.3, 0.5],
        "parse_failure_curve": [0.5, 0.25, 0.0],
        "scored_steps": [1, 3, 5],
    }
    figure = plot_training({}, grpo)["training_curves.png"]
    reward_axis, rollout_axis = figure.axes[1], figure.axes[2]
    assert list(reward_axis.get_lines()[0].get_xdata()) == [1, 3, 5]
    assert [list(line.get_xdata()) for line in rollout_axis.get_lines()] == [[1, 3, 5]] * 2
    older = plot_training({}, {k: v for k, v in grpo.items() if k != "scored_steps"})
    assert list(older["training_curves.png"].axes[1].get_lines()[0].get_xdata()) == [1, 2, 3]


def test_training_log_names_the_steps_a_metric_was_logged_at():
    from mera_pipelines.core.training.trainers import TrainingLog

    log = TrainingLog(
        history=[{"reward": 0.1, "step": 1}, {"loss": 0.3, "step": 2}, {"reward": 0.4, "step": 3}]
    )
    assert log.steps_with("reward") == [1, 3]
    assert log.curve("reward") == [0.1, 0.4]


def test_training_plot_shows_cut_off_and_empty_plans_when_there_were_some():
    from mera_pipelines.pipelines.train_planner.nodes import plot_training

    grpo = {"reward_curve": [0.1, 0.2], "parse_failure_curve": [0.5, 0.25]}
    without = plot_training({"loss_curve": [1.0]}, grpo)["training_curves.png"]
    cut_off = plot_training({}, {**grpo, "cut_off_curve": [0.25, 0.0]})["training_curves.png"]
    both = plot_training(
        {}, {**grpo, "cut_off_curve": [0.25, 0.0], "no_intent_curve": [0.0, 0.25]}
    )["training_curves.png"]
    figures = (without, cut_off, both)
    labels = [[line.get_label() for line in f.axes[2].get_lines()] for f in figures]
    assert labels[0] == ["missing evidence recovered", "parse failure rate"]
    assert labels[1] == [*labels[0], "of which cut off"]
    assert labels[2] == [*labels[1], "of which no intent"]
