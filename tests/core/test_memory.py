from __future__ import annotations

import pandas as pd
import pytest

from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.memory import (
    MemoryIndex,
    SearchSettings,
    TurnCandidate,
    merge_candidates,
)
from tests.support.embedding import HashingEmbedder

TURNS = {
    "D1:1": ["Maya adopted a dog named Pepper", "Pepper is a vizsla"],
    "D1:2": ["Jonas works as a nurse in Berlin"],
    "D1:3": ["Maya went hiking in the Alps last Saturday"],
    "D2:1": ["Jonas plays jazz piano on weekends"],
    "D2:2": ["Maya's sister Lena lives in Lisbon"],
}


def fact_rows(memory_id: str, turns: dict[str, list[str]]) -> pd.DataFrame:
    rows = []
    for turn_id, facts in turns.items():
        for n, text in enumerate(facts):
            rows.append(
                {
                    "fact_id": f"{memory_id}|{turn_id}|{n}",
                    "memory_id": memory_id,
                    "turn_id": turn_id,
                    "text": text,
                    "keywords": [w for w in text.split() if w[0].isupper()],
                    "topics": ["general"],
                    "speaker": "Maya",
                    "timestamp": "2023-05-08T13:56",
                    "turn_facts": facts,
                    "source_text": text,
                }
            )
    return pd.DataFrame(rows)


@pytest.fixture
def index(tmp_path) -> MemoryIndex:
    memory = MemoryIndex(str(tmp_path / "db"), "facts", HashingEmbedder())
    memory.upsert_facts(
        pd.concat([fact_rows("m1", TURNS), fact_rows("m2", {"X1:1": ["Maya dog"]})])
    )
    return memory


def test_search_returns_parent_turn_with_all_its_facts(index):
    [best, *_] = index.search(["what breed is Pepper"], "m1", SearchSettings(k=2))
    assert best.turn_id == "D1:1"
    assert best.facts == TURNS["D1:1"]
    assert best.matched_facts[0] == "Pepper is a vizsla"
    assert best.speaker == "Maya" and best.timestamp == "2023-05-08T13:56"


def test_search_never_leaves_the_memory(index):
    turns = {c.turn_id for c in index.search(["Maya dog"], "m1", SearchSettings(k=10))}
    assert "X1:1" not in turns
    assert [c.turn_id for c in index.search(["Maya dog"], "m2", SearchSettings(k=10))] == ["X1:1"]


def test_viewed_turns_are_excluded_before_ranking(index):
    settings = SearchSettings(k=1)
    first = index.search(["Pepper the dog"], "m1", settings)
    second = index.search(["Pepper the dog"], "m1", settings, exclude_turn_ids=["D1:1"])
    assert [c.turn_id for c in first] == ["D1:1"]
    assert len(second) == 1 and second[0].turn_id != "D1:1"


def test_queries_are_merged_and_deduplicated_by_turn(index):
    merged = index.search(
        ["Pepper dog", "Pepper vizsla", "Jonas nurse Berlin"], "m1", SearchSettings(k=1)
    )
    turn_ids = [c.turn_id for c in merged]
    assert len(turn_ids) == len(set(turn_ids))
    assert set(turn_ids) == {"D1:1", "D1:2"}
    assert next(c for c in merged if c.turn_id == "D1:1").query_indices == [0, 1]


def test_rebuilding_the_same_memory_adds_no_rows_and_embeds_nothing(index):
    rows = index.count()
    calls = index.embedder.calls
    stats = index.upsert_facts(fact_rows("m1", TURNS))
    assert stats.memories_unchanged == 1 and stats.facts_written == 0
    assert index.count() == rows and index.embedder.calls == calls


def test_changed_memory_replaces_its_rows_only(index):
    stats = index.upsert_facts(fact_rows("m1", {"D1:1": ["Maya adopted a cat"]}))
    assert stats.memories_written == 1
    assert index.count("m1") == 1 and index.count("m2") == 1
    assert index.describe()["versions"] <= 2  # old versions compacted away


