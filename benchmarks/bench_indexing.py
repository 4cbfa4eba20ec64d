"""Ingest + heuristic extraction (turns/s) and MiniLM embedding + LanceDB indexing (facts/s).

Data: a few synthetic LongMemEval-style haystacks (``synth_longmemeval.py``), so the turns and
the facts extracted from them have realistic lengths. Baselines measured in the same run:
- ingest vs a bare ``json.load`` of the same file (parse cost only);
- heuristic extraction vs a bare regex sentence split of every turn;
- batched embedding + indexing (model loaded once) vs embedding one fact at a time;
- a few batch sizes and torch thread counts, to pick the configured batch size;
- the resolved `embedding.dtype` (bfloat16 on CPUs with AMX / AVX512-BF16) vs float32: speed,
  cosine to the float32 vectors and agreement of the 8 nearest neighbours;
- query embedding: one intent alone vs three intents of a round in one batch.

    python benchmarks/bench_indexing.py --facts 3000
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from benchlib import latency_summary, machine, ratio, repeat, timed, write_result
from synth_longmemeval import generate

from mera_pipelines.core.embedding import PACKAGED_MINILM, load_embedder
from mera_pipelines.core.memory import MemoryIndex, search_text
from mera_pipelines.core.records import Fact, to_frame
from mera_pipelines.core.roles.extractor import extract_memory, make_extractor
from mera_pipelines.core.sources import read_source

TARGET_FACTS_PER_S = 300


def bench_ingest_and_extraction(questions: int) -> tuple[dict, list]:
    items = generate(questions, 50, pool_sessions=max(4 * questions, 100))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "haystacks.json"
        path.write_text(json.dumps(items))
        _, parse_seconds = timed(lambda: json.loads(path.read_text()))
        ingest, seconds = timed(read_source, path, "longmemeval")
    turns = ingest.turns
    out = {
        "ingest": {
            "turns": len(turns),
            "seconds": seconds,
            "turns_per_s": len(turns) / seconds,
            "baseline_json_load_turns_per_s": len(turns) / parse_seconds,
        }
    }
    out["ingest"]["ratio_vs_baseline"] = ratio(
        out["ingest"]["turns_per_s"], out["ingest"]["baseline_json_load_turns_per_s"]
    )
    extraction, seconds = timed(
        extract_memory, turns, make_extractor("heuristic"), concurrency=1, progress=False
    )
    _, split_seconds = timed(lambda: [re.split(r"(?<=[.!?])\s+", t.text) for t in turns])
    out["extraction"] = {
        "extractor": "heuristic",
        "turns": len(turns),
        "seconds": seconds,
        "turns_per_s": len(turns) / seconds,
        "facts_per_turn": len(extraction.facts) / len(turns),
        "baseline_regex_split_turns_per_s": len(turns) / split_seconds,
    }
    out["extraction"]["ratio_vs_baseline"] = ratio(
        out["extraction"]["turns_per_s"], out["extraction"]["baseline_regex_split_turns_per_s"]
    )
    return out, extraction.facts


def distinct_facts(facts: list[Fact], n: int) -> list[Fact]:
    """The first n facts with distinct embedded text (duplicates would be embedded once)."""
    seen, out = set(), []
    for fact in facts:
        key = search_text(fact.text, fact.keywords, fact.topics)
        if key not in seen:
            seen.add(key)
            out.append(fact)
        if len(out) == n:
            break
    return out


def bench_embedding(facts: list[Fact], one_at_a_time_sample: int) -> dict:
    embedder, load_seconds = timed(load_embedder, PACKAGED_MINILM)
    embedder.embed(["warm up"])
    frame = to_frame(facts, Fact)
    texts = [
        search_text(t, k, p)
        for t, k, p in zip(frame["text"], frame["keywords"], frame["topics"], strict=True)
    ]
    out: dict = {
        "embedder": PACKAGED_MINILM,
        "dtype": embedder.dtype,
        "load_seconds": load_seconds,
        "facts": len(facts),
    }
    with tempfile.TemporaryDirectory() as tmp:
        index = MemoryIndex(str(Path(tmp) / "db"), "facts", embedder)
        cpu_started = time.process_time()
        stats = index.upsert_facts(frame)
        cpu_seconds = time.process_time() - cpu_started
        # CPU seconds of this process (all threads). Less inflated by other jobs than wall
        # time, but torch's waiting threads spin, so under contention it still overstates.
        out["facts_per_cpu_second"] = stats.facts_written / cpu_seconds
        out["batched"] = {**stats.as_dict(), "batch_size": embedder.batch_size}
        # Baseline: the same pipeline, but one fact per embed call.
        sample = texts[:one_at_a_time_sample]
        _, seconds = timed(lambda: [embedder.embed([t]) for t in sample])
        one_embed_fps = len(sample) / seconds
        write_per_fact = stats.write_seconds / max(1, stats.facts_written)
        one_fps = 1 / (1 / one_embed_fps + write_per_fact)
        out["baseline_one_at_a_time_facts_per_s"] = one_fps
        out["index_facts_per_s"] = stats.facts_per_second
        out["ratio_vs_baseline"] = ratio(stats.facts_per_second, one_fps)
        out["target_facts_per_s"] = TARGET_FACTS_PER_S
    # Where the time goes: batch size and torch threads, embedding only.
    sweep = []
    threads_before = torch.get_num_threads()
    sample = texts[: min(len(texts), 1024)]
    for threads in sorted({1, threads_before}):
        torch.set_num_threads(threads)
        for batch_size in (32, 64, 128):
            embedder.batch_size = batch_size
            _, seconds = timed(embedder.embed, sample)
            sweep.append(
                {"threads": threads, "batch_size": batch_size, "texts_per_s": len(sample) / seconds}
            )
    torch.set_num_threads(threads_before)
    embedder.batch_size = out["batched"]["batch_size"]
    out["embedding_sweep"] = sweep
    out["dtype_comparison"] = compare_dtypes(embedder, sample)
    # Query embedding: what a round's intents cost before any search.
    one = repeat(lambda: embedder.embed([texts[0]]), 30)
    three = repeat(lambda: embedder.embed(texts[:3]), 30)
    out["query_embedding"] = {
        "one_query": latency_summary(one),
        "three_queries_batched": latency_summary(three),
    }
    return out


def compare_dtypes(embedder, sample: list[str]) -> dict:
    """The configured precision against float32 on the same texts, same batch size."""
    exact = load_embedder(PACKAGED_MINILM, dtype="float32")
    rows = {}
    for model in {embedder.dtype: embedder, "float32": exact}.values():
        vectors, seconds = timed(model.embed, sample)
        rows[model.dtype] = {"texts_per_s": len(sample) / seconds, "vectors": vectors}
    reference = rows["float32"]["vectors"]
    for row in rows.values():
        vectors = row.pop("vectors")
        row["min_cosine_to_float32"] = float((vectors * reference).sum(axis=1).min())
        row["neighbour_overlap_at_8"] = neighbour_overlap(vectors, reference, k=8)
        row["ratio_vs_float32"] = ratio(row["texts_per_s"], rows["float32"]["texts_per_s"])
    return rows


def neighbour_overlap(vectors: np.ndarray, reference: np.ndarray, k: int) -> float:
    """Mean share of each text's k nearest neighbours (itself excluded) found by both."""
    queries = min(len(vectors), 300)

    def top(v: np.ndarray) -> np.ndarray:
        return np.argsort(-(v[:queries] @ v.T), axis=1)[:, 1 : k + 1]

    pairs = zip(top(vectors), top(reference), strict=True)
    return float(np.mean([len(set(a) & set(b)) / k for a, b in pairs]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=4, help="synthetic haystacks to ingest")
    parser.add_argument("--facts", type=int, default=3000, help="distinct facts to embed")
    parser.add_argument("--one-at-a-time", type=int, default=200)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    result = {
        "benchmark": "indexing",
        "machine": machine(),
        "torch_threads": torch.get_num_threads(),
    }
    stages, facts = bench_ingest_and_extraction(args.questions)
    result.update(stages)
    result["indexing"] = bench_embedding(distinct_facts(facts, args.facts), args.one_at_a_time)
    print(
        f"[indexing] {result['indexing']['index_facts_per_s']:.0f} facts/s batched vs "
        f"{result['indexing']['baseline_one_at_a_time_facts_per_s']:.0f} one at a time; "
        f"extraction {result['extraction']['turns_per_s']:.0f} turns/s"
    )
    print("wrote", write_result("indexing", result, args.out))


if __name__ == "__main__":
    main()
