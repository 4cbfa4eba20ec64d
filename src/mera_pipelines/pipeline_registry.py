"""Project pipelines: one folder per pipeline under ``pipelines/``; composites named here."""

from __future__ import annotations

from kedro.framework.project import find_pipelines
from kedro.pipeline import Pipeline


def register_pipelines() -> dict[str, Pipeline]:
    pipelines = find_pipelines(raise_errors=True)
    # The main job until `evaluate` exists: raw source -> canonical tables -> fact memory.
    pipelines["__default__"] = pipelines["ingest"] + pipelines["memory"]
    return pipelines
