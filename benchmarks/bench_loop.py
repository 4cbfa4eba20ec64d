"""MERA loop overhead per question (model calls excluded), end-to-end seconds, where time goes.

Runs the default loop (conf/base/parameters_evaluate.yml) with the heuristic roles over
synthetic LongMemEval-S-sized haystacks (one memory of ~3.5k facts per question). Each role
call and each query-embedding call is timed through a thin proxy: in a deployment those are
the model calls (LLM roles, the embedding model). What is left is the loop's own overhead:
vector search + parent-turn aggregation, the evidence graph, planner state, bookkeeping.
A cProfile of the same questions lists the functions where the time goes, and tracemalloc the
Python memory peak. Baseline in the same run: naive RAG (one query, one search) per question.

    python benchmarks/bench_loop.py --questions 20
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
import tracemalloc
from collections import defaultdict

from bench_longmemeval import build_memory, evaluation_params
from benchlib import latency_summary, machine, peak_rss_mb, ratio, write_result

from mera_pipelines.core.baselines import run_naive_rag
from mera_pipelines.core.evaluation import RoleBackends, build_roles
from mera_pipelines.core.loop import LoopSettings, Roles, run_mera

TARGET_MS = 50


class Clock:
    """Seconds spent per label; proxies add to it."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)


class Timed:
    """Times every method call of the wrapped object under ``label``."""

    def __init__(self, inner, label: str, clock: Clock) -> None:
        self._inner, self._label, self._clock = inner, label, clock

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def timed_call(*args, **kwargs):
            started = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                self._clock.seconds[self._label] += time.perf_counter() - started
                self._clock.calls[self._label] += 1

        return timed_call


def timed_roles(roles: Roles, clock: Clock) -> Roles:
    return Roles(
        seeder=Timed(roles.seeder, "seeder", clock),
        planner=Timed(roles.planner, "planner", clock),
        verifier=Timed(roles.verifier, "verifier", clock),
        answerer=Timed(roles.answerer, "answerer", clock),
    )


def measure(questions, index, roles: Roles, run_one) -> dict:
    """Per question: wall time, and wall time minus role calls and query embedding.

    ``run_one(question, index, roles)`` returns a trajectory."""
    clock = Clock()
    proxied_roles = timed_roles(roles, clock)
    real_embedder = index.embedder
    index.embedder = Timed(real_embedder, "query_embedding", clock)
    real_search = index.search

    def timed_search(*args, **kwargs):
        started = time.perf_counter()
        try:
            return real_search(*args, **kwargs)
        finally:
            clock.seconds["search_total"] += time.perf_counter() - started

    index.search = timed_search
    totals, overheads, rounds = [], [], []
    try:
        for question in questions:
            before = dict(clock.seconds)
            started = time.perf_counter()
            trajectory = run_one(question, index, proxied_roles)
            total = time.perf_counter() - started
            spent = {k: clock.seconds[k] - before.get(k, 0.0) for k in clock.seconds}
            model = sum(spent.get(r, 0.0) for r in ("seeder", "planner", "verifier", "answerer"))
            model += spent.get("query_embedding", 0.0)
            totals.append(total)
            overheads.append(total - model)
            rounds.append(len(trajectory.rounds))
    finally:
        index.embedder = real_embedder
        del index.search
    n = len(questions)
    breakdown = {k: 1000 * v / n for k, v in clock.seconds.items()}
    breakdown["search_minus_embedding"] = breakdown.pop("search_total") - breakdown.get(
        "query_embedding", 0.0
    )
    breakdown["loop_rest"] = 1000 * sum(totals) / n - sum(breakdown.values())
    return {
        "end_to_end": latency_summary(totals),
        "loop_overhead": latency_summary(overheads),
        "mean_rounds": sum(rounds) / n,
        "ms_per_question_by_part": breakdown,
    }


