"""The bundled demo dataset: LoCoMo schema, consistent evidence, README counts that match the file."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from mera_pipelines.core.temporal import parse_timestamp

DEMO_DIR = Path(__file__).parents[1] / "data" / "01_raw" / "demo"
DATA_PATH = DEMO_DIR / "demo_locomo.json"
README_PATH = DEMO_DIR / "README.md"

SAMPLE_KEYS = {"sample_id", "conversation", "qa", "event_summary", "observation", "session_summary"}
SESSION_KEY = re.compile(r"^session_(\d+)$")
DIA_ID = re.compile(r"^D(\d+):(\d+)$")
TABLE_ROW = re.compile(r"^\|(.+)\|\s*$")
CATEGORIES = {1, 2, 3, 4, 5}


@pytest.fixture(scope="module")
def raw_text() -> str:
    # strict decoding: a stray non-UTF-8 byte must fail here, not later in ingest
    return DATA_PATH.read_bytes().decode("utf-8")


@pytest.fixture(scope="module")
def samples(raw_text: str) -> list[dict]:
    return json.loads(raw_text)


@pytest.fixture(scope="module")
def readme_rows() -> list[list[str]]:
    return [
        _cells(line)
        for line in README_PATH.read_text(encoding="utf-8").splitlines()
        if TABLE_ROW.match(line)
    ]


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def sessions_of(conversation: dict) -> list[tuple[int, list[dict]]]:
    """Sessions that exist (LoCoMo can have date keys without sessions), in session-number order."""
    found = [
        (int(m[1]), turns) for key, turns in conversation.items() if (m := SESSION_KEY.match(key))
    ]
    return sorted(found, key=lambda pair: pair[0])


def turns_by_id(sample: dict) -> dict[str, dict]:
    return {
        turn["dia_id"]: turn for _, turns in sessions_of(sample["conversation"]) for turn in turns
    }


def session_of_dia_id(dia_id: str) -> int:
    match = DIA_ID.match(dia_id)
    assert match, f"malformed dia_id {dia_id!r}"
    return int(match[1])


def observed_ids(reference: str | list[str]) -> list[str]:
    return [reference] if isinstance(reference, str) else list(reference)


def all_qa(samples: list[dict]) -> list[tuple[str, dict]]:
    return [(sample["sample_id"], qa) for sample in samples for qa in sample["qa"]]


def test_file_is_small_json_with_two_space_indent(raw_text: str, samples: list[dict]) -> None:
    assert len(raw_text.encode("utf-8")) < 150_000
    assert raw_text == json.dumps(samples, indent=2, ensure_ascii=False) + "\n"


def test_samples_have_locomo_top_level_shape(samples: list[dict]) -> None:
    assert isinstance(samples, list)
    assert len(samples) >= 2
    for sample in samples:
        assert set(sample) == SAMPLE_KEYS, sample.get("sample_id")
    ids = [sample["sample_id"] for sample in samples]
    assert len(set(ids)) == len(ids)


def test_every_session_has_a_parseable_date_and_sessions_are_in_time_order(
    samples: list[dict],
) -> None:
    for sample in samples:
        conversation = sample["conversation"]
        sessions = sessions_of(conversation)
        assert 4 <= len(sessions) <= 6, sample["sample_id"]
        moments = []
        for number, _ in sessions:
            moment = parse_timestamp(conversation.get(f"session_{number}_date_time"))
            assert moment is not None, f"{sample['sample_id']} session_{number}: no parseable date"
            moments.append(moment)
        assert moments == sorted(moments), sample["sample_id"]
        assert len(set(moments)) == len(moments), sample["sample_id"]


def test_turns_are_well_formed_and_dia_ids_unique(samples: list[dict]) -> None:
    for sample in samples:
        conversation = sample["conversation"]
        speakers = {conversation["speaker_a"], conversation["speaker_b"]}
        seen: set[str] = set()
        for number, turns in sessions_of(conversation):
            assert 10 <= len(turns) <= 18, f"{sample['sample_id']} session_{number}"
            for index, turn in enumerate(turns, start=1):
                assert turn["dia_id"] == f"D{number}:{index}"
                assert turn["dia_id"] not in seen
                seen.add(turn["dia_id"])
                assert turn["speaker"] in speakers
                assert turn["text"].strip()


def test_image_turns_carry_caption_url_and_query(samples: list[dict]) -> None:
    image_turns = [
        turn
        for sample in samples
        for turn in turns_by_id(sample).values()
        if {"img_url", "blip_caption", "query"} & set(turn)
    ]
    assert image_turns, "the demo must contain image turns"
    for turn in image_turns:
        assert turn.get("blip_caption", "").strip(), turn["dia_id"]
        assert turn.get("query", "").strip(), turn["dia_id"]
        assert turn["img_url"] and all(".invalid/" in url for url in turn["img_url"])


def test_every_evidence_id_resolves_to_a_turn_of_the_same_conversation(samples: list[dict]) -> None:
    for sample in samples:
        known = turns_by_id(sample)
        for qa in sample["qa"]:
            assert qa["evidence"], qa["question"]
            for dia_id in qa["evidence"]:
                assert DIA_ID.match(dia_id), (qa["question"], dia_id)
                assert dia_id in known, (sample["sample_id"], qa["question"], dia_id)


def test_qa_covers_all_categories_with_enough_questions(samples: list[dict]) -> None:
    questions = all_qa(samples)
    assert len(questions) >= 30
    assert {qa["category"] for _, qa in questions} == CATEGORIES
    texts = [qa["question"] for _, qa in questions]
    assert len(set(texts)) == len(texts)


def test_adversarial_items_carry_adversarial_answer_and_others_an_answer(
    samples: list[dict],
) -> None:
    for sample_id, qa in all_qa(samples):
        if qa["category"] == 5:
            assert str(qa.get("adversarial_answer", "")).strip(), (sample_id, qa["question"])
            assert "answer" not in qa, (sample_id, qa["question"])
        else:
            assert str(qa.get("answer", "")).strip(), (sample_id, qa["question"])


def test_summaries_events_and_observations_follow_the_sessions(samples: list[dict]) -> None:
    for sample in samples:
        numbers = [number for number, _ in sessions_of(sample["conversation"])]
        known = turns_by_id(sample)
        assert set(sample["event_summary"]) == {f"events_session_{n}" for n in numbers}
        assert set(sample["observation"]) == {f"session_{n}_observation" for n in numbers}
        assert set(sample["session_summary"]) == {f"session_{n}_summary" for n in numbers}
        for number in numbers:
            events = sample["event_summary"][f"events_session_{number}"]
            date_time = sample["conversation"][f"session_{number}_date_time"]
            assert date_time.endswith(events["date"])
            for speaker, facts in sample["observation"][f"session_{number}_observation"].items():
                for fact, reference in facts:
                    assert fact.strip()
                    for dia_id in observed_ids(reference):
                        assert dia_id in known, (sample["sample_id"], speaker, dia_id)
                        assert session_of_dia_id(dia_id) == number
            assert sample["session_summary"][f"session_{number}_summary"].strip()


def test_readme_counts_match_the_file(samples: list[dict], readme_rows: list[list[str]]) -> None:
    stated = {row[0]: int(row[1]) for row in readme_rows if len(row) == 2 and row[1].isdigit()}
    all_turns = [turn for sample in samples for turn in turns_by_id(sample).values()]
    categories = Counter(qa["category"] for _, qa in all_qa(samples))
    actual = {
        "conversations": len(samples),
        "sessions": sum(len(sessions_of(sample["conversation"])) for sample in samples),
        "turns": len(all_turns),
        "image turns": sum(1 for turn in all_turns if "blip_caption" in turn),
        "QA": sum(categories.values()),
    }
    for name in stated:
        if match := re.match(r"QA category (\d)", name):
            actual[name] = categories[int(match[1])]
    assert len(stated) == 10, f"README counts table not found or incomplete: {stated}"
    assert stated == actual


def test_readme_per_conversation_counts_match(
    samples: list[dict], readme_rows: list[list[str]]
) -> None:
    rows = {row[0]: row for row in readme_rows if len(row) == 6 and row[0].startswith("demo-")}
    assert set(rows) == {sample["sample_id"] for sample in samples}
    for sample in samples:
        _, speakers, sessions, turns, qa_count, _span = rows[sample["sample_id"]]
        conversation = sample["conversation"]
        assert speakers == f"{conversation['speaker_a']}, {conversation['speaker_b']}"
        assert int(sessions) == len(sessions_of(conversation))
        assert int(turns) == len(turns_by_id(sample))
        assert int(qa_count) == len(sample["qa"])


def test_readme_bridge_questions_are_cross_session_multi_hop(
    samples: list[dict], readme_rows: list[list[str]]
) -> None:
    bridges = [row for row in readme_rows if len(row) == 5 and row[0].startswith("demo-")]
    assert len(bridges) >= 6
    by_question = {(sample_id, qa["question"]): qa for sample_id, qa in all_qa(samples)}
    for sample_id, question, _answer, hop_one, hop_two in bridges:
        qa = by_question.get((sample_id, question))
        assert qa is not None, f"README lists a question not in the file: {question}"
        assert qa["category"] == 1
        first = set(re.findall(r"D\d+:\d+", hop_one))
        second = set(re.findall(r"D\d+:\d+", hop_two))
        assert first and second
        assert first | second <= set(qa["evidence"]), question
        # the second hop lives in another session than the turn that names the entity
        assert {session_of_dia_id(i) for i in first}.isdisjoint(
            session_of_dia_id(i) for i in second
        )
