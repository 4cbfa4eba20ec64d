"""LoCoMo reader on a small hand-written file carrying every quirk of the public locomo10.json."""

from __future__ import annotations

from pathlib import Path

import pytest

from mera_pipelines.core.sources import read_source
from mera_pipelines.core.sources.locomo import ABSTENTION_ANSWER

FIXTURE = Path(__file__).parents[1] / "fixtures" / "sources" / "locomo_quirks.json"


@pytest.fixture(scope="module")
def result():
    return read_source(FIXTURE, "locomo")


@pytest.fixture(scope="module")
def questions(result):
    return {question.question_id: question for question in result.questions}


def test_counts_follow_existing_sessions_not_date_keys(result):
    report = result.report()
    assert report["source_format"] == "locomo"
    assert report["conversations"] == report["memories"] == 2
    assert report["sessions"] == 2 + 3  # demo-b: session_4 is empty and dropped
    assert report["turns"] == 6 + 4
    assert report["questions"] == 11
    assert report["questions_by_category"] == {"1": 2, "2": 2, "3": 1, "4": 4, "5": 2}


def test_date_key_without_session_is_counted_not_read(result):
    assert result.dropped["session_date_without_session"] == 1
    assert any("demo-a" in note and "session_3_date_time" in note for note in result.notes)
    assert {turn.session_id for turn in result.turns if turn.memory_id == "demo-a"} == {
        "session_1",
        "session_2",
    }


def test_sessions_sorted_numerically_and_indexed_in_order(result):
    demo_b = [turn for turn in result.turns if turn.memory_id == "demo-b"]
    assert [(turn.session_id, turn.session_index) for turn in demo_b] == [
        ("session_1", 1),
        ("session_1", 1),
        ("session_2", 2),
        ("session_10", 3),
    ]
    assert result.dropped["session_empty"] == 1


def test_session_times_parsed_to_iso_with_raw_kept(result):
    first = result.turns[0]
    assert first.session_time == "2023-05-08T13:56"
    assert first.session_time_raw == "1:56 pm on 8 May, 2023"


def test_missing_and_unparseable_session_dates_are_counted(result):
    by_session = {(t.memory_id, t.session_id): t for t in result.turns}
    assert by_session["demo-b", "session_2"].session_time is None
    assert by_session["demo-b", "session_2"].session_time_raw is None
    assert by_session["demo-b", "session_10"].session_time is None
    assert by_session["demo-b", "session_10"].session_time_raw == "sometime in spring"
    assert result.repaired["session_date_missing"] == 1
    assert result.repaired["session_date_unparsed"] == 1


def test_turn_fields_and_image_caption(result):
    image_turn = next(turn for turn in result.turns if turn.turn_id == "D1:3")
    assert image_turn.memory_id == "demo-a"
    assert image_turn.speaker == "Ana"
    assert image_turn.turn_index == 2
    assert image_turn.image_caption == "a photo of a grey cat on a sofa"
    assert next(t for t in result.turns if t.turn_id == "D1:1").image_caption is None


def test_conversation_speakers_and_sizes(result):
    demo_a = result.conversations[0]
    assert demo_a.memory_id == "demo-a"
    assert demo_a.speakers == ["Ana", "Ben"]
    assert (demo_a.n_sessions, demo_a.n_turns) == (2, 6)


def test_question_ids_categories_and_dates(questions):
    first = questions["demo-a/q0"]
    assert (first.answer, first.category, first.gold_turn_ids) == ("Miso", "4", ["D1:1"])
    # No question date in LoCoMo: the last session's date (session_3 has a date but no turns).
    assert first.question_date == "2023-05-20T10:15"
    assert questions["demo-b/q0"].category == "2"
    assert questions["demo-b/q0"].question_date == "2024-01-03T09:00"


def test_int_answer_becomes_string(result, questions):
    assert questions["demo-a/q1"].answer == "2022"
    assert result.repaired["answer_int_to_str"] == 1


def test_evidence_strings_split_on_semicolon_and_whitespace(result, questions):
    assert questions["demo-a/q2"].gold_turn_ids == ["D1:3", "D2:2"]
    assert questions["demo-a/q3"].gold_turn_ids == ["D1:2", "D2:1"]
    assert result.repaired["evidence_split"] == 2


def test_stray_colon_id_is_fixed_when_it_resolves(result, questions):
    assert questions["demo-a/q6"].gold_turn_ids == ["D2:3"]
    assert result.repaired["evidence_id_fixed"] == 1


def test_unresolved_and_empty_evidence_is_dropped_and_counted(result, questions):
    assert questions["demo-a/q5"].gold_turn_ids == ["D2:1"]  # "D" dropped
    assert questions["demo-a/q7"].gold_turn_ids == []  # "D9:9" names no turn
    assert questions["demo-a/q4"].gold_turn_ids == []
    assert result.dropped["evidence_ids_unresolved"] == 2
    assert result.dropped["evidence_none_resolved"] == 1  # q7: listed ids, none resolved
    assert result.dropped["evidence_empty"] == 1
    assert any("'D' names no turn" in note for note in result.notes)


def test_duplicate_evidence_ids_removed(result, questions):
    assert questions["demo-b/q0"].gold_turn_ids == ["D1:1"]
    assert result.repaired["evidence_duplicate_removed"] == 1


def test_category_5_scored_as_not_mentioned(result, questions):
    only_adversarial = questions["demo-a/q8"]
    assert only_adversarial.answer == ABSTENTION_ANSWER
    assert only_adversarial.adversarial_answer == "Miso"
    assert only_adversarial.is_abstention
    both = questions["demo-a/q9"]
    assert (both.answer, both.adversarial_answer) == (ABSTENTION_ANSWER, "Yes")
    assert result.repaired["category5_answer_replaced"] == 1
    assert not questions["demo-a/q0"].is_abstention


def test_report_has_the_contract_keys(result):
    report = result.report()
    assert set(report) == {
        "source_format", "conversations", "memories", "sessions", "turns", "questions",
        "questions_by_category", "dropped", "repaired", "notes",
    }  # fmt: skip
    assert any(note.startswith("category 5: 2 questions") for note in report["notes"])
