"""Does scoring a plan by the rest of its trajectory widen the training signal?

For each collected planner state of a train run (``planner_states``), the teacher's plan and each
variant rule's plan (``training.sft.variant_targets``-style heuristic settings) are scored at the
state twice: by what their own round's search recovers (``training.reward.horizon: round``) and
by what that search and the rest of the question's trajectory after it recover (``trajectory``,
the loop run on with the heuristic roles). Per horizon it counts the states where the plans
recover different shares of the missing evidence, and where a variant's plan recovers more
than the teacher's: how often the reward could tell the rules' plans apart.

    python benchmarks/reward_horizon.py --project <project> \\
        --variant one_query=keyword_intent=false --variant no_topics=topic_labels=false \\
        --variant continue=continue_question=true --out benchmarks/results/reward_horizon_x.json

The loop is conf/base's ``evaluation.loop`` (as in compare_planners.py); the states must have
been collected on the project's memory with the heuristic teacher, or the replay stops with a
clear error. ``--real-questions conv-42,conv-43`` measures the same on states the heuristic
teacher collects on those memories' real questions (categories 1-4, ``--collect-min-rounds``
rounds at least, as training's ``collect.min_rounds``) instead: is the training split's signal
what the evaluation questions would give? (Nothing is trained on them.)
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
from benchlib import dataset_version, machine, write_json
from compare_planners import evaluation_params, heuristic_settings, load_questions, open_memory
from tqdm.auto import tqdm

from mera_pipelines.core.loop import LoopSettings
from mera_pipelines.core.records import Question, from_frame
from mera_pipelines.core.roles.planner import make_planner
from mera_pipelines.core.training.continuation import TrajectoryReplay
from mera_pipelines.core.training.reward import RewardSettings
from mera_pipelines.core.training.rollouts import score_at_state
from mera_pipelines.core.training.states import (
    PlannerStateRecord,
    collect_states,
    collection_roles,
    make_teacher,
    sft_targets,
)

HORIZONS = ("round", "trajectory")


def separation(shares: list[list[float]]) -> dict[str, Any]:
    """Per state the shares its plans recover, the teacher's first."""
    return {
        "states": len(shares),
        "states_where_plans_differ": sum(len(set(s)) > 1 for s in shares),
        "states_where_a_variant_recovers_more": sum(max(s) > s[0] for s in shares),
        "mean_teacher_share": statistics.fmean(s[0] for s in shares) if shares else None,
        "mean_best_share": statistics.fmean(max(s) for s in shares) if shares else None,
    }


def measure(
    records: list[PlannerStateRecord],
    questions: list[Question],
    variants: dict[str, dict[str, Any]],
    memory,
    loop: LoopSettings,
) -> dict[str, Any]:
    planners = [make_planner("heuristic", **settings) for settings in variants.values()]
    replay = TrajectoryReplay(questions, memory, collection_roles(), loop)
    rewards = {h: replace(RewardSettings(), horizon=h) for h in HORIZONS}
    shares: dict[str, list[list[float]]] = {h: [] for h in HORIZONS}
    replay_seconds: list[float] = []
    several = 0
    for record in tqdm(records, desc="score plans by both horizons"):
        plans = sft_targets(record, planners)
        several += len(plans) > 1
        shares["round"].append(
            [
                score_at_state(record, p, memory, loop, rewards["round"]).recovered_share
                for p in plans
            ]
        )
        row = []
        for text in plans:
            started = time.perf_counter()
            outcome = score_at_state(record, text, memory, loop, rewards["trajectory"], replay)
            if not outcome.parse_failed:
                replay_seconds.append(time.perf_counter() - started)
            row.append(outcome.recovered_share)
        shares["trajectory"].append(row)
    rounds = sorted({r.round_index for r in records})
    return {
        "states": len(records),
        "states_with_several_plans": several,
        **{h: separation(shares[h]) for h in HORIZONS},
        # where the headroom is: the states of each round apart
        "by_round": {
            str(n): {
                h: separation(
                    [s for s, r in zip(shares[h], records, strict=True) if r.round_index == n]
                )
                for h in HORIZONS
            }
            for n in rounds
        },
        "replays": replay.replays,
        "median_replay_seconds": statistics.median(replay_seconds) if replay_seconds else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", default=".", help="a Kedro project with a train run")
    parser.add_argument("--states-version", help="planner_states version (default: newest)")
    parser.add_argument("--questions-version", help="synthetic_questions version (newest)")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=key=value,...",
        help="a variant rule: heuristic planner settings, as compare_planners' heuristic:...",
    )
    parser.add_argument("--real-questions", metavar="MEMORIES", help="e.g. conv-42,conv-43")
    parser.add_argument("--categories", default="1,2,3,4", help="with --real-questions")
    parser.add_argument("--collect-min-rounds", type=int, default=3, help="with --real-questions")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    project = Path(args.project)
    variants = {}
    for spec in args.variant:
        name, sep, settings = spec.partition("=")
        if not sep:
            raise SystemExit(f"--variant {spec!r}: use NAME=key=value,...")
        variants[name] = heuristic_settings(settings)
    loop = LoopSettings.from_params(evaluation_params(None, None, None)["loop"])
    memory = open_memory(project, args.dtype)
    started = time.perf_counter()
    if args.real_questions:
        params = evaluation_params(args.real_questions, args.categories, None)
        questions = load_questions(project, params)
        memory.require_memories({q.memory_id for q in questions})
        teacher_loop = replace(loop, min_rounds=args.collect_min_rounds)
        records, _ = collect_states(
            questions, memory, collection_roles(), teacher_loop, make_teacher(None, {})
        )
        source = {"real_questions": params["memories"], "categories": params["categories"]}
        source["collect_min_rounds"] = args.collect_min_rounds
    else:
        states_path, states_version = dataset_version(
            project / "data/05_model_input/planner_states.parquet", args.states_version
        )
        questions_path, questions_version = dataset_version(
            project / "data/05_model_input/synthetic_questions.parquet", args.questions_version
        )
        records = from_frame(pd.read_parquet(states_path), PlannerStateRecord)
        questions = from_frame(pd.read_parquet(questions_path), Question)
        source = {"states_version": states_version, "questions_version": questions_version}
    result = measure(records, questions, variants, memory, loop)
    write_json(
        args.out,
        {
            "benchmark": "reward_horizon",
            "project": str(project.resolve()),
            **source,
            "variants": variants,
            **result,
            "seconds": time.perf_counter() - started,
            "machine": machine(),
        },
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
