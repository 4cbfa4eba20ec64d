"""The hint for a versioned input no run has saved yet names the pipeline that writes it."""

from __future__ import annotations

from kedro.io.core import DatasetError

from mera_pipelines.hooks import missing_input_hint, pipeline_writing


def wrapped(message: str) -> Exception:
    """Kedro raises the dataset's error from inside its own, as the runner does."""
    try:
        try:
            raise DatasetError(message)
        except DatasetError as inner:
            raise RuntimeError("node failed") from inner
    except RuntimeError as outer:
        return outer


def test_each_stage_input_is_traced_to_the_pipeline_writing_it():
    assert pipeline_writing("turns") == "ingest"
    assert pipeline_writing("facts") == "memory"
    assert pipeline_writing("synthetic_questions") == "synthesize"
    assert pipeline_writing("planner_states") == "collect"
    assert pipeline_writing("not_a_dataset") is None


def test_missing_version_error_becomes_a_hint_with_the_command():
    hint = missing_input_hint(wrapped("planner_states: Did not find any versions for Parquet"))
    assert "'planner_states'" in hint and "`kedro run --pipeline=collect`" in hint


def test_other_errors_get_no_hint():
    assert missing_input_hint(wrapped("turns: some other failure")) is None
    assert missing_input_hint(None) is None
