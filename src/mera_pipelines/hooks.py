"""Project hooks: per-node wall time into MLflow, training tables as MLflow artifacts, and a
one-paragraph error for bad input."""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

from kedro.framework.hooks import hook_impl

from mera_pipelines.core.errors import MeraError

logger = logging.getLogger(__name__)


def find_mera_error(error: BaseException | None) -> MeraError | None:
    """Kedro wraps dataset errors; walk the cause chain to the error a user should read."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, MeraError):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


# Versioned tables logged to the MLflow run as well, under data/ (the train pipeline's data sets)
TABLES_LOGGED_TO_MLFLOW = ("synthetic_questions", "planner_states", "training_states")


class RunReportHooks:
    def __init__(self) -> None:
        self._node_started: dict[str, float] = {}
        self._catalog: Any = None

    @hook_impl
    def after_catalog_created(self, catalog: Any) -> None:
        self._catalog = catalog

    @hook_impl
    def after_dataset_saved(self, dataset_name: str, data: Any, node: Any) -> None:
        if dataset_name not in TABLES_LOGGED_TO_MLFLOW or self._catalog is None:
            return
        import mlflow

        dataset = self._catalog.get(dataset_name)
        if mlflow.active_run() is None or not hasattr(dataset, "resolve_save_version"):
            return
        # the version this run just wrote (Kedro's _get_save_path refuses existing paths)
        path = dataset._get_versioned_path(dataset.resolve_save_version())
        mlflow.log_artifact(str(path), artifact_path="data")

    @hook_impl
    def before_node_run(self, node: Any) -> None:
        self._node_started[node.name] = time.perf_counter()

    @hook_impl
    def after_node_run(self, node: Any) -> None:
        started = self._node_started.pop(node.name, None)
        if started is None:
            return
        seconds = time.perf_counter() - started
        logger.info("Node %s took %.1f s", node.name, seconds)
        import mlflow

        if mlflow.active_run() is not None:
            mlflow.log_metric(f"seconds.{node.name}", seconds)

    @hook_impl
    def on_pipeline_error(self, error: Exception) -> None:
        user_error = find_mera_error(error)
        if user_error is not None:
            # One readable paragraph ahead of the traceback Kedro prints for the same error.
            print(f"\nERROR: {user_error}\n", file=sys.stderr)
