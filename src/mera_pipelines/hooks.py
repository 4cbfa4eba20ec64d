"""Project hooks: per-node wall time into MLflow, training tables as MLflow artifacts, and a
one-paragraph error for bad input."""

from __future__ import annotations

import logging
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from kedro.framework.hooks import hook_impl

from mera_pipelines.core.errors import MeraError
from mera_pipelines.core.provenance import cpu_description, package_versions

logger = logging.getLogger(__name__)


def error_chain(error: BaseException | None) -> Iterator[BaseException]:
    """The error and its causes, outermost first (Kedro wraps the errors of nodes and data sets)."""
    seen = set()
    while error is not None and id(error) not in seen:
        yield error
        seen.add(id(error))
        error = error.__cause__ or error.__context__


def find_mera_error(error: BaseException | None) -> MeraError | None:
    """The error in Kedro's wrapping that a user should read."""
    return next((cause for cause in error_chain(error) if isinstance(cause, MeraError)), None)


# Kedro's DatasetError when a versioned input was never saved: "<dataset>: Did not find any versions"
_NO_VERSION = re.compile(r"^(?P<dataset>[\w.]+): Did not find any versions")
# The stage pipelines of pipeline_registry, in run order: the first that writes a data set is named
STAGE_PIPELINES = ("ingest", "memory", "synthesize", "collect", "train_planner", "evaluate")


def missing_input_hint(error: BaseException | None) -> str | None:
    """A versioned input that no run has saved yet, and the pipeline that writes it.

    Running a stage on its own (``--pipeline=memory`` in a fresh project) otherwise ends in a
    Kedro traceback about versions; this says which command to run first.
    """
    for cause in error_chain(error):
        match = _NO_VERSION.match(str(cause))
        if match:
            dataset = match.group("dataset")
            producer = pipeline_writing(dataset)
            first = f"`kedro run --pipeline={producer}`" if producer else "its pipeline"
            return (
                f"No saved version of '{dataset}' yet: run {first} (with the same --env and "
                "--params) first, or a composite pipeline that includes it (`train`, `evaluate`)."
            )
    return None


def pipeline_writing(dataset: str) -> str | None:
    from mera_pipelines.pipeline_registry import register_pipelines

    pipelines = register_pipelines()
    for name in STAGE_PIPELINES:
        if dataset in pipelines[name].all_outputs():
            return name
    return None


# Versioned tables logged to the MLflow run as well, under data/ (the train pipeline's data sets)
TABLES_LOGGED_TO_MLFLOW = ("synthetic_questions", "planner_states", "training_states")


class RunReportHooks:
    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._node_started: dict[str, float] = {}
        self._catalog: Any = None
        self._runs_tagged: set[str] = set()

    @hook_impl
    def after_catalog_created(self, catalog: Any) -> None:
        self._catalog = catalog

    @hook_impl
    def after_dataset_saved(self, dataset_name: str, data: Any, node: Any) -> None:
        self._log_node_seconds(node)
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
        self._node_started[node.name] = self._clock()

    @hook_impl
    def after_node_run(self, node: Any) -> None:
        seconds = self._log_node_seconds(node)
        if seconds is not None:
            logger.info("Node %s took %.1f s", node.name, seconds)

    def _log_node_seconds(self, node: Any) -> float | None:
        """``seconds.<node>``: from the node's start to now, logged again after each output save.

        Kedro calls after_node_run before it saves the node's outputs, and some nodes do their
        work in the save (index_facts: embedding and the LanceDB write happen in the memory
        dataset's save), so the metric is updated after every save; the last value covers the
        node and all of its outputs.
        """
        started = self._node_started.get(node.name)
        if started is None:
            return None
        seconds = self._clock() - started
        import mlflow

        run = mlflow.active_run()
        if run is not None:
            mlflow.log_metric(f"seconds.{node.name}", seconds)
            self._tag_environment(run.info.run_id)
        return seconds

    def _tag_environment(self, run_id: str) -> None:
        """Once per run: the package versions and CPU that decide its numbers, as tags.

        Here rather than before the pipeline runs because kedro-mlflow opens the run in its own
        before_pipeline_run hook, and the order of two plugins' hooks is not fixed.
        """
        if run_id in self._runs_tagged:
            return
        import mlflow

        tags = {
            f"package.{name}": version or "absent" for name, version in package_versions().items()
        }
        tags.update({f"cpu.{key}": value or "unknown" for key, value in cpu_description().items()})
        mlflow.set_tags(tags)
        self._runs_tagged.add(run_id)

    @hook_impl
    def on_pipeline_error(self, error: Exception) -> None:
        user_error = find_mera_error(error)
        if user_error is not None:
            # One readable paragraph ahead of the traceback Kedro prints for the same error.
            print(f"\nERROR: {user_error}\n", file=sys.stderr)
            return
        hint = missing_input_hint(error)
        if hint is not None:
            print(f"\nERROR: {hint}\n", file=sys.stderr)


class LLMFailureHooks:
    """LLM calls that finally failed, reported in MLflow; the run stops over a failure budget.

    A failed call makes its role fall back to the heuristic (the run goes on), so each one is
    recorded with the turn or question it served (``core.llm.failures``) and logged after each
    node that used an LLM backend: the metric ``llm.failed_calls`` (the run's total so far, 0
    when none failed) and the artifact ``reports/llm_failures.json``. Logging happens in the
    node's own thread, where kedro-mlflow has re-opened the run, so it also lands in the one
    run under ThreadRunner. When a backend went over its ``failure_budget`` the node fails, so
    nothing it computed is saved, and the run exits non-zero with the budget error.
    """

    def __init__(self) -> None:
        self._failures: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    @hook_impl
    def before_pipeline_run(self) -> None:
        with self._lock:
            self._failures = []

    @hook_impl
    def after_node_run(self, node: Any, inputs: dict[str, Any]) -> None:
        from mera_pipelines.core.llm.failures import exceeded_budget, failed_calls_of

        by_dataset = failed_calls_of(inputs)
        if not by_dataset:
            return  # no LLM backend in this node
        with self._lock:
            for dataset, calls in by_dataset.items():
                for call in calls:
                    self._failures.append({"node": node.name, "dataset": dataset, **call.as_dict()})
                    logger.warning("LLM call failed for good (%s): %s", call.item, call.reason)
            failures = list(self._failures)
        _log_failures(failures)
        error = exceeded_budget(inputs)
        if error is not None:
            raise error


def _log_failures(failures: list[dict[str, Any]]) -> None:
    import mlflow

    if mlflow.active_run() is None:
        return
    mlflow.log_metric("llm.failed_calls", float(len(failures)))
    if failures:
        mlflow.log_dict(failures, "reports/llm_failures.json")
