"""Retrieval latency at 10k / 100k / 1M facts: in-process exact vs LanceDB ANN vs LanceDB exact.

Facts are synthetic but shaped like a real memory: 384-d unit vectors (MiniLM's size) drawn
around a few hundred topic directions, with a shared component (sentence embeddings are
anisotropic), grouped into parent turns of 1-4 facts, all in one memory (a long personal
history: the worst case for a per-memory prefilter). Queries are noisy copies of random facts
(an intent that paraphrases a stored fact; cosine ~0.75 to it). No text is embedded: the query
embedding cost (MiniLM, a few ms) is measured by ``bench_indexing.py``.

Per size it reports
- per intent: one query vector -> parent turns (k = 8 turns, 32 facts), p50/p95;
- per round (batched queries, as the loop sends them): round 1 = 3 intents, 24 turns, nothing
  excluded; round 2 = 3 intents, 8 turns, the 24 viewed turns excluded;
- the same through an exact LanceDB scan (``bypass_vector_index``) and a numpy brute force
  (one matrix product + argpartition, no aggregation) over the same vectors;
- ANN recall@8 against the exact scan, on facts and on parent turns;
- the project's default path at that size (``MemoryIndex.search_path``): a memory that fits the
  in-process copy (250k rows) is searched exactly there, a bigger one through the ANN index.

    python benchmarks/bench_retrieval.py --sizes 10k,100k
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace

import numpy as np
import pandas as pd
from benchlib import SIZES, latency_summary, machine, peak_rss_mb, ratio, timed, write_result

from mera_pipelines.core.memory import AnnSettings, MemoryIndex, SearchSettings, search_text

DIM = 384
MEMORY_ID = "m"


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def synthetic_vectors(n_facts: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(fact vectors, parent turn number of each fact)."""
    rng = np.random.default_rng(seed)
    shared = unit(rng.normal(size=DIM))
    topics = unit(rng.normal(size=(512, DIM)))
    facts_per_turn = rng.integers(1, 5, size=n_facts)  # mean 2.5, like heuristic extraction
    turn_of_fact = np.repeat(np.arange(n_facts), facts_per_turn)[:n_facts]
    n_turns = int(turn_of_fact[-1]) + 1
    turn_vectors = unit(
        topics[rng.integers(0, len(topics), n_turns)] + 0.9 * unit(rng.normal(size=(n_turns, DIM)))
    )
    vectors = np.empty((n_facts, DIM), dtype=np.float32)
    for start in range(0, n_facts, 100_000):  # chunks keep the temporary noise small
        stop = min(start + 100_000, n_facts)
        noise = unit(rng.normal(size=(stop - start, DIM)))
        vectors[start:stop] = unit(
            0.35 * shared + turn_vectors[turn_of_fact[start:stop]] + 0.7 * noise
        )
    return vectors, turn_of_fact


