"""One train run's figures as a benchmark record, read back from the project's MLflow store.

``kedro run --pipeline=train`` logs each stage's report (``reports/*_report.json``) and each
node's wall time (metric ``seconds.<node>``) to MLflow. This script turns one such run into the
JSON the docs quote (``benchmarks/results/train_*.json``): the command and environment Kedro
recorded, every node's seconds, the whole run's wall time, the stage reports, and a few
figures derived from the GRPO curves (reward over the first and last steps, steps whose
rewards were all equal, so GRPO had no advantage to learn from, the last step's learning
rate).

    python benchmarks/train_record.py --project <project> --out benchmarks/results/train_x.json \\
        --note "what was run and why"              # the newest run of the project
    python benchmarks/train_record.py --project <project> --run-id <mlflow run id> --out ...

Nothing is run here; a run still going or failed is recorded with its status, and the record
says which reports are missing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from benchlib import write_json

EXPERIMENT = "mera_pipelines"  # conf/base/mlflow.yml
STAGE_REPORTS = ("synthesis", "collect", "sft", "filter", "grpo")
EDGE_STEPS = 10  # GRPO reward is averaged over this many first and last steps
# a group's reward std below this is float rounding (equal rewards give ~3e-8, and trl's own
# frac_reward_zero_std counts those as unequal); the smallest real difference, one completion's
# 0.00625 length penalty in a group of 8, gives ~0.002
EQUAL_REWARD_STD = 1e-6


def open_client(project: Path):
    from mlflow.tracking import MlflowClient

    store = project / "mlflow.db"
    if not store.is_file():
        raise SystemExit(f"{store}: no MLflow store; run `kedro run --pipeline=train` there first")
    return MlflowClient(tracking_uri=f"sqlite:///{store}")


def find_run(client, run_id: str | None, experiment: str = EXPERIMENT):
    """The run asked for, or the newest run of the experiment."""
    if run_id:
        return client.get_run(run_id)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        raise SystemExit(f"No MLflow experiment {experiment!r} in this project")
    runs = client.search_runs(
        [found.experiment_id], order_by=["attribute.start_time DESC"], max_results=1
    )
    if not runs:
        raise SystemExit(f"MLflow experiment {experiment!r} has no runs")
    return runs[0]


def stage_reports(client, run_id: str) -> dict[str, Any]:
    """``<stage>_report`` for every stage report the run logged under ``reports/``."""
    logged = {Path(a.path).name for a in client.list_artifacts(run_id, "reports")}
    reports = {}
    with tempfile.TemporaryDirectory() as folder:
        for stage in STAGE_REPORTS:
            name = f"{stage}_report.json"
            if name in logged:
                path = client.download_artifacts(run_id, f"reports/{name}", folder)
                reports[f"{stage}_report"] = json.loads(Path(path).read_text())
    return reports


def grpo_figures(grpo_report: dict[str, Any], edge: int = EDGE_STEPS) -> dict[str, Any]:
    """Reward early and late in training, steps where every completion scored the same, and
    steps whose rewards differ with every completion parsed: there the group's advantages rank
    valid plans (by what they find, or a format penalty), not valid JSON above broken replies.
    "Steps" are the steps that scored completions: every step, unless trl's num_iterations
    reused a batch (then ``scored_steps`` counts them)."""
    rewards = grpo_report.get("reward_curve") or []
    spreads = grpo_report.get("reward_std_curve") or []
    if not rewards:
        return {}
    figures = {
        f"reward_mean_first_{edge}_steps": statistics.fmean(rewards[:edge]),
        f"reward_mean_last_{edge}_steps": statistics.fmean(rewards[-edge:]),
        "steps_with_equal_rewards": sum(1 for spread in spreads if spread < EQUAL_REWARD_STD),
    }
    if "scored_steps" in grpo_report:  # absent in reports from before the fifty-fifth session
        figures["scored_steps"] = len(grpo_report["scored_steps"])
    failures = grpo_report.get("parse_failure_curve") or []
    if len(failures) == len(spreads):  # reports from before that curve have none
        figures["steps_with_unequal_rewards_all_parsed"] = sum(
            1
            for spread, failed in zip(spreads, failures, strict=True)
            if spread >= EQUAL_REWARD_STD and failed == 0
        )
    return figures


def git_commit(project: Path) -> str | None:
    done = subprocess.run(
        ["git", "-C", str(project), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or None


def keys_under(mapping: dict[str, Any], prefix: str) -> dict[str, Any]:
    """The entries whose key starts with ``prefix`` (a run's metrics or tags), without it."""
    return {
        key.removeprefix(prefix): value
        for key, value in sorted(mapping.items())
        if key.startswith(prefix)
    }


def build_record(run, reports: dict[str, Any], note: str | None, commit: str | None) -> dict:
    """The record of one run: what Kedro ran, how long each node took, what each stage reported."""
    info, tags, metrics = run.info, run.data.tags, run.data.metrics
    node_seconds = {
        node: round(value, 1) for node, value in keys_under(metrics, "seconds.").items()
    }
    wall = (info.end_time - info.start_time) / 1000 if info.end_time else None
    record = {
        "benchmark": "train",
        "mlflow_run_id": info.run_id,
        "kedro_session": tags.get("run_id"),  # also the version of every dataset the run saved
        "status": info.status,
        "command": tags.get("kedro_command"),
        "env": tags.get("env"),
        "runtime_params": tags.get("runtime_params"),
        "commit": commit,
        # what the run was made with (RunReportHooks tags; none in runs before the 53rd session)
        "packages": keys_under(tags, "package."),
        "cpu": keys_under(tags, "cpu."),
        "note": note,
        "wall_seconds_total": wall,
        "node_seconds": node_seconds,
        "missing_reports": [s for s in STAGE_REPORTS if f"{s}_report" not in reports],
        **reports,
    }
    if "grpo_report" in reports:
        record["grpo_figures"] = grpo_figures(reports["grpo_report"])
        if "grpo.learning_rate" in metrics:
            # MLflow keeps the newest step's value: next to the report's starting rate it
            # shows the schedule (trl's linear decay ends near 0; a constant rate does not)
            record["grpo_figures"]["last_step_learning_rate"] = metrics["grpo.learning_rate"]
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", type=Path, required=True, help="the Kedro project folder")
    parser.add_argument("--run-id", help="MLflow run id (default: the newest run)")
    parser.add_argument("--note", help="what was run and why, on which machine")
    parser.add_argument("--out", required=True, help="where to write the JSON record")
    args = parser.parse_args()
    client = open_client(args.project)
    run = find_run(client, args.run_id)
    record = build_record(
        run, stage_reports(client, run.info.run_id), args.note, git_commit(args.project)
    )
    out = write_json(args.out, record)
    print(f"run {run.info.run_id} ({run.info.status}) -> {out}")


if __name__ == "__main__":
    main()
