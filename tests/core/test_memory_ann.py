"""The approximate (IVF) index of the memory: when it is built, that search uses it, and that
on an easy case it returns the same top turns as exact search."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest

from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.memory import AnnSettings, MemoryIndex, SearchSettings, search_text
from tests.support.embedding import HashingEmbedder

N_TURNS = 300  # IVF training needs a few hundred rows


def distinct_facts(n_turns: int) -> pd.DataFrame:
    """One fact per turn, each with its own rare word: every query has one clear best turn."""
    rows = []
    for n in range(n_turns):
        text = f"speaker mentions item{n} and detail{n * 7 % 101}"
        rows.append(
            {
                "fact_id": f"m|T{n}|0",
                "memory_id": "m",
                "turn_id": f"T{n}",
                "text": text,
                "keywords": [f"item{n}"],
                "topics": [f"topic{n % 9}"],
                "speaker": "user",
                "timestamp": None,
                "turn_facts": [text],
                "source_text": text,
            }
        )
    return pd.DataFrame(rows)


def stored_text(facts: pd.DataFrame, n: int) -> str:
    """The exact text a fact was embedded from: as a query, its own turn is the best match."""
    return search_text(facts["text"][n], facts["keywords"][n], facts["topics"][n])


def build(tmp_path, ann: AnnSettings, exact_cache_rows: int = 0) -> MemoryIndex:
    """A one-memory table of N_TURNS facts. No in-process copy by default, so searches take
    the ANN index whenever it exists (a memory that fits the copy would be searched there)."""
    memory = MemoryIndex(
        str(tmp_path / "db"),
        "facts",
        HashingEmbedder(dim=128),
        ann=ann,
        exact_cache_rows=exact_cache_rows,
    )
    memory.upsert_facts(distinct_facts(N_TURNS))
    return memory


def test_auto_builds_the_index_once_the_table_reaches_min_rows(tmp_path):
    memory = build(tmp_path, AnnSettings(index="auto", min_rows=N_TURNS))
    assert memory.has_ann_index
    assert memory.describe()["ann_index"] == "IVF_FLAT"
    reopened = MemoryIndex(memory.uri, "facts", memory.embedder)
    assert reopened.has_ann_index  # the index is part of the table, not of the handle


def test_below_the_threshold_no_index_is_built(tmp_path):
    memory = build(tmp_path, AnnSettings(index="auto", min_rows=N_TURNS + 1))
    assert not memory.has_ann_index


def test_none_never_builds_and_searches_exactly(tmp_path):
    memory = build(tmp_path, AnnSettings(index="none", min_rows=1))
    assert not memory.has_ann_index
    assert memory.search(["item17"], "m", SearchSettings(k=1))[0].turn_id == "T17"


def test_explicit_type_is_built(tmp_path):
    memory = build(tmp_path, AnnSettings(index="ivf_hnsw_sq", min_rows=N_TURNS))
    assert memory.describe()["ann_index"] == "IVF_HNSW_SQ"


def test_ann_search_returns_the_same_top_turns_as_exact_search(tmp_path):
    approximate = build(tmp_path, AnnSettings(index="auto", min_rows=N_TURNS, nprobes=8))
    assert approximate.search_path("m") == "ann"
    exact = MemoryIndex(approximate.uri, "facts", approximate.embedder, ann=AnnSettings("none"))
    facts = distinct_facts(N_TURNS)
    settings = SearchSettings(k=3)
    for n in range(0, N_TURNS, 23):
        query = stored_text(facts, n)
        ann_turns = [c.turn_id for c in approximate.search([query], "m", settings)]
        exact_turns = [c.turn_id for c in exact.search([query], "m", settings)]
        assert ann_turns[0] == exact_turns[0] == f"T{n}"


def test_ann_search_honours_exclusions(tmp_path):
    memory = build(tmp_path, AnnSettings(index="auto", min_rows=N_TURNS))
    assert memory.search_path("m") == "ann"
    query = stored_text(distinct_facts(N_TURNS), 42)
    assert memory.search([query], "m", SearchSettings(k=1))[0].turn_id == "T42"
    turns = memory.search([query], "m", SearchSettings(k=5), exclude_turn_ids=["T42"])
    assert turns and "T42" not in {c.turn_id for c in turns}


def test_build_on_demand_and_search_by_vectors(tmp_path):
    memory = build(tmp_path, AnnSettings(index="none"))
    memory.ann = AnnSettings(index="auto")
    assert memory.build_ann_index("IVF_FLAT") == "IVF_FLAT"
    vector = memory.embedder.embed([stored_text(distinct_facts(N_TURNS), 5)])
    [turns] = memory.search_vectors(vector, "m", SearchSettings(k=2))
    assert turns[0].turn_id == "T5"


def test_a_memory_that_fits_the_in_process_copy_is_searched_exactly_despite_the_index(tmp_path):
    ann = AnnSettings(index="auto", min_rows=N_TURNS)
    cached = build(tmp_path, ann, exact_cache_rows=N_TURNS)
    assert cached.has_ann_index and cached.search_path("m") == "in_process"
    query = stored_text(distinct_facts(N_TURNS), 42)
    assert cached.search([query], "m", SearchSettings(k=1))[0].turn_id == "T42"
    assert cached._exact_cache.get("m") is not None
    too_big = MemoryIndex(cached.uri, "facts", cached.embedder, ann, exact_cache_rows=N_TURNS - 1)
    assert too_big.search_path("m") == "ann"
    no_index = MemoryIndex(cached.uri, "facts", cached.embedder, AnnSettings("none"), 0)
    assert no_index.search_path("m") == "scan"


def test_settings_from_params():
    assert AnnSettings.from_params("none").index_type is None
    assert AnnSettings.from_params({"index": "auto"}).index_type == "IVF_FLAT"
    assert AnnSettings.from_params({"index": "ivf_hnsw_sq"}).index_type == "IVF_HNSW_SQ"
    with pytest.raises(ConfigError, match="ann_index"):
        AnnSettings.from_params({"index": "faiss"})
    with pytest.raises(ConfigError, match="Unknown"):
        AnnSettings.from_params({"nprobe": 3})


def test_shared_texts_are_embedded_once(tmp_path):
    embedder = HashingEmbedder()
    memory = MemoryIndex(str(tmp_path / "db"), "facts", embedder)
    one = distinct_facts(4)
    two = one.assign(memory_id="other", fact_id=one["fact_id"].str.replace("m|", "other|"))
    texts = []
    original = embedder.embed
    embedder.embed = lambda batch, **kw: texts.extend(batch) or original(batch, **kw)
    memory.upsert_facts(pd.concat([one, two], ignore_index=True))
    assert len(texts) == 4  # two memories, the same four facts
    a = memory.search(["item2"], "m", SearchSettings(k=1))[0]
    b = memory.search(["item2"], "other", SearchSettings(k=1))[0]
    assert a.turn_id == b.turn_id == "T2" and np.isclose(a.score, b.score)


def test_a_memory_below_min_rows_is_searched_exactly_beside_a_big_one(tmp_path):
    memory = build(tmp_path, AnnSettings(index="auto", min_rows=N_TURNS))
    small = distinct_facts(3).assign(memory_id="small")
    small["fact_id"] = small["fact_id"].str.replace("m|", "small|")
    memory.upsert_facts(pd.concat([distinct_facts(N_TURNS), small], ignore_index=True))
    assert memory.has_ann_index
    assert memory._use_ann("m") and not memory._use_ann("small")
    query = stored_text(small, 1)
    assert [c.turn_id for c in memory.search([query], "small", SearchSettings(k=3))][0] == "T1"
    assert "memory_id" in {c for idx in memory._table.list_indices() for c in idx.columns}


def random_memory_rows(n_turns: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    words = [f"w{n}" for n in range(60)]
    rows = []
    for turn in range(n_turns):
        facts = [" ".join(rng.choice(words, 5)) for _ in range(int(rng.integers(1, 4)))]
        for n, text in enumerate(facts):
            rows.append(
                {
                    "fact_id": f"m|T{turn}|{n}",
                    "memory_id": "m",
                    "turn_id": f"T{turn}",
                    "text": text,
                    "keywords": [],
                    "topics": [],
                    "speaker": "user",
                    "timestamp": None,
                    "turn_facts": facts,
                    "source_text": text,
                }
            )
    return pd.DataFrame(rows)


class SeededEmbedder:
    """A random unit vector per text (seeded by the text): no exact ties between scores, so
    two exact searches must agree on the order, not only on the set."""

    name = "test-seeded"
    dim = 32

    def embed(self, texts: list[str], *, progress: bool = False) -> np.ndarray:
        out = np.stack(
            [
                np.random.default_rng(int(hashlib.md5(t.encode()).hexdigest()[:8], 16)).normal(
                    size=self.dim
                )
                for t in texts
            ]
        ).astype(np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def test_the_in_process_exact_search_ranks_like_the_lancedb_scan(tmp_path):
    facts = random_memory_rows(120)
    cached = MemoryIndex(str(tmp_path / "db"), "facts", SeededEmbedder())
    cached.upsert_facts(facts)
    scan = MemoryIndex(cached.uri, "facts", cached.embedder, exact_cache_rows=0)
    queries = ["w1 w2 w3", "w7 w40", "w59 w3 w3 w11"]
    for settings in (SearchSettings(k=6), SearchSettings(k=4, mmr_lambda=0.7)):
        for excluded in ([], ["T1", "T5", "T17"]):
            fast = cached.search_per_query(queries, "m", settings, excluded)
            slow = scan.search_per_query(queries, "m", settings, excluded)
            for a, b in zip(fast, slow, strict=True):
                assert [c.turn_id for c in a] == [c.turn_id for c in b]
                assert np.allclose([c.score for c in a], [c.score for c in b], atol=1e-5)
                assert [c.matched_facts for c in a] == [c.matched_facts for c in b]
    assert cached._exact_cache.get("m") is not None


def test_a_write_refreshes_the_in_process_copy(tmp_path):
    memory = MemoryIndex(str(tmp_path / "db"), "facts", HashingEmbedder(dim=32))
    memory.upsert_facts(random_memory_rows(10))
    memory.search(["w1"], "m")
    memory.upsert_facts(random_memory_rows(10, seed=3).assign(turn_id="NEW"))
    assert {c.turn_id for c in memory.search(["w1"], "m", SearchSettings(k=3))} == {"NEW"}


def test_many_small_memories_do_not_trigger_a_build(tmp_path):
    frames = []
    for n in range(3):  # 3 x 120 rows: the table reaches min_rows, no memory does
        part = distinct_facts(120).assign(memory_id=f"m{n}")
        part["fact_id"] = part["fact_id"].str.replace("m|", f"m{n}|")
        frames.append(part)
    memory = MemoryIndex(
        str(tmp_path / "db"), "facts", HashingEmbedder(dim=128), ann=AnnSettings(min_rows=300)
    )
    memory.upsert_facts(pd.concat(frames, ignore_index=True))
    assert memory.count() == 360 and not memory.has_ann_index