def test_delete_turn_and_memory_make_them_unsearchable(index):
    assert index.delete_turn("m1", "D1:1") == 2
    assert "D1:1" not in {c.turn_id for c in index.search(["Pepper"], "m1", SearchSettings(k=10))}
    assert index.delete_memory("m2") == 1
    assert index.memory_ids() == ["m1"]


def test_memories_without_facts_are_named_before_any_search(index, tmp_path):
    index.require_memories(["m1", "m2"])
    with pytest.raises(ConfigError, match=r"has no facts for memories \['m3'\] \(2 memories"):
        index.require_memories(["m1", "m3"])
    empty = MemoryIndex(str(tmp_path / "nothing"), "facts", HashingEmbedder())
    with pytest.raises(ConfigError, match=r"\['m1'\] \(0 memories built\)"):
        empty.require_memories(["m1"])


def test_hybrid_search_finds_lexical_matches(index):
    hits = index.search(["vizsla"], "m1", SearchSettings(k=1, hybrid=True))
    assert hits[0].turn_id == "D1:1"


def test_mmr_prefers_diverse_turns(tmp_path):
    memory = MemoryIndex(str(tmp_path / "db"), "facts", HashingEmbedder())
    memory.upsert_facts(
        fact_rows("m", {"A": ["red apple pie"], "B": ["red apple pie recipe"], "C": ["apple farm"]})
    )
    plain = memory.search(["red apple pie"], "m", SearchSettings(k=2))
    diverse = memory.search(["red apple pie"], "m", SearchSettings(k=2, mmr_lambda=0.3))
    assert [c.turn_id for c in plain] == ["A", "B"]
    assert [c.turn_id for c in diverse] == ["A", "C"]


def test_reopening_with_another_embedder_is_refused(index):
    with pytest.raises(ConfigError, match="embedded with 'test-hashing'"):
        MemoryIndex(index.uri, "facts", HashingEmbedder(name="other"))


def test_bad_settings_are_refused():
    with pytest.raises(ConfigError, match="Unknown retrieval settings"):
        SearchSettings.from_params({"k": 8, "topk": 3})
    with pytest.raises(ConfigError):
        SearchSettings.from_params({"mmr_lambda": 1.5})


def test_merge_keeps_best_score():
    a = TurnCandidate("m", "T1", "s", None, ["f"], 0.2, ["f"], [0])
    b = TurnCandidate("m", "T1", "s", None, ["f"], 0.9, ["f"], [1])
    [merged] = merge_candidates([[a], [b]])
    assert merged.score == 0.9 and merged.query_indices == [0, 1]


def test_a_memory_that_is_the_whole_table_is_searched_without_the_memory_prefilter(tmp_path):
    # LanceDB path (no in-process copy): the memory_id clause would only build an allow-list
    # of every row; it is dropped when the memory is the table, kept once another one joins.
    memory = MemoryIndex(str(tmp_path / "db"), "facts", HashingEmbedder(), exact_cache_rows=0)
    memory.upsert_facts(fact_rows("m1", TURNS))
    assert memory._where("m1", []) is None
    assert memory._where("m1", ["D1:1"]) == "turn_id NOT IN ('D1:1')"
    alone = memory.search(["Maya dog"], "m1", SearchSettings(k=10), exclude_turn_ids=["D1:1"])

    memory.upsert_facts(fact_rows("m2", {"X1:1": ["Maya dog"]}))
    assert memory._where("m1", []) == "memory_id = 'm1'"
    shared = memory.search(["Maya dog"], "m1", SearchSettings(k=10), exclude_turn_ids=["D1:1"])
    assert [c.turn_id for c in shared] == [c.turn_id for c in alone]
    assert "D1:1" not in {c.turn_id for c in alone} and len(alone) == len(TURNS) - 1
