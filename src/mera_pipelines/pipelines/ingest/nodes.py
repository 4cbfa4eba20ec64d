"""Thin nodes over ``core.sources``: the reading and validation happen in the source dataset."""

from __future__ import annotations

from typing import Any

import pandas as pd

from mera_pipelines.core.records import Conversation, Question, Turn, to_frame
from mera_pipelines.core.sources import IngestResult


def canonical_tables(
    source: IngestResult, source_params: dict[str, Any]
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict[str, Any], dict[str, Any]]:
    """Split the validated source into tables, the ingest report and MLflow metrics."""
    report = {
        **source.report(),
        "source": {"path": str(source_params["path"]), "format": source_params["format"]},
    }
    metrics = {
        key: {"value": float(report[key]), "step": 0}
        for key in ("conversations", "sessions", "turns", "questions")
    }
    metrics.update(
        {f"dropped.{k}": {"value": float(v), "step": 0} for k, v in report["dropped"].items()}
    )
    metrics.update(
        {f"repaired.{k}": {"value": float(v), "step": 0} for k, v in report["repaired"].items()}
    )
    return (
        to_frame(source.conversations, Conversation),
        to_frame(source.turns, Turn),
        to_frame(source.questions, Question),
        report,
        metrics,
    )
