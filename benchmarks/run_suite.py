"""Run the benchmark suite, print a table, write data/08_reporting/benchmarks.json.

Each benchmark runs in its own process (so its peak memory is its own) and writes its JSON to
benchmarks/results/; this script collects the headline figures, each with its baseline from
the same run and the ratio, into one report.

    python benchmarks/run_suite.py            # 10k + 100k retrieval, 20-question loop, ...
    python benchmarks/run_suite.py --quick    # small sizes: minutes, for a smoke check
    python benchmarks/run_suite.py --full     # adds 1M facts and all 500 synthetic questions
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
REPORT = ROOT / "data" / "08_reporting" / "benchmarks.json"
RESULTS = HERE / "results"

PLANS = {
    "quick": {
        "indexing": ["--questions", "1", "--facts", "600", "--one-at-a-time", "60"],
        "retrieval": ["--sizes", "10k", "--queries", "60"],
        "loop": ["--questions", "4", "--sessions", "20"],
        "longmemeval": ["--questions", "4", "--sessions", "10", "--pool", "20"],
        "grpo": ["--steps", "2", "--skip-smollm2"],
    },
    "default": {
        "indexing": ["--questions", "4", "--facts", "3000"],
        "retrieval": ["--sizes", "10k,100k", "--queries", "150"],
        "loop": ["--questions", "20"],
        "longmemeval": ["--questions", "25"],
        "grpo": ["--steps", "3"],
    },
    "full": {
        "indexing": ["--questions", "4", "--facts", "3000"],
        "retrieval": ["--sizes", "10k,100k,1m", "--queries", "150"],
        "loop": ["--questions", "40"],
        "longmemeval": ["--questions", "500"],
        "grpo": ["--steps", "3"],
    },
}
SCRIPTS = {
    "indexing": "bench_indexing.py",
    "retrieval": "bench_retrieval.py",
    "loop": "bench_loop.py",
    "longmemeval": "bench_longmemeval.py",
    "grpo": "bench_grpo.py",
}


def run_one(name: str, args: list[str], suffix: str) -> dict | None:
    out = RESULTS / f"{name}{suffix}.json"
    command = [sys.executable, str(HERE / SCRIPTS[name]), *args, "--out", str(out)]
    print(f"== {name}: {' '.join(command[1:])}", flush=True)
    started = time.perf_counter()
    done = subprocess.run(
        command, check=False, cwd=HERE, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}
    )
    if done.returncode != 0:
        print(f"!! {name} failed (exit {done.returncode})", flush=True)
        return None
    result = json.loads(out.read_text())
    result["suite_wall_seconds"] = time.perf_counter() - started
    return result


def load_result(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def merge_separate_sizes(retrieval: dict | None, suffix: str) -> None:
    """Sizes measured in a separate run (e.g. ``retrieval_1m.json``, run alone at nice) join
    the report unless this run measured them itself."""
    if retrieval is None:
        return
    for label in ("10k", "100k", "1m"):
        extra = load_result(RESULTS / f"retrieval_{label}{suffix}.json")
        if extra and label in extra["sizes"] and label not in retrieval["sizes"]:
            retrieval["sizes"][label] = {**extra["sizes"][label], "machine": extra["machine"]}


def figure(value, baseline, lower_is_better: bool, **extra) -> dict:
    """A headline figure with its same-run baseline and value/baseline."""
    ratio = value / baseline if value is not None and baseline else None
    return {
        "value": value,
        "baseline": baseline,
        "ratio": ratio,
        "lower_is_better": lower_is_better,
        **extra,
    }


def ann_build_seconds(builds: dict) -> dict[str, float]:
    """Build seconds per index type (result files before several types: one flat entry)."""
    if "build_seconds" in builds:
        builds = {builds["type"]: builds}
    return {kind: build["build_seconds"] for kind, build in builds.items()}


def collect(results: dict[str, dict | None], mode: str) -> dict:
    report: dict = {
        "mode": mode,
        "machine": next((r["machine"] for r in results.values() if r), None),
        "note": "Measured on a shared CPU machine; loadavg_at_start says how busy it was. "
        "Ratios are value / baseline measured in the same run.",
        "sources": {name: f"benchmarks/results/{name}*.json" for name in results},
    }
    indexing, retrieval = results.get("indexing"), results.get("retrieval")
    if indexing:
        ix = indexing["indexing"]
        embed_fps = ix["batched"]["facts_written"] / ix["batched"]["embed_seconds"]
        one_fps = ix["baseline_one_at_a_time_facts_per_s"]
        report["index_facts_per_s"] = {}
        sizes = retrieval["sizes"] if retrieval else {}
        # MiniLM cost per fact is size-independent (measured once); the LanceDB write + index
        # cost is measured at each size with precomputed vectors.
        for label, size in sizes.items():
            write_s = 1 / size["write_facts_per_s"]
            report["index_facts_per_s"][label] = figure(
                1 / (1 / embed_fps + write_s),
                1 / (1 / one_fps + write_s),
                False,
                target=ix["target_facts_per_s"],
                embed_facts_per_s=embed_fps,
                write_facts_per_s=size["write_facts_per_s"],
                ann_build_seconds=ann_build_seconds(size["ann_index"]),
            )
        report["index_facts_per_s"]["measured_end_to_end"] = figure(
            ix["index_facts_per_s"],
            one_fps,
            False,
            target=ix["target_facts_per_s"],
            facts=ix["facts"],
            facts_per_cpu_second=ix.get("facts_per_cpu_second"),
            best_embedding_setting=max(ix["embedding_sweep"], key=lambda r: r["texts_per_s"]),
        )
        report["query_embedding_ms"] = figure(
            ix["query_embedding"]["three_queries_batched"]["p50_ms"] / 3,
            ix["query_embedding"]["one_query"]["p50_ms"],
            True,
            note="per intent when a round's 3 intents are embedded in one batch, vs one alone",
        )
        report["ingest_turns_per_s"] = figure(
            indexing["ingest"]["turns_per_s"],
            indexing["ingest"]["baseline_json_load_turns_per_s"],
            False,
        )
        report["extraction_turns_per_s"] = figure(
            indexing["extraction"]["turns_per_s"],
            indexing["extraction"]["baseline_regex_split_turns_per_s"],
            False,
        )
    if retrieval:
        targets = {"100k": 10.0, "1m": 50.0}
        for key in ("retrieval_p50_ms", "retrieval_p95_ms", "ann_recall_at_8"):
            report[key] = {}
        for label, size in retrieval["sizes"].items():
            s = size["summary"]
            report["retrieval_p50_ms"][label] = figure(
                s["retrieval_p50_ms"],
                s["baseline_numpy_p50_ms"],
                True,
                path=s["path"],
                target=targets.get(label),
                lancedb_exact_p50_ms=s["lancedb_exact_p50_ms"],
                cpu_ms_mean=s.get("retrieval_cpu_ms_mean"),
                round_p50_ms=s["round_p50_ms"],
            )
            report["retrieval_p95_ms"][label] = figure(
                s["retrieval_p95_ms"],
                s["baseline_numpy_p95_ms"],
                True,
                path=s["path"],
                lancedb_exact_p95_ms=s["lancedb_exact_p95_ms"],
            )
            report["ann_recall_at_8"][label] = figure(
                s["ann_recall_at_8"],
                1.0,
                False,
                path=s.get("ann_path", s["path"]),
                target=0.95,
                baseline_is="exact LanceDB scan (recall 1 by definition)",
                turn_recall_at_8=s["ann_turn_recall_at_8"],
                ann_p50_ms=s.get("ann_p50_ms"),
                default_path_recall_at_8=s.get("recall_at_8"),
            )
    loop = results.get("loop")
    if loop:
        s = loop["summary"]
        report["loop_overhead_ms_per_question"] = figure(
            s["loop_overhead_ms_per_question"],
            s["baseline_naive_rag_overhead_ms"],
            True,
            target=s["target_ms"],
            p95_ms=s["loop_overhead_p95_ms"],
            warm_memory_ms=s.get("loop_overhead_warm_memory_ms"),
            note="first question on each memory (its vectors are read once per process); "
            "warm_memory_ms: the memory already read",
            baseline_is="naive RAG (one query) overhead, same proxies",
            ms_per_question_by_part=loop["mera"]["ms_per_question_by_part"],
        )
        report["end_to_end_s_per_question"] = figure(
            s["end_to_end_s_per_question"],
            s["baseline_naive_rag_s_per_question"],
            True,
            roles="heuristic",
            peak_rss_mb=loop["peak_rss_mb"],
            python_heap_peak_mb=loop["mera"]["python_heap_peak_mb"],
        )
    lme = results.get("longmemeval")
    if lme:
        build = lme["memory_build"]
        re_embedding = build["baseline_per_question_embedding_seconds_estimate"] or 0.0
        report["longmemeval_s_synthetic_minutes"] = figure(
            lme["total_minutes"],
            lme["total_minutes"] + (re_embedding - build["embed_seconds"]) / 60,
            True,
            questions=lme["dataset"]["questions"],
            baseline_is="the same run with every haystack embedded on its own (estimated)",
            projected_minutes_for_500=lme["projected_minutes_for_500_questions"],
            target=lme["target_minutes"],
            peak_rss_mb=lme["peak_rss_mb"],
        )
        report["longmemeval_s_embed_seconds"] = figure(
            build["embed_seconds"],
            build["baseline_per_question_embedding_seconds_estimate"],
            True,
            baseline_is="embedding every haystack separately (estimated at the measured rate)",
            distinct_texts=build["distinct_texts_embedded"],
            rows=build["rows"],
        )
    grpo = results.get("grpo")
    if grpo:
        report["grpo_step_seconds"] = {
            name: figure(
                grpo[name]["step_seconds_median"],
                grpo[name]["baseline_generate_4_completions_seconds"],
                True,
                baseline_is="generating the step's 4 completions only",
                parameters=grpo[name]["parameters"],
                torch_threads=grpo[name]["torch_threads"],
            )
            for name in ("tiny_qwen3", "smollm2_135m")
            if grpo.get(name)
        }
    return report


def print_table(report: dict) -> None:
    rows = []
    for key, entry in report.items():
        if not isinstance(entry, dict):
            continue
        if "value" in entry:
            rows.append((key, "", entry))
        else:
            rows.extend(
                (key, sub, e) for sub, e in entry.items() if isinstance(e, dict) and "value" in e
            )
    print(f"\n{'figure':36} {'size':22} {'value':>10} {'baseline':>10} {'ratio':>7} {'target':>7}")

    def fmt(x) -> str:
        return f"{x:10.3g}" if isinstance(x, int | float) else f"{'-':>10}"

    for key, sub, e in rows:
        target = e.get("target")
        ratio = f"{e['ratio']:7.2f}" if e.get("ratio") else "      -"
        target = f"{target:7.3g}" if target else "      -"
        print(f"{key:36} {sub:22} {fmt(e['value'])} {fmt(e['baseline'])} {ratio} {target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--quick", action="store_true")
    group.add_argument("--full", action="store_true")
    parser.add_argument("--only", default=None, help="comma list of " + ",".join(SCRIPTS))
    parser.add_argument("--skip-smollm2", action="store_true")
    parser.add_argument("--collect-only", action="store_true", help="no runs: re-read results")
    args = parser.parse_args()
    mode = "quick" if args.quick else "full" if args.full else "default"
    plan = dict(PLANS[mode])
    if args.skip_smollm2 and "--skip-smollm2" not in plan["grpo"]:
        plan["grpo"] = [*plan["grpo"], "--skip-smollm2"]
    wanted = args.only.split(",") if args.only else list(plan)
    suffix = "_quick" if mode == "quick" else ""
    if args.collect_only:  # rebuild the report from the JSON files of earlier runs
        results = {name: load_result(RESULTS / f"{name}{suffix}.json") for name in wanted}
    else:
        results = {name: run_one(name, plan[name], suffix) for name in wanted}
    merge_separate_sizes(results.get("retrieval"), suffix)
    report = collect(results, mode)
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(report, indent=2))
    print_table(report)
    print(f"\nwrote {REPORT.relative_to(ROOT)}")
    if any(r is None for r in results.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
