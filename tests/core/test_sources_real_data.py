"""The readers against the real benchmark files, read in place (never copied into the project).

Skipped when the shared data directory is absent. Set MERA_SHARED_DIR to point elsewhere;
the default is ../shared relative to the repository root.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mera_pipelines.core.sources import read_source

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("MERA_SHARED_DIR", REPO_ROOT.parent / "shared"))
LOCOMO_DEV5 = SHARED / "benchmarks" / "locomo" / "locomo_dev5.json"
LONGMEMEVAL_2Q = (
    SHARED
    / "benchmarks"
    / "longmemeval"
    / "samples_original_schema"
    / "longmemeval_oracle_2q_sample.json"
)


def _needs(path: Path) -> Path:
    if not path.is_file():
        pytest.skip(f"{path} not present (set MERA_SHARED_DIR)")
    return path


def test_locomo_dev5_counts_match_the_published_table():
    report = read_source(_needs(LOCOMO_DEV5), "locomo").report()
    assert report["conversations"] == 5
    assert report["sessions"] == 128
    assert report["turns"] == 2760
    assert report["questions"] == 999
    assert report["questions_by_category"] == {"1": 142, "2": 156, "3": 46, "4": 418, "5": 237}
    # The known quirks of conv-26..conv-43, each found and counted.
    assert report["dropped"]["session_date_without_session"] == 16  # conv-26 sessions 20-35
    assert report["dropped"]["evidence_empty"] == 2
    assert report["dropped"]["evidence_ids_unresolved"] == 2  # "D" and "D10:19" (conv-42)
    assert report["repaired"]["evidence_split"] == 1  # "D8:6; D9:17"
    assert report["repaired"]["evidence_id_fixed"] == 1  # "D:11:26"
    assert report["repaired"]["answer_int_to_str"] == 6
    assert report["repaired"]["category5_answer_replaced"] == 2


def test_longmemeval_oracle_sample_gold_turns_from_has_answer():
    result = read_source(_needs(LONGMEMEVAL_2Q), "longmemeval")
    report = result.report()
    assert (report["questions"], report["memories"]) == (2, 2)
    questions = {question.question_id: question for question in result.questions}
    assert questions["6a1eabeb"].gold_turn_ids == ["S1:5", "S2:1"]
    assert questions["6a1eabeb"].question_date == "2023-06-01T00:58"
    assert questions["gpt4_70e84552_abs"].gold_turn_ids == ["S1:1"]
    assert questions["gpt4_70e84552_abs"].is_abstention
    assert not questions["6a1eabeb"].is_abstention
    # The gold turns are exactly the turns the file marks has_answer: true.
    raw = json.loads(LONGMEMEVAL_2Q.read_text(encoding="utf-8"))
    text_of = {(t.memory_id, t.turn_id): t.text for t in result.turns}
    for item in raw:
        marked = sorted(
            turn["content"]
            for session in item["haystack_sessions"]
            for turn in session
            if turn.get("has_answer")
        )
        qid = item["question_id"]
        assert sorted(text_of[qid, tid] for tid in questions[qid].gold_turn_ids) == marked
    assert report["turns"] == 48