def profile(questions, index, roles: Roles, settings: LoopSettings, top: int = 25) -> list[dict]:
    profiler = cProfile.Profile()
    profiler.enable()
    for question in questions:
        run_mera(question, index, roles, settings)
    profiler.disable()
    stats = pstats.Stats(profiler)
    rows = []
    for (path, line, name), (_, calls, tottime, cumtime, _) in stats.stats.items():
        rows.append(
            {
                "function": f"{path.split('site-packages/')[-1].split('src/')[-1]}:{line}({name})",
                "calls_per_question": calls / len(questions),
                "self_ms_per_question": 1000 * tottime / len(questions),
                "cumulative_ms_per_question": 1000 * cumtime / len(questions),
            }
        )
    rows.sort(key=lambda r: -r["cumulative_ms_per_question"])
    return rows[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    result: dict = {"benchmark": "loop", "machine": machine()}
    params = evaluation_params()
    settings = LoopSettings.from_params(params["loop"])
    roles = build_roles(params["roles"], RoleBackends(), {})
    with tempfile.TemporaryDirectory() as tmp:
        pool = max(2 * args.sessions, 4 * args.questions)
        stages, ingest, index = build_memory(args.questions, args.sessions, pool, tmp)
        result["memory"] = {
            "facts": stages["memory_build"]["rows"],
            "facts_per_memory": stages["memory_build"]["rows"] / args.questions,
            "build_seconds": stages["memory_build"]["seconds"],
        }
        questions = ingest.questions
        run_mera(questions[0], index, roles, settings)  # warm caches (first search opens files)
        # First pass: each question's memory read into the process on its first search (a
        # LongMemEval question opens its own memory once).
        index._exact_cache.clear()
        result["mera"] = measure(
            questions, index, roles, lambda q, i, r: run_mera(q, i, r, settings)
        )
        # Second pass: every memory's vectors already in the process (a LoCoMo conversation
        # serves ~200 questions).
        result["mera_warm_memory"] = measure(
            questions, index, roles, lambda q, i, r: run_mera(q, i, r, settings)
        )
        # The Python heap peak, in a pass of its own: tracemalloc slows every allocation
        # (it made the timed pass ~2-3x slower when they were combined).
        index._exact_cache.clear()
        tracemalloc.start()
        for question in questions:
            run_mera(question, index, roles, settings)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        result["mera"]["python_heap_peak_mb"] = peak / 2**20
        naive_k = settings.turns_first_round
        result["baseline_naive_rag"] = measure(
            questions,
            index,
            roles,
            lambda q, i, r: run_naive_rag(q, i, r.answerer, naive_k, settings.search),
        )
        result["profile_top_cumulative"] = profile(questions, index, roles, settings)
        index.close()
    mera, naive = result["mera"], result["baseline_naive_rag"]
    result["summary"] = {
        "loop_overhead_ms_per_question": mera["loop_overhead"]["p50_ms"],
        "loop_overhead_p95_ms": mera["loop_overhead"]["p95_ms"],
        "loop_overhead_warm_memory_ms": result["mera_warm_memory"]["loop_overhead"]["p50_ms"],
        "target_ms": TARGET_MS,
        "baseline_naive_rag_overhead_ms": naive["loop_overhead"]["p50_ms"],
        "ratio_overhead_vs_naive_rag": ratio(
            mera["loop_overhead"]["p50_ms"], naive["loop_overhead"]["p50_ms"]
        ),
        "end_to_end_s_per_question": mera["end_to_end"]["p50_ms"] / 1000,
        "baseline_naive_rag_s_per_question": naive["end_to_end"]["p50_ms"] / 1000,
        "ratio_end_to_end_vs_naive_rag": ratio(
            mera["end_to_end"]["p50_ms"], naive["end_to_end"]["p50_ms"]
        ),
    }
    result["peak_rss_mb"] = peak_rss_mb()
    print(f"[loop] {result['summary']}")
    print(f"[loop] ms per question by part: {result['mera']['ms_per_question_by_part']}")
    print("wrote", write_result("loop", result, args.out))


if __name__ == "__main__":
    main()
