"""Synthetic LongMemEval-S-sized case: memory build + heuristic evaluate wall time.

Generates the dataset (``synth_longmemeval.py``: 500 questions x ~50 sessions, ~110k tokens per
haystack, filler sessions shared across haystacks like the real S), then times each stage the
pipelines run: read (LongMemEval reader), heuristic fact extraction, MiniLM embedding + LanceDB
write (one memory per question; a fact shared by several haystacks is embedded once), and the
heuristic evaluate of mera + naive_rag over every question with the project's default loop
settings (conf/base/parameters_evaluate.yml).

Baseline in the same run: the embedding work a per-question build would do (every haystack
embedded on its own), costed at the throughput measured here.

    nice -n 5 python benchmarks/bench_longmemeval.py --questions 500
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import yaml
from benchlib import machine, peak_rss_mb, ratio, timed, write_result
from synth_longmemeval import generate, size_stats

from mera_pipelines.core.embedding import PACKAGED_MINILM, load_embedder
from mera_pipelines.core.evaluation import (
    RoleBackends,
    build_roles,
    run_systems,
    score_runs,
    summarise,
)
from mera_pipelines.core.loop import LoopSettings
from mera_pipelines.core.memory import MemoryIndex, search_text
from mera_pipelines.core.records import Fact, to_frame
from mera_pipelines.core.roles.extractor import extract_memory, make_extractor
from mera_pipelines.core.sources import read_source

CONF = Path(__file__).resolve().parents[1] / "conf" / "base"
TARGET_MINUTES = 60


def evaluation_params() -> dict:
    return yaml.safe_load((CONF / "parameters_evaluate.yml").read_text())["evaluation"]


def build_memory(questions: int, sessions: int, pool: int, workdir: str) -> tuple[dict, Any, Any]:
    """Generate, read, extract, embed + index: (stage timings, ingest result, memory index)."""
    stages: dict = {}
    items, seconds = timed(generate, questions, sessions, pool_sessions=pool)
    stages["dataset"] = {**size_stats(items), "generate_seconds": seconds}
    path = Path(workdir) / "lme_s_synth.json"
    path.write_text(json.dumps(items))
    del items
    ingest, seconds = timed(read_source, path, "longmemeval")
    n_turns = len(ingest.turns)
    stages["ingest"] = {"seconds": seconds, "turns": n_turns, "turns_per_s": n_turns / seconds}

    extractor = make_extractor("heuristic")
    extraction, seconds = timed(
        extract_memory, ingest.turns, extractor, concurrency=1, progress=False
    )
    facts = to_frame(extraction.facts, Fact)
    stages["extraction"] = {
        "seconds": seconds,
        "turns_per_s": n_turns / seconds,
        "facts": len(facts),
        "facts_per_turn": len(facts) / n_turns,
    }
    del extraction

    embedder, load_seconds = timed(load_embedder, PACKAGED_MINILM)
    embedder.embed(["warm up"])  # first call initialises torch kernels: not throughput
    index = MemoryIndex(str(Path(workdir) / "memory.lancedb"), "facts", embedder)
    stats, seconds = timed(index.upsert_facts, facts)
    distinct = len(
        {
            search_text(t, k, p)
            for t, k, p in zip(facts["text"], facts["keywords"], facts["topics"], strict=True)
        }
    )
    embed_fps = distinct / stats.embed_seconds if stats.embed_seconds else 0.0
    per_question_embed_seconds = len(facts) / embed_fps if embed_fps else None
    stages["memory_build"] = {
        "seconds": seconds,
        "embedder_load_seconds": load_seconds,
        "rows": stats.facts_written,
        "distinct_texts_embedded": distinct,
        "embed_seconds": stats.embed_seconds,
        "write_and_index_seconds": stats.write_seconds,
        "embed_texts_per_s": embed_fps,
        "ann_index": index.describe()["ann_index"],
        "baseline_per_question_embedding_seconds_estimate": per_question_embed_seconds,
        "ratio_embed_seconds_vs_baseline": ratio(
            stats.embed_seconds, per_question_embed_seconds or 0
        ),
    }
    return stages, ingest, index


def evaluate(ingest, index: MemoryIndex) -> dict:
    params = evaluation_params()
    settings = LoopSettings.from_params(params["loop"])
    roles = build_roles(params["roles"], RoleBackends(), {})
    (runs, notes), seconds = timed(
        run_systems, ingest.questions, [], index, roles, settings, ["mera", "naive_rag"]
    )
    rows = score_runs(runs, ingest.questions, "longmemeval", None, settings.max_rounds)
    summary = summarise(rows, runs, {"format": "longmemeval"}, {}, None, notes)
    keys = (
        "n_questions",
        "f1",
        "round1_recall",
        "evidence_recall_final",
        "mean_rounds",
        "mean_turns_viewed",
        "seconds_per_question",
    )
    return {
        "seconds": seconds,
        "seconds_per_question_all_systems": seconds / len(ingest.questions),
        "systems": {
            name: {key: metrics.get(key) for key in keys}
            for name, metrics in summary["systems"].items()
        },
    }


def project_500(result: dict, questions: int, pool_500: int = 2000) -> float:
    """Seconds for 500 questions: per-question stages scale with questions; embedding with the
    distinct sessions (the shared pool of 2,000 plus each question's own evidence sessions)."""
    scale = 500 / questions
    linear = sum(result[stage]["seconds"] for stage in ("ingest", "extraction", "evaluate"))
    build = result["memory_build"]
    distinct_sessions = result["dataset"]["distinct_sessions"]
    evidence_per_question = 4 / 3  # two of the six question types have two evidence sessions
    sessions_500 = pool_500 + 500 * evidence_per_question
    embed = build["embed_seconds"] * sessions_500 / max(1, distinct_sessions)
    return linear * scale + embed + build["write_and_index_seconds"] * scale


def run(questions: int, sessions: int, pool: int) -> dict:
    result: dict = {"benchmark": "longmemeval_s_synthetic", "machine": machine()}
    with tempfile.TemporaryDirectory() as tmp:
        stages, ingest, index = build_memory(questions, sessions, pool, tmp)
        result.update(stages)
        result["evaluate"] = evaluate(ingest, index)
        index.close()
    total = sum(
        result[stage]["seconds"] for stage in ("ingest", "extraction", "memory_build", "evaluate")
    )
    result["total_minutes"] = total / 60
    result["target_minutes"] = TARGET_MINUTES
    result["projected_minutes_for_500_questions"] = project_500(result, questions) / 60
    result["peak_rss_mb"] = peak_rss_mb()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=500)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument(
        "--pool", type=int, default=None, help="shared filler sessions (default 4 per question)"
    )
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    result = run(
        args.questions, args.sessions, args.pool or max(4 * args.questions, 2 * args.sessions)
    )
    print(
        f"[longmemeval-s synthetic] {args.questions} questions: {result['total_minutes']:.1f} min "
        f"(projected for 500: {result['projected_minutes_for_500_questions']:.1f} min)"
    )
    print("wrote", write_result("longmemeval_s_synthetic", result, args.out))


if __name__ == "__main__":
    main()
