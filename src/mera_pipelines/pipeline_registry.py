"""Project pipelines: one folder per pipeline under ``pipelines/``; composites named here."""

from __future__ import annotations

from kedro.framework.project import find_pipelines
from kedro.pipeline import Pipeline

from mera_pipelines.pipelines import evaluate, ingest, memory


def register_pipelines() -> dict[str, Pipeline]:
    # Kedro 1.7 loads only the requested pipeline folders, so composites are built from the
    # modules directly rather than from find_pipelines()' (possibly partial) result.
    pipelines = find_pipelines(raise_errors=True)
    # One command from a raw benchmark file to the report; cached extraction and unchanged
    # memories make reruns cheap.
    pipelines["evaluate"] = (
        ingest.create_pipeline() + memory.create_pipeline() + evaluate.create_pipeline()
    )
    pipelines["__default__"] = pipelines["evaluate"]
    return pipelines
