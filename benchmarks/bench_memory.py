"""Memory benchmark: ingest, heuristic extraction, embedding + indexing, dense search.

Each speed figure is compared with a simple baseline measured in the same run:
- embedding + indexing (batched, model loaded once) vs embedding one fact at a time;
- LanceDB search per query vs a numpy brute-force scan over the same vectors.
It also reports gold-turn recall of one query per question (the question itself), the
one-shot baseline MERA has to beat, for dense and hybrid retrieval.

    python benchmarks/bench_memory.py --source <locomo file> --format locomo \
        --out benchmarks/results/memory_locomo_dev5.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from mera_pipelines.core.embedding import PACKAGED_MINILM, load_embedder  # noqa: E402
from mera_pipelines.core.memory import MemoryIndex, SearchSettings  # noqa: E402
from mera_pipelines.core.records import Fact, to_frame  # noqa: E402
from mera_pipelines.core.roles.extractor import extract_memory, make_extractor  # noqa: E402
from mera_pipelines.core.sources import read_source  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def timed(fn, *args, **kwargs):
    started = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - started


def bench_search(index: MemoryIndex, questions, settings: SearchSettings):
    """End-to-end per query (embed + search + aggregate), and the query-embedding share."""
    latencies_ms, embed_ms = [], []
    for question in questions:
        _, seconds = timed(index.search, [question.question], question.memory_id, settings)
        latencies_ms.append(seconds * 1000)
        _, seconds = timed(index.embedder.embed, [question.question])
        embed_ms.append(seconds * 1000)
    return {
        "queries": len(latencies_ms),
        "p50_ms": percentile(latencies_ms, 50),
        "p95_ms": percentile(latencies_ms, 95),
        "query_embedding_p50_ms": percentile(embed_ms, 50),
    }


def bench_numpy_bruteforce(index: MemoryIndex, questions, k_facts: int):
    """Baseline: the same vectors in one numpy matrix per memory, exact top-k by dot product."""
    table = index._table.search().select(["memory_id", "vector"]).limit(index.count()).to_arrow()
    memory_ids = np.asarray(table["memory_id"].to_pylist())
    vectors = np.asarray(table["vector"].to_pylist(), dtype=np.float32)
    per_memory = {m: vectors[memory_ids == m] for m in set(memory_ids.tolist())}
    latencies_ms = []
    for question in questions:
        started = time.perf_counter()
        query = index.embedder.embed([question.question])[0]
        scores = per_memory[question.memory_id] @ query
        np.argpartition(-scores, min(k_facts, len(scores) - 1))[:k_facts]
        latencies_ms.append((time.perf_counter() - started) * 1000)
    return {"p50_ms": percentile(latencies_ms, 50), "p95_ms": percentile(latencies_ms, 95)}


def recall_at(index: MemoryIndex, questions, k: int, hybrid: bool) -> dict[str, float]:
    settings = SearchSettings(k=k, hybrid=hybrid)
    recalls = []
    turns_viewed = []
    for question in questions:
        gold = set(question.gold_turn_ids)
        found = {c.turn_id for c in index.search([question.question], question.memory_id, settings)}
        recalls.append(len(gold & found) / len(gold))
        turns_viewed.append(len(found))
    return {"recall": statistics.mean(recalls), "mean_turns": statistics.mean(turns_viewed)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True)
    parser.add_argument("--format", default="locomo")
    parser.add_argument("--out", default="benchmarks/results/memory.json")
    parser.add_argument("--one-at-a-time-sample", type=int, default=200)
    parser.add_argument(
        "--dtype", default="auto", help="embedding.dtype: auto | float32 | bfloat16"
    )
    args = parser.parse_args()

    result: dict = {
        "benchmark": "memory",
        "source": args.source,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "embedder": PACKAGED_MINILM,
    }
    ingest, seconds = timed(read_source, args.source, args.format)
    result["ingest"] = {
        "seconds": seconds,
        "turns": len(ingest.turns),
        "turns_per_second": len(ingest.turns) / seconds,
    }

    extractor = make_extractor("heuristic")
    extraction, seconds = timed(
        extract_memory, ingest.turns, extractor, concurrency=1, progress=False
    )
    facts = extraction.facts
    result["extraction"] = {
        "extractor": "heuristic",
        "seconds": seconds,
        "turns_per_second": len(ingest.turns) / seconds,
        "facts": len(facts),
        "facts_per_turn": len(facts) / len(ingest.turns),
    }

    embedder, seconds = timed(load_embedder, PACKAGED_MINILM, dtype=args.dtype)
    result["embedder_load_seconds"] = seconds
    result["embedding_dtype"] = embedder.dtype
    frame = to_frame(facts, Fact)
    with tempfile.TemporaryDirectory() as tmp:
        index = MemoryIndex(str(Path(tmp) / "memory.lancedb"), "facts", embedder)
        stats = index.upsert_facts(frame)
        sample = [f.text for f in facts[: args.one_at_a_time_sample]]
        _, one_by_one = timed(lambda: [embedder.embed([t]) for t in sample])
        batched_fps = stats.facts_per_second
        one_fps = len(sample) / one_by_one
        result["indexing"] = {
            **stats.as_dict(),
            "baseline_one_at_a_time_embedding_facts_per_second": one_fps,
            "ratio_vs_baseline": batched_fps / one_fps,
        }
        _, rebuild_seconds = timed(index.upsert_facts, frame)
        result["indexing"]["rebuild_unchanged_seconds"] = rebuild_seconds

        answerable = [q for q in ingest.questions if q.gold_turn_ids and not q.is_abstention]
        settings = SearchSettings(k=8)
        index.search(["warm up"], answerable[0].memory_id, settings)
        lance = bench_search(index, answerable, settings)
        numpy_baseline = bench_numpy_bruteforce(
            index, answerable, settings.k * settings.fact_fanout
        )
        result["search"] = {
            "k_turns": settings.k,
            "facts_in_index": index.count(),
            "lancedb_dense": lance,
            "lancedb_hybrid": bench_search(index, answerable, SearchSettings(k=8, hybrid=True)),
            "baseline_numpy_bruteforce": numpy_baseline,
            "ratio_p50_vs_baseline": lance["p50_ms"] / numpy_baseline["p50_ms"],
            "note": "LanceDB latency includes query embedding, prefilter, parent-turn "
            "aggregation; the numpy baseline includes query embedding and the top-k scan only.",
        }
        result["one_query_recall"] = {
            "questions": len(answerable),
            "categories": sorted({q.category for q in answerable}),
            **{
                f"{mode}@{k}": recall_at(index, answerable, k, hybrid=(mode == "hybrid"))
                for mode in ("dense", "hybrid")
                for k in (8, 16, 32)
            },
        }
        index.close()

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
