"""Every kind of unusable input ends in an error that names the file, the record and the field."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mera_pipelines.core.errors import ConfigError, InputDataError
from mera_pipelines.core.sources import read_source

FIXTURES = Path(__file__).parents[1] / "fixtures" / "sources"
LOCOMO = json.loads((FIXTURES / "locomo_quirks.json").read_text(encoding="utf-8"))
LONGMEMEVAL = json.loads((FIXTURES / "longmemeval_quirks.json").read_text(encoding="utf-8"))

Mutation = Callable[[Any], None]


def set_at(*keys: Any, value: Any) -> Mutation:
    def mutate(data: Any) -> None:
        for key in keys[:-1]:
            data = data[key]
        data[keys[-1]] = value

    return mutate


def delete_at(*keys: Any) -> Mutation:
    def mutate(data: Any) -> None:
        for key in keys[:-1]:
            data = data[key]
        del data[keys[-1]]

    return mutate


def drop_sessions(sample: int) -> Mutation:
    def mutate(data: Any) -> None:
        body = data[sample]["conversation"]
        for key in [k for k in body if k.startswith("session_")]:
            del body[key]

    return mutate


def assert_names(error: InputDataError, path: Path, record: str, field: str) -> None:
    assert error.path == str(path)
    assert record in error.record
    assert error.field == field
    message = str(error)
    assert str(path) in message
    assert record in message
    assert f"'{field}'" in message


def read_mutated(
    tmp_path: Path, base: Any, mutate: Mutation, fmt: str
) -> tuple[Path, InputDataError]:
    data = copy.deepcopy(base)
    mutate(data)
    path = tmp_path / f"bad.{fmt}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InputDataError) as caught:
        read_source(path, fmt)
    return path, caught.value


A = "sample 1 (sample_id demo-a)"

LOCOMO_CASES = [
    ("sample_not_object", set_at(0, value="oops"), "sample 1", "(sample)"),
    ("sample_id_missing", delete_at(1, "sample_id"), "sample 2", "sample_id"),
    ("sample_id_duplicate", set_at(1, "sample_id", value="demo-a"), "sample 2", "sample_id"),
    ("conversation_missing", delete_at(0, "conversation"), A, "conversation"),
    ("conversation_wrong_type", set_at(0, "conversation", value=[]), A, "conversation"),
    ("speaker_missing", delete_at(0, "conversation", "speaker_b"), A, "conversation.speaker_b"),
    ("no_sessions", drop_sessions(0), A, "conversation"),
    (
        "all_sessions_empty",
        lambda d: d[0]["conversation"].update(session_1=[], session_2=[]),
        A,
        "conversation",
    ),
    (
        "session_not_list",
        set_at(0, "conversation", "session_2", value={}),
        A,
        "conversation.session_2",
    ),
    (
        "turn_not_object",
        set_at(0, "conversation", "session_1", 0, value="hi"),
        A,
        "conversation.session_1[0]",
    ),
    (
        "turn_text_missing",
        delete_at(0, "conversation", "session_1", 1, "text"),
        A,
        "conversation.session_1[1].text",
    ),
    (
        "turn_text_wrong_type",
        set_at(0, "conversation", "session_1", 1, "text", value=5),
        A,
        "conversation.session_1[1].text",
    ),
    (
        "turn_speaker_missing",
        delete_at(0, "conversation", "session_2", 2, "speaker"),
        A,
        "conversation.session_2[2].speaker",
    ),
    (
        "turn_id_duplicate",
        set_at(0, "conversation", "session_2", 0, "dia_id", value="D1:1"),
        A,
        "conversation.session_2[0].dia_id",
    ),
    (
        "caption_wrong_type",
        set_at(0, "conversation", "session_1", 2, "blip_caption", value=["cat"]),
        A,
        "conversation.session_1[2].blip_caption",
    ),
    (
        "session_date_wrong_type",
        set_at(0, "conversation", "session_1_date_time", value=20230508),
        A,
        "conversation.session_1_date_time",
    ),
    ("qa_missing", delete_at(0, "qa"), A, "qa"),
    ("question_not_object", set_at(0, "qa", 2, value=[]), f"{A} qa[2]", "(question)"),
    ("question_missing", delete_at(0, "qa", 3, "question"), f"{A} qa[3]", "question"),
    ("category_missing", delete_at(0, "qa", 0, "category"), f"{A} qa[0]", "category"),
    ("category_unknown", set_at(0, "qa", 0, "category", value=7), f"{A} qa[0]", "category"),
    ("answer_missing", delete_at(0, "qa", 0, "answer"), f"{A} qa[0]", "answer"),
    ("answer_wrong_type", set_at(0, "qa", 0, "answer", value=["Miso"]), f"{A} qa[0]", "answer"),
    ("answer_boolean", set_at(0, "qa", 0, "answer", value=True), f"{A} qa[0]", "answer"),
    ("answer_empty", set_at(0, "qa", 0, "answer", value="  "), f"{A} qa[0]", "answer"),
    (
        "adversarial_answer_wrong_type",
        set_at(0, "qa", 8, "adversarial_answer", value={}),
        f"{A} qa[8]",
        "adversarial_answer",
    ),
    ("evidence_missing", delete_at(0, "qa", 0, "evidence"), f"{A} qa[0]", "evidence"),
    ("evidence_not_list", set_at(0, "qa", 0, "evidence", value="D1:1"), f"{A} qa[0]", "evidence"),
    (
        "evidence_item_not_string",
        set_at(0, "qa", 0, "evidence", value=[11]),
        f"{A} qa[0]",
        "evidence[0]",
    ),
    ("no_samples", lambda d: d.clear(), "top level", "(root)"),
]


@pytest.mark.parametrize(
    ("mutate", "record", "field"),
    [case[1:] for case in LOCOMO_CASES],
    ids=[case[0] for case in LOCOMO_CASES],
)
def test_locomo_bad_input(tmp_path, mutate, record, field):
    path, error = read_mutated(tmp_path, LOCOMO, mutate, "locomo")
    assert_names(error, path, record, field)


Q1 = "question 1 (question_id lme-q1)"

LONGMEMEVAL_CASES = [
    ("question_not_object", set_at(1, value=3), "question 2", "(question)"),
    ("question_id_missing", delete_at(0, "question_id"), "question 1", "question_id"),
    (
        "question_id_duplicate",
        set_at(1, "question_id", value="lme-q1"),
        "question 2",
        "question_id",
    ),
    ("question_type_missing", delete_at(0, "question_type"), Q1, "question_type"),
    ("question_missing", delete_at(0, "question"), Q1, "question"),
    ("answer_missing", delete_at(0, "answer"), Q1, "answer"),
    ("answer_wrong_type", set_at(0, "answer", value={"n": 3}), Q1, "answer"),
    ("question_date_wrong_type", set_at(0, "question_date", value=20230601), Q1, "question_date"),
    ("sessions_missing", delete_at(0, "haystack_sessions"), Q1, "haystack_sessions"),
    (
        "dates_length_mismatch",
        set_at(0, "haystack_dates", value=["2023/05/20 (Sat) 09:00"]),
        Q1,
        "haystack_dates",
    ),
    (
        "session_ids_length_mismatch",
        set_at(0, "haystack_session_ids", value=[]),
        Q1,
        "haystack_session_ids",
    ),
    (
        "haystack_empty",
        lambda d: d[0].update(haystack_sessions=[], haystack_dates=[], haystack_session_ids=[]),
        Q1,
        "haystack_sessions",
    ),
    (
        "all_sessions_empty",
        set_at(1, "haystack_sessions", 0, value=[]),
        "question 2",
        "haystack_sessions",
    ),
    (
        "session_not_list",
        set_at(0, "haystack_sessions", 1, value="chat"),
        Q1,
        "haystack_sessions[1]",
    ),
    (
        "session_id_not_string",
        set_at(0, "haystack_session_ids", 1, value=7),
        Q1,
        "haystack_session_ids[1]",
    ),
    (
        "session_date_wrong_type",
        set_at(0, "haystack_dates", 0, value=None),
        Q1,
        "haystack_dates[0]",
    ),
    (
        "turn_not_object",
        set_at(0, "haystack_sessions", 0, 1, value="hi"),
        Q1,
        "haystack_sessions[0][1]",
    ),
    (
        "turn_content_missing",
        delete_at(0, "haystack_sessions", 1, 0, "content"),
        Q1,
        "haystack_sessions[1][0].content",
    ),
    (
        "turn_role_wrong_type",
        set_at(0, "haystack_sessions", 0, 1, "role", value=1),
        Q1,
        "haystack_sessions[0][1].role",
    ),
    (
        "has_answer_not_boolean",
        set_at(0, "haystack_sessions", 0, 0, "has_answer", value="yes"),
        Q1,
        "haystack_sessions[0][0].has_answer",
    ),
    ("no_questions", lambda d: d.clear(), "top level", "(root)"),
]


@pytest.mark.parametrize(
    ("mutate", "record", "field"),
    [case[1:] for case in LONGMEMEVAL_CASES],
    ids=[case[0] for case in LONGMEMEVAL_CASES],
)
def test_longmemeval_bad_input(tmp_path, mutate, record, field):
    if record == Q1 and field == "haystack_dates[0]":
        # A null date is a *missing* date (counted, not an error); a number is the wrong type.
        mutate = set_at(0, "haystack_dates", 0, value=20230520)
    path, error = read_mutated(tmp_path, LONGMEMEVAL, mutate, "longmemeval")
    assert_names(error, path, record, field)


TURN = {"type": "turn", "memory_id": "m", "session_id": "s1", "speaker": "Ana", "text": "Hi."}
QUESTION = {
    "type": "question",
    "memory_id": "m",
    "question_id": "m/q0",
    "question": "Who said hi?",
    "answer": "Ana",
}


def without(record: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k != key}


def lines(*records: Any) -> str:
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n"


JSONL_CASES = [
    ("line_not_object", lines(TURN, [1, 2]), "line 2", "(line)"),
    ("type_missing", lines(without(TURN, "type")), "line 1", "type"),
    ("type_unknown", lines(TURN, {**TURN, "type": "utterance"}), "line 2", "type"),
    ("turn_memory_id_missing", lines(without(TURN, "memory_id")), "line 1", "memory_id"),
    ("turn_session_id_wrong_type", lines({**TURN, "session_id": 1}), "line 1", "session_id"),
    ("turn_speaker_missing", lines(TURN, without(TURN, "speaker")), "line 2", "speaker"),
    ("turn_text_wrong_type", lines({**TURN, "text": None}), "line 1", "text"),
    ("turn_id_wrong_type", lines({**TURN, "turn_id": 3}), "line 1", "turn_id"),
    ("image_caption_wrong_type", lines({**TURN, "image_caption": 1}), "line 1", "image_caption"),
    (
        "session_time_wrong_type",
        lines({**TURN, "session_time": 1700000000}),
        "line 1",
        "session_time",
    ),
    (
        "session_time_conflict",
        lines({**TURN, "session_time": "2024-01-01"}, {**TURN, "session_time": "2024-01-02"}),
        "line 2",
        "session_time",
    ),
    (
        "turn_id_duplicate",
        lines({**TURN, "turn_id": "t1"}, {**TURN, "turn_id": "t1"}),
        "line 2",
        "turn_id",
    ),
    (
        "generated_turn_id_clashes",
        lines({**TURN, "turn_id": "s1:2"}, TURN),  # the second turn of s1 would get "s1:2"
        "line 2",
        "turn_id",
    ),
    ("question_memory_unknown", lines(TURN, {**QUESTION, "memory_id": "x"}), "line 2", "memory_id"),
    ("question_id_duplicate", lines(TURN, QUESTION, QUESTION), "line 3", "question_id"),
    ("question_text_missing", lines(TURN, without(QUESTION, "question")), "line 2", "question"),
    ("answer_missing", lines(TURN, without(QUESTION, "answer")), "line 2", "answer"),
    ("category_wrong_type", lines(TURN, {**QUESTION, "category": 4}), "line 2", "category"),
    ("evidence_not_list", lines(TURN, {**QUESTION, "evidence": "s1:1"}), "line 2", "evidence"),
    (
        "abstention_not_boolean",
        lines(TURN, {**QUESTION, "abstention": "no"}),
        "line 2",
        "abstention",
    ),
    (
        "question_date_wrong_type",
        lines(TURN, {**QUESTION, "question_date": 5}),
        "line 2",
        "question_date",
    ),
    ("no_turns", lines(QUESTION), "(file)", "type"),
    ("broken_json", lines(TURN, '{"type": "turn", "memory_id": }'), "line 2", "(JSON syntax)"),
]


@pytest.mark.parametrize(
    ("content", "record", "field"),
    [case[1:] for case in JSONL_CASES],
    ids=[case[0] for case in JSONL_CASES],
)
def test_jsonl_bad_input(tmp_path, content, record, field):
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputDataError) as caught:
        read_source(path, "jsonl")
    assert_names(caught.value, path, record, field)


def test_jsonl_broken_line_names_the_column(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(lines(TURN, '{"type": "turn", "memory_id": }'), encoding="utf-8")
    with pytest.raises(InputDataError, match="column 31"):
        read_source(path, "jsonl")


def test_jsonl_line_not_utf8(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(lines(TURN).encode() + b'{"type": "turn", "text": "caf\xe9"}\n')
    with pytest.raises(InputDataError) as caught:
        read_source(path, "jsonl")
    assert_names(caught.value, path, "line 2", "(encoding)")


# ----------------------------------------------------------------------------- whole-file problems


@pytest.mark.parametrize("fmt", ["locomo", "longmemeval", "jsonl"])
def test_missing_file(tmp_path, fmt):
    path = tmp_path / "nowhere.json"
    with pytest.raises(InputDataError) as caught:
        read_source(path, fmt)
    assert_names(caught.value, path, "(file)", "source.path")
    assert "does not exist" in str(caught.value)


def test_directory_instead_of_file(tmp_path):
    with pytest.raises(InputDataError) as caught:
        read_source(tmp_path, "locomo")
    assert_names(caught.value, tmp_path, "(file)", "source.path")


@pytest.mark.parametrize("fmt", ["locomo", "longmemeval"])
def test_json_not_utf8(tmp_path, fmt):
    path = tmp_path / "latin1.json"
    path.write_bytes('[\n {"sample_id": "caf\u00e9"}]'.encode("latin-1"))
    with pytest.raises(InputDataError) as caught:
        read_source(path, fmt)
    assert_names(caught.value, path, "line 2", "(encoding)")
    assert "offset 21" in str(caught.value)  # the byte after "caf"


# Syntax errors inside the first element: the reader stops before validating anything.
# (Errors after complete elements are tested on the streaming reader itself.)
BROKEN_JSON = [
    ("missing_value", '[\n  {"sample_id": "a",\n   "qa": }\n]'),
    ("missing_comma", '[\n  {"sample_id": "a" "qa": []}\n]'),
    ("truncated", '[\n  {"sample_id": "a", "qa": ['),
    ("unterminated_string", '[{"sample_id": "a'),
]


@pytest.mark.parametrize("fmt", ["locomo", "longmemeval"])
@pytest.mark.parametrize("text", [case[1] for case in BROKEN_JSON], ids=[c[0] for c in BROKEN_JSON])
def test_broken_json_names_line_and_column(tmp_path, text, fmt):
    path = tmp_path / "broken.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(json.JSONDecodeError) as reference:
        json.loads(text)
    with pytest.raises(InputDataError) as caught:
        read_source(path, fmt)
    record = f"line {reference.value.lineno} column {reference.value.colno}"
    assert_names(caught.value, path, record, "(JSON syntax)")


@pytest.mark.parametrize(
    ("text", "found"),
    [('{"sample_id": "a"}', "a JSON object"), ('"samples"', "a string"), ("", "the file is empty")],
    ids=["object", "string", "empty_file"],
)
def test_wrong_top_level_type(tmp_path, text, found):
    path = tmp_path / "top.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputDataError) as caught:
        read_source(path, "locomo")
    assert_names(caught.value, path, "top level", "(root)")
    assert found in str(caught.value)


def test_unknown_format_names_parameter_and_allowed_values(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("a,b\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        read_source(path, "csv")
    message = str(caught.value)
    assert "source.format" in message
    assert "'csv'" in message
    for allowed in ("locomo", "longmemeval", "jsonl"):
        assert allowed in message