def queries_near_facts(vectors: np.ndarray, n: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    picked = vectors[rng.integers(0, len(vectors), n)]
    return unit(picked + 0.9 * unit(rng.normal(size=picked.shape)))


class LookupEmbedder:
    """Returns the synthetic vector of each stored text: the index is written through the
    ordinary upsert path without running a model."""

    name = "synthetic-384"
    dim = DIM

    def __init__(self, texts: list[str], vectors: np.ndarray) -> None:
        self._row = {text: row for row, text in enumerate(texts)}
        self._vectors = vectors

    def embed(self, texts: list[str], *, progress: bool = False) -> np.ndarray:
        return self._vectors[[self._row[t] for t in texts]]


def fact_frame(turn_of_fact: np.ndarray) -> pd.DataFrame:
    n = len(turn_of_fact)
    texts = [f"fact {i} of turn {t}" for i, t in enumerate(turn_of_fact)]
    turn_ids = [f"T{t}" for t in turn_of_fact]
    by_turn: dict[str, list[str]] = {}
    for text, turn in zip(texts, turn_ids, strict=True):
        by_turn.setdefault(turn, []).append(text)
    return pd.DataFrame(
        {
            "fact_id": [f"{MEMORY_ID}|{i}" for i in range(n)],
            "memory_id": MEMORY_ID,
            "turn_id": turn_ids,
            "text": texts,
            "keywords": [[] for _ in range(n)],
            "topics": [[] for _ in range(n)],
            "speaker": "user",
            "timestamp": "2024-01-01T10:00",
            "turn_facts": [by_turn[t] for t in turn_ids],
            "source_text": texts,
        }
    )


def top_fact_ids(index: MemoryIndex, vector: np.ndarray, k: int) -> list[str]:
    """The k best facts as the handle's dense search finds them (ANN, LanceDB scan or the
    in-process copy, whichever its settings pick for this memory)."""
    path = index.search_path(MEMORY_ID)
    if path == "in_process":
        hits = index._cached_dense_hits(vector[None, :], MEMORY_ID, [], k)
    else:
        where = index._where(MEMORY_ID, [])
        hits = index._dense_hits(vector[None, :], where, k, approximate=path == "ann")
    return [row["fact_id"] for row in hits.get(0, [])]


def measure_latencies(index: MemoryIndex, queries: np.ndarray) -> dict:
    per_intent, round1, round2 = [], [], []
    intent = SearchSettings(k=8)
    cpu_started = time.process_time()
    for q in queries:
        _, seconds = timed(index.search_vectors, q[None, :], MEMORY_ID, intent)
        per_intent.append(seconds)
    # CPU seconds of all this process's threads (LanceDB's too): unlike wall time, not
    # inflated by other jobs on a shared machine.
    cpu_ms = 1000 * (time.process_time() - cpu_started) / len(queries)
    for start in range(0, len(queries) - 2, 3):
        batch = queries[start : start + 3]
        first, seconds = timed(index.search_vectors, batch, MEMORY_ID, replace(intent, k=24))
        round1.append(seconds)
        viewed = list(dict.fromkeys(c.turn_id for turns in first for c in turns))[:24]
        _, seconds = timed(index.search_vectors, batch, MEMORY_ID, intent, viewed)
        round2.append(seconds)
    return {
        "per_intent": {**latency_summary(per_intent), "cpu_ms_mean": cpu_ms},
        "round1_3_intents_24_turns": latency_summary(round1),
        "round2_3_intents_8_turns_24_excluded": latency_summary(round2),
    }


def numpy_baseline(vectors: np.ndarray, queries: np.ndarray, k_facts: int = 32) -> dict:
    seconds = []
    for q in queries:
        started = time.perf_counter()
        scores = vectors @ q
        top = np.argpartition(-scores, k_facts)[:k_facts]
        top[np.argsort(-scores[top])]
        seconds.append(time.perf_counter() - started)
    return {"per_intent": latency_summary(seconds)}


def exact_truth(truth: MemoryIndex, queries: np.ndarray) -> list[tuple[set, set]]:
    """Per query: the exact top-8 fact ids and top-8 parent turns (computed once, reused for
    every ANN setting; the in-process exact path ranks exactly like LanceDB's scan)."""
    out = []
    settings = SearchSettings(k=8)
    for q in queries:
        facts = set(top_fact_ids(truth, q, 8))
        [turns] = truth.search_vectors(q[None, :], MEMORY_ID, settings)
        out.append((facts, {c.turn_id for c in turns}))
    return out


def recall_at_8(truth: list[tuple[set, set]], ann: MemoryIndex, queries: np.ndarray) -> dict:
    fact_recalls, turn_recalls = [], []
    settings = SearchSettings(k=8)
    for q, (facts, turns) in zip(queries, truth, strict=True):
        fact_recalls.append(len(facts & set(top_fact_ids(ann, q, 8))) / 8)
        [ann_turns] = ann.search_vectors(q[None, :], MEMORY_ID, settings)
        turn_recalls.append(len(turns & {c.turn_id for c in ann_turns}) / max(1, len(turns)))
    return {"facts": float(np.mean(fact_recalls)), "turns": float(np.mean(turn_recalls))}


def path_of(index: MemoryIndex) -> str:
    path = index.search_path(MEMORY_ID)
    if path == "ann":
        return f"ann:{index.describe()['ann_index']}"
    return {"in_process": "exact:in_process", "scan": "exact:lancedb_scan"}[path]


def measure_path(index: MemoryIndex, queries: np.ndarray, truth: list) -> dict:
    index.search_vectors(queries[:1], MEMORY_ID)  # warm: reads the in-process copy if any
    return {
        "path": path_of(index),
        **measure_latencies(index, queries),
        "recall_at_8": recall_at_8(truth, index, queries),
    }


def bench_size(
    label: str,
    n_facts: int,
    n_queries: int,
    ann_configs: list[dict],
    num_partitions: int | None = None,
    index_types: list[str] | None = None,
) -> dict:
    vectors, turn_of_fact = synthetic_vectors(n_facts)
    frame = fact_frame(turn_of_fact)
    texts = [search_text(t, [], []) for t in frame["text"]]
    embedder = LookupEmbedder(texts, vectors)
    queries = queries_near_facts(vectors, n_queries)
    out: dict = {"facts": n_facts, "turns": int(turn_of_fact[-1]) + 1, "queries": n_queries}
    with tempfile.TemporaryDirectory() as tmp:
        exact = MemoryIndex(tmp, "facts", embedder, ann=AnnSettings("none"), exact_cache_rows=0)
        stats, seconds = timed(exact.upsert_facts, frame)
        out["write_and_index_seconds"] = seconds
        out["write_facts_per_s"] = n_facts / seconds
        del frame
        exact.search_vectors(queries[:1], MEMORY_ID)  # warm caches
        # LanceDB's exact scan costs seconds per query at 1M facts: fewer queries there.
        out["lancedb_exact"] = measure_latencies(
            exact, queries[: 30 if n_facts > 250_000 else None]
        )
        out["numpy_bruteforce"] = numpy_baseline(vectors, queries)
        if n_facts <= 250_000:
            in_process = MemoryIndex(tmp, "facts", embedder, ann=AnnSettings("none"))
            _, seconds = timed(in_process.search_vectors, queries[:1], MEMORY_ID)
            out["in_process_exact"] = {
                "load_seconds": seconds,
                **measure_latencies(in_process, queries),
            }

        ground = MemoryIndex(
            tmp, "facts", embedder, ann=AnnSettings("none"), exact_cache_rows=n_facts
        )
        truth = exact_truth(ground, queries)
        del ground
        out["ann_index"], out["ann"] = {}, []
        for index_type in index_types or [AnnSettings().auto_type]:
            build = AnnSettings(index=index_type, num_partitions=num_partitions)
            builder = MemoryIndex(tmp, "facts", embedder, ann=build)
            kind, seconds = timed(builder.build_ann_index)
            out["ann_index"][kind] = {"build_seconds": seconds}
            for config in ann_configs:
                # No in-process copy: the ANN index itself, whatever the memory's size.
                settings = AnnSettings(index=kind, min_rows=1, **config)
                ann = MemoryIndex(tmp, "facts", embedder, ann=settings, exact_cache_rows=0)
                out["ann"].append(
                    {"index_type": kind, **config, **measure_path(ann, queries, truth)}
                )
        # The last index built stays: with several types, put the default's type last.
        # The index with the project's search knobs (memory.ann_index), then what the
        # project's defaults do at this size: a memory that fits the in-process copy is
        # searched exactly there even though the index exists.
        default = MemoryIndex(tmp, "facts", embedder, ann=AnnSettings())
        out["default_settings"] = {
            "ann": vars(default.ann),
            **measure_path(default, queries, truth),
        }
        if default.search_path(MEMORY_ID) == "ann":  # already the index with those knobs
            out["ann_default_knobs"] = out["default_settings"]
        else:
            ann_default = MemoryIndex(
                tmp, "facts", embedder, ann=replace(AnnSettings(), min_rows=1), exact_cache_rows=0
            )
            out["ann_default_knobs"] = measure_path(ann_default, queries, truth)
    chosen = out["default_settings"]
    ann_row = out["ann_default_knobs"]
    p50 = chosen["per_intent"]["p50_ms"]
    numpy_p50 = out["numpy_bruteforce"]["per_intent"]["p50_ms"]
    lance_p50 = out["lancedb_exact"]["per_intent"]["p50_ms"]
    out["summary"] = {
        "path": chosen["path"],
        "retrieval_p50_ms": p50,
        "retrieval_p95_ms": chosen["per_intent"]["p95_ms"],
        "retrieval_cpu_ms_mean": chosen["per_intent"]["cpu_ms_mean"],
        "round_p50_ms": chosen["round2_3_intents_8_turns_24_excluded"]["p50_ms"],
        "recall_at_8": chosen["recall_at_8"]["facts"],
        "turn_recall_at_8": chosen["recall_at_8"]["turns"],
        # The ANN index on its own with the default knobs (the path above when the memory
        # is too big for the in-process copy).
        "ann_path": ann_row["path"],
        "ann_p50_ms": ann_row["per_intent"]["p50_ms"],
        "ann_recall_at_8": ann_row["recall_at_8"]["facts"],
        "ann_turn_recall_at_8": ann_row["recall_at_8"]["turns"],
        "baseline_numpy_p50_ms": numpy_p50,
        "baseline_numpy_p95_ms": out["numpy_bruteforce"]["per_intent"]["p95_ms"],
        "lancedb_exact_p50_ms": lance_p50,
        "lancedb_exact_p95_ms": out["lancedb_exact"]["per_intent"]["p95_ms"],
        "ratio_p50_vs_numpy": ratio(p50, numpy_p50),
        "ratio_p50_vs_lancedb_exact": ratio(p50, lance_p50),
        "fastest_ann_with_recall_0_95": choose_config(out["ann"]),
    }
    brief = {k: v for k, v in out["summary"].items() if k != "fastest_ann_with_recall_0_95"}
    print(f"[retrieval {label}] {brief}", flush=True)
    return out


def choose_config(configs: list[dict], min_recall: float = 0.95) -> dict | None:
    """The fastest ANN setting whose fact recall@8 reaches ``min_recall``."""
    good = [c for c in configs if c["recall_at_8"]["facts"] >= min_recall]
    if not good:
        return None
    best = min(good, key=lambda c: c["per_intent"]["p50_ms"])
    return {
        "index_type": best["index_type"],
        "nprobes": best["nprobes"],
        "refine_factor": best["refine_factor"],
        "p50_ms": best["per_intent"]["p50_ms"],
        "recall_at_8": best["recall_at_8"]["facts"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10k", help="comma list of 10k,100k,1m")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--num-partitions", type=int, default=None, help="IVF (default √rows)")
    parser.add_argument(
        "--probes", default="8:1,16:1,32:1,32:0", help="ANN settings to try, nprobes:refine_factor"
    )
    parser.add_argument(
        "--index-types",
        default=None,
        help="comma list of ANN index types to build in turn (default: memory.ann_index's auto "
        "type); the last one stays for the default-settings row",
    )
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    index_types = args.index_types.split(",") if args.index_types else None
    configs = [
        {"nprobes": int(n), "refine_factor": int(r)}
        for n, r in (pair.split(":") for pair in args.probes.split(","))
    ]
    result = {
        "benchmark": "retrieval",
        "machine": machine(),
        "dim": DIM,
        "note": "Latency = vector search with the memory_id prefilter (+ exclusions), parent-turn "
        "aggregation; query embedding excluded (see indexing.query_embedding). numpy baseline = "
        "matrix product + top-32 only. Recall@8 of the ANN against the exact LanceDB scan.",
        "sizes": {},
    }
    for label in args.sizes.split(","):
        result["sizes"][label] = bench_size(
            label, SIZES[label], args.queries, configs, args.num_partitions, index_types
        )
        result["peak_rss_mb_after_" + label] = peak_rss_mb()
    print("wrote", write_result("retrieval", result, args.out))


if __name__ == "__main__":
    main()
