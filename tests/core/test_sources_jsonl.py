"""Our JSONL format: turns and questions in any order, optional ids and dates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mera_pipelines.core.sources import read_source
from mera_pipelines.core.sources.jsonl import DEFAULT_CATEGORY

FIXTURE = Path(__file__).parents[1] / "fixtures" / "sources" / "turns_questions.jsonl"


@pytest.fixture(scope="module")
def result():
    return read_source(FIXTURE, "jsonl")


@pytest.fixture(scope="module")
def questions(result):
    return {question.question_id: question for question in result.questions}


def test_counts(result):
    report = result.report()
    assert report["source_format"] == "jsonl"
    assert (report["conversations"], report["sessions"], report["turns"], report["questions"]) == (
        2,
        3,
        5,
        4,
    )
    assert report["questions_by_category"] == {
        "single-hop": 1,
        "temporal": 1,
        DEFAULT_CATEGORY: 2,
    }


def test_sessions_in_time_order_with_generated_turn_ids(result):
    trip = [turn for turn in result.turns if turn.memory_id == "trip"]
    assert [(t.session_id, t.session_index, t.turn_id, t.turn_index) for t in trip] == [
        ("s1", 1, "s1:1", 0),
        ("s1", 1, "s1:2", 1),
        ("s2", 2, "s2-opening", 0),
        ("s2", 2, "s2:2", 1),
    ]
    assert result.repaired["session_order_sorted"] == 1
    assert result.repaired["turn_id_generated"] == 4


def test_session_time_shared_by_the_session_and_parsed_from_any_format(result):
    by_id = {(t.memory_id, t.turn_id): t for t in result.turns}
    assert by_id["trip", "s1:2"].session_time == "2024-03-02T13:56"  # LoCoMo format, from line 4
    assert by_id["trip", "s1:2"].session_time_raw == "1:56 pm on 2 March, 2024"
    assert by_id["trip", "s2:2"].session_time == "2024-03-10T18:00"
    assert by_id["notes", "only:1"].session_time is None
    assert result.repaired["session_date_missing"] == 1


def test_image_caption_and_speakers(result):
    by_id = {(t.memory_id, t.turn_id): t for t in result.turns}
    assert by_id["trip", "s1:2"].image_caption == "a photo of a river at sunset"
    assert result.conversations[0].speakers == ["Mia", "Leo"]


def test_unknown_fields_are_dropped_and_counted(result):
    assert result.dropped["unknown_field"] == 1
    assert any("line 9 field 'mood'" in note for note in result.notes)


def test_question_before_its_turns_and_evidence_resolution(result, questions):
    assert questions["trip/q0"].gold_turn_ids == ["s1:1"]
    assert questions["trip/q1"].gold_turn_ids == ["s1:1", "s2-opening"]
    assert result.dropped["evidence_ids_unresolved"] == 1
    assert questions["notes/q0"].gold_turn_ids == ["only:1"]


def test_question_dates_answers_and_abstention(result, questions):
    assert questions["trip/q1"].question_date == "2024-03-20T09:00"
    assert questions["trip/q1"].answer == "8"
    assert result.repaired["answer_int_to_str"] == 1
    abstention = questions["trip/q2"]
    assert abstention.is_abstention
    assert abstention.category == DEFAULT_CATEGORY
    assert abstention.question_date == "2024-03-10T18:00"  # last session of "trip"
    assert result.dropped["evidence_empty"] == 1
    assert not questions["trip/q0"].is_abstention


def test_time_zone_offsets_are_dropped_and_counted(tmp_path):
    path = tmp_path / "tz.jsonl"
    turn = {"type": "turn", "memory_id": "m", "speaker": "Ana", "text": "Hi."}
    rows = [
        {**turn, "session_id": "late", "session_time": "2024-01-02T09:00+05:00"},
        {**turn, "session_id": "early", "session_time": "2024-01-01T09:00"},
        {"type": "question", "memory_id": "m", "question_id": "q", "question": "?", "answer": "a",
         "question_date": "2024-01-03T10:00Z"},
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(row) for row in rows), encoding="utf-8")
    result = read_source(path, "jsonl")
    assert [t.session_id for t in result.turns] == ["early", "late"]
    assert result.turns[1].session_time == "2024-01-02T09:00"
    assert result.questions[0].question_date == "2024-01-03T10:00"
    assert result.repaired["time_zone_dropped"] == 2
