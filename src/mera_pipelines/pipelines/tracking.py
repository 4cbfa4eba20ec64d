"""Streaming metrics (training curves) into the kedro-mlflow run of the current `kedro run`.

Nodes return their final figures through metrics datasets; curves logged step by step while a
trainer runs cannot wait for the node to return, so they go straight to the active run.
"""

from __future__ import annotations

from collections.abc import Callable


def mlflow_step_logger() -> Callable[[dict[str, float], int], None] | None:
    """``log(metrics, step)`` into the active MLflow run, or None when no run is active."""
    import mlflow

    if mlflow.active_run() is None:
        return None

    def log(metrics: dict[str, float], step: int) -> None:
        mlflow.log_metrics(metrics, step=step)

    return log
