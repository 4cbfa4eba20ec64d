"""Property-based fuzzing of the source readers: a mutated file gives a clean error naming file,
record and field, or a valid result; never another exception (a crash traceback)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mera_pipelines.core.errors import InputDataError
from mera_pipelines.core.sources import read_source
from mera_pipelines.core.sources.base import MAX_TURN_CHARS
from tests.support.fuzzing import (
    FORMATS,
    KINDS,
    BadInput,
    apply_record_mutation,
    bad_inputs,
    encode,
    load_valid,
    read_outcome,
)

FUZZ = settings(
    max_examples=150,
    deadline=None,
    database=None,  # no .hypothesis/ folder in the repo; failures print their reproducer
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def read_bad_input(bad: BadInput) -> str:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"input.{'jsonl' if bad.base == 'jsonl' else 'json'}"
        path.write_bytes(bad.data)
        return read_outcome(path, bad.fmt)


@pytest.mark.parametrize("fmt", FORMATS)
def test_valid_base_files_read(tmp_path, fmt):
    path = tmp_path / "input"
    path.write_bytes(encode(fmt, load_valid(fmt)))
    assert read_outcome(path, fmt) == "valid"


@pytest.mark.parametrize("fmt", FORMATS)
@FUZZ
@given(data=st.data())
def test_mutated_files_give_a_clean_error_or_a_valid_result(fmt, data):
    bad = data.draw(bad_inputs(fmt))
    assert read_bad_input(bad) in ("error", "valid")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=8, deadline=None, database=None)
@given(data=st.data())
def test_every_kind_of_bad_input_is_handled(fmt, kind, data):
    bad = data.draw(bad_inputs(fmt, kinds=(kind,)))
    assert read_bad_input(bad) in ("error", "valid")


@pytest.mark.parametrize(
    ("fmt", "field_suffix"),
    [("locomo", ".text"), ("longmemeval", ".content"), ("jsonl", "text")],
)
def test_absurdly_long_turn_is_rejected_naming_the_field(tmp_path, fmt, field_suffix):
    records = apply_record_mutation(fmt, load_valid(fmt), "huge_turn", 0)
    path = tmp_path / "input"
    path.write_bytes(encode(fmt, records))
    with pytest.raises(InputDataError) as caught:
        read_source(path, fmt)
    assert caught.value.field.endswith(field_suffix)
    assert f"{MAX_TURN_CHARS:,}" in caught.value.problem


@pytest.mark.parametrize("fmt", FORMATS)
def test_duplicate_turns_are_rejected(tmp_path, fmt):
    records = apply_record_mutation(fmt, load_valid(fmt), "duplicate_turn", 0)
    path = tmp_path / "input"
    path.write_bytes(encode(fmt, records))
    if fmt == "longmemeval":  # turns have positional ids: a repeated turn is just another turn
        assert read_outcome(path, fmt) == "valid"
        return
    with pytest.raises(InputDataError, match="duplicate turn id"):
        read_source(path, fmt)


@pytest.mark.parametrize("fmt", FORMATS)
def test_empty_conversations_are_rejected(tmp_path, fmt):
    records = apply_record_mutation(fmt, load_valid(fmt), "empty_conversation", 0)
    path = tmp_path / "input"
    path.write_bytes(encode(fmt, records))
    with pytest.raises(InputDataError):
        read_source(path, fmt)


def test_fuzz_summary_counts_every_kind_with_zero_crashes(capsys):
    from tests.support.fuzz_readers import fuzz

    summary = fuzz(examples_per_format=60)
    print(summary)  # the counts by kind, visible with pytest -s
    assert summary["crashes"] == 0, summary["crash_examples"]
    assert summary["tried"] == 180
    assert set(summary["by_kind"]) >= {"drop_field", "wrong_type", "huge_turn", "non_utf8"}
