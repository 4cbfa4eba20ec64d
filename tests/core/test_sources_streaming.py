"""The streaming JSON-list reader and the tally: chunk boundaries, error positions, note caps."""

from __future__ import annotations

import json

import pytest

from mera_pipelines.core.errors import InputDataError
from mera_pipelines.core.sources.base import NOTES_PER_KIND, IngestTally, iter_json_array

# Multi-byte characters, escapes, numbers and literals that a chunk boundary can cut in half.
TRICKY = [
    {"text": "café ☕ naïve 😀", "n": 12345, "x": -1.5e3, "ok": True, "none": None},
    'a "quoted" \\ string \u00e9',
    [1, [2, [3, {"deep": "er"}]]],
    98765,
    False,
    {},
    [],
]


@pytest.mark.parametrize("chunk_chars", [1, 2, 3, 5, 7, 13, 64, 1 << 20])
def test_elements_survive_any_chunk_boundary(tmp_path, chunk_chars):
    path = tmp_path / "tricky.json"
    path.write_text("\ufeff" + json.dumps(TRICKY, ensure_ascii=False, indent=1), encoding="utf-8")
    assert list(iter_json_array(path, "items", chunk_chars=chunk_chars)) == TRICKY


def test_empty_list_yields_nothing(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text(" [ \n ] \n", encoding="utf-8")
    assert list(iter_json_array(path, "items")) == []


BROKEN = [
    '[\n  {"a": 1},\n  {"b": }\n]',
    '[{"a": 1},\n]',
    '[{"a": 1}\n {"b": 2}]',
    '[{"a": 1}] [',
    "[1, 2, 3",
    '[\n"caf\u00e9 and a long string that spans chunks',
    '[{"a": tru}]',
    '[{"a": "x"}, {"b": [1, 2,, 3]}]',
]


@pytest.mark.parametrize("chunk_chars", [1, 4, 1 << 20])
@pytest.mark.parametrize("text", BROKEN)
def test_syntax_errors_name_the_same_line_and_column_as_json(tmp_path, text, chunk_chars):
    path = tmp_path / "broken.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(json.JSONDecodeError) as reference:
        json.loads(text)
    with pytest.raises(InputDataError) as caught:
        list(iter_json_array(path, "items", chunk_chars=chunk_chars))
    assert caught.value.field == "(JSON syntax)"
    assert caught.value.record == f"line {reference.value.lineno} column {reference.value.colno}"


def test_bad_byte_offset_is_exact_across_chunks(tmp_path):
    path = tmp_path / "bad.json"
    good = '["' + "é" * 10 + '", "'  # 2-byte characters so chunks end mid-character
    path.write_bytes(good.encode() + b"\xff" + b'"]')
    with pytest.raises(InputDataError) as caught:
        list(iter_json_array(path, "items", chunk_chars=3))
    assert f"offset {len(good.encode())}" in str(caught.value)
    assert caught.value.record == "line 1"


def test_tally_caps_notes_per_kind_but_counts_all():
    tally = IngestTally(["evidence_empty"], ["answer_int_to_str"])
    for index in range(NOTES_PER_KIND + 3):
        tally.drop("evidence_empty", f"qa[{index}]")
    tally.repair("answer_int_to_str", "qa[0]")
    tally.repair("brand_new_kind", "line 3")
    assert tally.dropped == {"evidence_empty": NOTES_PER_KIND + 3}
    assert tally.repaired == {"answer_int_to_str": 1, "brand_new_kind": 1}
    assert len(tally.notes) == NOTES_PER_KIND + 2
    assert "dropped evidence_empty: qa[0]" in tally.notes
