"""LongMemEval reader: per-question memories, time-ordered sessions, has_answer gold turns."""

from __future__ import annotations

from pathlib import Path

import pytest

from mera_pipelines.core.sources import read_source
from mera_pipelines.core.sources.longmemeval import turn_id_for

FIXTURE = Path(__file__).parents[1] / "fixtures" / "sources" / "longmemeval_quirks.json"


@pytest.fixture(scope="module")
def result():
    return read_source(FIXTURE, "longmemeval")


@pytest.fixture(scope="module")
def questions(result):
    return {question.question_id: question for question in result.questions}


def test_each_question_is_its_own_memory(result):
    report = result.report()
    assert (report["conversations"], report["memories"], report["questions"]) == (2, 2, 2)
    assert [c.memory_id for c in result.conversations] == ["lme-q1", "lme-q2_abs"]
    assert {q.memory_id for q in result.questions} == {"lme-q1", "lme-q2_abs"}
    assert report["questions_by_category"] == {"single-session-user": 1, "temporal-reasoning": 1}


def test_sessions_put_in_time_order_and_empty_ones_dropped(result):
    q1_turns = [turn for turn in result.turns if turn.memory_id == "lme-q1"]
    assert [(t.session_id, t.session_index, t.turn_id) for t in q1_turns] == [
        ("sess_recipes", 1, "S1:1"),
        ("sess_recipes", 1, "S1:2"),
        ("sess_balcony", 2, "S2:1"),
        ("sess_balcony", 2, "S2:2"),
    ]
    assert result.repaired["session_order_sorted"] == 1
    assert result.dropped["session_empty"] == 1
    assert result.conversations[0].n_sessions == 2
    assert result.report()["sessions"] == 3


def test_turn_fields(result):
    turn = next(t for t in result.turns if t.memory_id == "lme-q1" and t.turn_id == "S2:1")
    assert turn.speaker == "user"
    assert turn.text.startswith("I now have three plants")
    assert turn.session_time == "2023-05-20T09:00"
    assert turn.session_time_raw == "2023/05/20 (Sat) 09:00"
    assert turn.turn_index == 0
    assert result.conversations[0].speakers == ["user", "assistant"]


def test_has_answer_turns_are_the_gold_evidence(questions):
    assert questions["lme-q1"].gold_turn_ids == ["S2:1"]


def test_question_fields_and_int_answer(result, questions):
    question = questions["lme-q1"]
    assert question.answer == "3"
    assert result.repaired["answer_int_to_str"] == 1
    assert question.category == "single-session-user"
    assert question.question_date == "2023-06-01T10:00"
    assert not question.is_abstention


def test_abstention_suffix_and_missing_gold_and_missing_date(result, questions):
    question = questions["lme-q2_abs"]
    assert question.is_abstention
    assert question.gold_turn_ids == []
    assert result.dropped["evidence_empty"] == 1
    assert question.question_date == "2023-04-02T17:45"  # its last session
    assert result.repaired["question_date_from_last_session"] == 1


def test_turn_id_scheme():
    assert turn_id_for(session_index=3, turn_index=6) == "S3:7"
