"""What planners search for after round 1: the shape of their later-round queries.

On conv-42/43 the trained planners add less recall after round 1 than the heuristic does. This
script reruns MERA with each planner on a spread sample of the questions where one planner
searched more than once (its rows in a ``compare_planners.py`` ``<out>.<planner>.jsonl``) and
counts, over the queries of rounds 2 and later: queries, distinct words per query, queries
that repeat a word, queries of at most two distinct words, rounds with no new query, and a few
example queries that repeat a word; and, per question, each planner's round-1 queries and
recall (how many queries a planner writes first). ``--questions`` names the questions instead
of the sample (e.g. those a planner loses on, from ``compare_planners.py``'s rows). One JSON
file; it reads no gold beyond the loop's recall.

    python benchmarks/later_round_queries.py --project <project with the dev5 memory> \\
        --memories conv-42,conv-43 --planner heuristic --planner grpo9=<planner folder> \\
        --rows benchmarks/results/compare_planners_locomo_split_e2e.grpo9.jsonl --sample 40
    # or named questions: --questions conv-43/q4,conv-43/q17
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any

from benchlib import RESULTS, machine, write_json
from compare_planners import (
    build_roles,
    evaluation_params,
    load_questions,
    open_memory,
    parse_planner,
    read_rows,
)

from mera_pipelines.core.loop import LoopSettings, run_mera
from mera_pipelines.core.text import tokenize

EXAMPLES = 12


def query_shape(query: str) -> Counter:
    """One query's counts: distinct words, whether a word repeats, whether it is near-empty."""
    words = tokenize(query)
    distinct = len(set(words))
    return Counter(
        queries=1,
        distinct_words=distinct,
        repeats_a_word=int(distinct < len(words)),
        at_most_two_distinct_words=int(distinct <= 2),
    )


def multi_round_sample(rows_path: Path, sample: int) -> list[str]:
    """Every k-th question (in file order) with gold evidence and more than one round."""
    rows = read_rows(rows_path)
    multi = [r["question_id"] for r in rows if r["final"] is not None and r["rounds"] > 1]
    if not multi:
        raise SystemExit(f"{rows_path}: no question with gold evidence and more than one round")
    return multi[:: max(1, len(multi) // sample)][:sample]


def later_round_shapes(trajectories: list[Any]) -> dict[str, Any]:
    totals: Counter = Counter()
    examples: list[str] = []
    for trajectory in trajectories:
        for log in trajectory.rounds[1:]:
            totals["later_rounds"] += 1
            totals["rounds_without_query"] += int(not log.queries)
            for query in log.queries:
                shape = query_shape(query)
                totals.update(shape)
                if shape["repeats_a_word"] and len(examples) < EXAMPLES:
                    examples.append(query)
    queries = totals["queries"]
    return {
        **dict(totals),
        "mean_distinct_words": totals["distinct_words"] / queries if queries else None,
        "share_repeating_a_word": totals["repeats_a_word"] / queries if queries else None,
        "examples_repeating_a_word": examples,
    }


def round_one_plans(trajectories: list[Any]) -> dict[str, Any]:
    """Round 1 per question: its queries and cumulative recall; and how many queries a round 1
    has on average and how often it is a single query."""
    plans = {
        t.question_id: {"recall": t.rounds[0].recall_retrieved, "queries": t.rounds[0].queries}
        for t in trajectories
    }
    counts = [len(plan["queries"]) for plan in plans.values()]
    return {
        "questions": len(plans),
        "mean_queries": sum(counts) / len(counts) if counts else None,
        "single_query": sum(count == 1 for count in counts),
        "plans": plans,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", default=".", help="a Kedro project with a built memory")
    parser.add_argument("--planner", action="append", required=True)
    parser.add_argument("--memories", default=None, help="comma list; default all")
    parser.add_argument("--rows", default=None, help="a compare_planners <out>.<planner>.jsonl")
    parser.add_argument("--questions", default=None, help="comma list of question ids (no sample)")
    parser.add_argument("--sample", type=int, default=40)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--dtype", default="float32", choices=["auto", "float32", "bfloat16"])
    parser.add_argument("--out", default=str(RESULTS / "later_round_queries.json"))
    args = parser.parse_args()

    project = Path(args.project)
    params = evaluation_params(args.memories, "1,2,3,4", None)
    by_id = {q.question_id: q for q in load_questions(project, params)}
    if (args.rows is None) == (args.questions is None):
        raise SystemExit("give --rows (a sample of its multi-round questions) or --questions")
    if args.questions is not None:
        picked = [qid for qid in args.questions.split(",") if qid]
    else:
        picked = multi_round_sample(Path(args.rows), args.sample)
    unknown = [qid for qid in picked if qid not in by_id]
    if unknown:
        source = args.rows or "--questions"
        raise SystemExit(f"{source}: questions {unknown[:3]} are not in {project}'s memories")
    questions = [by_id[qid] for qid in picked]
    settings = LoopSettings.from_params(params["loop"])
    memory = open_memory(project, args.dtype)
    folders = dict(map(parse_planner, args.planner))
    planners = {}
    for name, folder in folders.items():
        roles = build_roles(folder, questions, args.threads)
        trajectories = [run_mera(q, memory, roles, settings) for q in questions]
        planners[name] = shapes = later_round_shapes(trajectories)
        shapes["round1"] = round_one_plans(trajectories)
        print(
            f"[{name}] {shapes['queries']} later-round queries, {shapes['repeats_a_word']} repeat a word"
        )
    result = {
        "benchmark": "later_round_queries",
        "machine": machine(),
        "rows": args.rows,
        "question_ids": picked,
        "planner_folders": folders,
        "planners": planners,
    }
    out = write_json(args.out, result)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
