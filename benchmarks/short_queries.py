"""How often planners write a query the reward calls too short, and what such plans recover.

Reads a train run's own records, no model is run: the plans filtering sampled from the planner
GRPO starts from (``rollouts``: each completion with the share of missing evidence it recovered)
and the teacher's plans of every collected state (``planner_states.teacher_output``). Each plan's
intents are parsed as the reward parses them and counted with its length check
(``core.training.reward.query_length_is_bad``: fewer than ``min_query_words`` distinct content
words, or more than ``max_query_words`` words). For the sampled plans it also splits the mean
recovered share by whether the plan has such a query. One JSON file.

    python benchmarks/short_queries.py \\
        --rollouts <project>/data/07_model_output/rollouts.parquet/<version>/rollouts.parquet \\
        --states <project>/data/05_model_input/planner_states.parquet
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd
from benchlib import RESULTS, machine, write_json

from mera_pipelines.core.training.reward import (
    RewardSettings,
    parse_plan_output,
    query_length_is_bad,
)


def bad_query_counts(text: str, settings: RewardSettings) -> tuple[int, int] | None:
    """(intents, intents with a bad length) of one plan; None when it has no intent (unparseable,
    or empty: the heuristic teacher's "nothing new to ask")."""
    plan = parse_plan_output(text, settings)
    if plan.parse_failed:
        return None
    bad = sum(query_length_is_bad(intent.query_text(), settings) for intent in plan.intents)
    return len(plan.intents), bad


def count_plans(texts: Iterable[str], settings: RewardSettings) -> dict[str, Any]:
    plans = intents = bad_intents = plans_with_bad = without_intents = 0
    for text in texts:
        counts = bad_query_counts(text, settings)
        if counts is None:
            without_intents += 1
            continue
        plans += 1
        intents += counts[0]
        bad_intents += counts[1]
        plans_with_bad += int(counts[1] > 0)
    return {
        "plans": plans,
        "plans_without_intents": without_intents,
        "intents": intents,
        "intents_with_bad_length": bad_intents,
        "share_of_intents": bad_intents / intents if intents else None,
        "plans_with_a_bad_query": plans_with_bad,
    }


def recovered_by_query_length(rollouts: pd.DataFrame, settings: RewardSettings) -> dict[str, Any]:
    """Mean recovered share of parseable sampled plans with and without a bad-length query."""
    groups: dict[str, list[float]] = {"with_bad_query": [], "without": []}
    for text, recovered in zip(rollouts["completion"], rollouts["recovered_share"], strict=True):
        counts = bad_query_counts(text, settings)
        if counts is not None:
            groups["with_bad_query" if counts[1] else "without"].append(float(recovered))
    return {
        name: {
            "plans": len(values),
            "mean_recovered": sum(values) / len(values) if values else None,
        }
        for name, values in groups.items()
    }


def read_parquet(path: Path, columns: list[str]) -> pd.DataFrame:
    if not path.exists():
        raise SystemExit(f"{path}: no such file")
    frame = pd.read_parquet(path)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise SystemExit(f"{path}: missing column(s) {missing}")
    return frame


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", required=True, help="a versioned rollouts.parquet file")
    parser.add_argument("--states", required=True, help="planner_states.parquet")
    parser.add_argument("--min-query-words", type=int, default=RewardSettings.min_query_words)
    parser.add_argument("--out", default=str(RESULTS / "short_queries.json"))
    args = parser.parse_args()

    settings = RewardSettings(min_query_words=args.min_query_words)
    rollouts = read_parquet(Path(args.rollouts), ["completion", "recovered_share"])
    states = read_parquet(Path(args.states), ["teacher_output"])
    result = {
        "benchmark": "short_queries",
        "machine": machine(),
        "rollouts": args.rollouts,
        "states": args.states,
        "min_query_words": settings.min_query_words,
        "max_query_words": settings.max_query_words,
        "sampled_plans": count_plans(rollouts["completion"], settings),
        "teacher_plans": count_plans(states["teacher_output"], settings),
        "sampled_recovered": recovered_by_query_length(rollouts, settings),
    }
    out = write_json(args.out, result)
    for source in ("sampled_plans", "teacher_plans"):
        counts = result[source]
        print(f"{source}: {counts['intents_with_bad_length']} of {counts['intents']} intents")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
