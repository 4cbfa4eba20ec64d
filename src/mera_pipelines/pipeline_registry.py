"""Project pipelines: one folder per pipeline under ``pipelines/``; composites named here."""

from __future__ import annotations

from kedro.framework.project import find_pipelines
from kedro.pipeline import Pipeline

from mera_pipelines.pipelines import ingest, memory


def register_pipelines() -> dict[str, Pipeline]:
    # Kedro 1.7 loads only the requested pipeline folders, so composites are built from the
    # modules directly rather than from find_pipelines()' (possibly partial) result.
    pipelines = find_pipelines(raise_errors=True)
    # The main job until `evaluate` exists: raw source -> canonical tables -> fact memory.
    pipelines["__default__"] = ingest.create_pipeline() + memory.create_pipeline()
    return pipelines
