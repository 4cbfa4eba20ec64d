"""Which synthesised questions the training states come from, stage by stage.

Reads one train run's versioned datasets from a project: the synthetic questions, the collected
planner states, and filtering's rollouts and retained states. Per question kind (single-hop,
temporal, multi-hop, and the multi-hop questions the category aggregate wrote, told apart by
``category_of``) it counts the questions, the states collected and the teacher's recall at
each round, and what filtering did with the states it drew: every rollout recovered all the
missing evidence ("all_full"), none ("all_zero"), only unparseable ones differed and
``training.filtering.drop_format_only`` dropped the state ("format_only"), or they disagreed
and it was kept ("retained"). For the drawn
states the teacher went on from ("against_teacher"), it compares the best of the group's
rollouts with the teacher's own plan, whose recovered share is read off the next round's
found turns: how often sampling the planner finds a plan better than the one it imitated.
It also counts the rollouts whose queries are the teacher's own ("rollouts_as_teacher"): with
the draft prompt (``training.prompt.draft``) the teacher's plan is in the prompt, and a planner
that only copies it gives GRPO nothing to compare.

    python benchmarks/state_mix.py --project <project> --out benchmarks/results/state_mix_x.json
    # other versions than the newest: --questions-version, --states-version, --filter-version
    # other filterings' samples on the same states (sample_spread): --compare-filter NAME=VERSION

``sample_spread`` says how varied and valid the samples are: distinct parseable plans per state,
teacher copies, empty plans and broken replies, and the states whose samples recover different
shares of the missing evidence.

The filter version names both the rollouts and the retained states (one filtering run writes
both under the same version).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pandas as pd
from benchlib import dataset_version, write_json

from mera_pipelines.core.training.reward import RewardSettings, parse_plan_output
from mera_pipelines.core.training.rollouts import group_verdict
from mera_pipelines.core.training.synthesis import category_of

DATASETS = {
    "questions": "data/05_model_input/synthetic_questions.parquet",
    "states": "data/05_model_input/planner_states.parquet",
    "retained": "data/05_model_input/training_states.parquet",
    "rollouts": "data/07_model_output/rollouts.parquet",
}


def read_version(project: Path, dataset: str, version: str | None) -> tuple[pd.DataFrame, str]:
    path, chosen = dataset_version(project / DATASETS[dataset], version)
    return pd.read_parquet(path), chosen


def question_kind(question: str, qa_type: str) -> str:
    """The question's type; multi-hop ones the category aggregate wrote are told apart. Other
    types (and annotated questions' source categories) stay as they are, even when their
    wording happens to match a category template."""
    if qa_type == "multi_hop" and category_of(question):
        return "multi_hop_category"
    return qa_type


def teacher_recovered(states: pd.DataFrame) -> pd.Series:
    """Per state with a next round: the share of its missing gold turns the teacher's plan found.

    A question's state of round r + 1 holds what was found after the teacher's plan of round r
    ran. Last rounds and states with nothing missing are left out.
    """
    found_next = {
        (q, r - 1): set(found)
        for q, r, found in zip(
            states["question_id"], states["round_index"], states["found_turn_ids"], strict=True
        )
    }
    shares = {}
    for state in states.itertuples():
        missing = set(state.gold_turn_ids) - set(state.found_turn_ids)
        after = found_next.get((state.question_id, state.round_index))
        if missing and after is not None:
            shares[state.state_id] = len(after & missing) / len(missing)
    return pd.Series(shares, dtype=float)


def against_teacher(best: pd.Series, teacher: pd.Series) -> dict[str, Any]:
    both = pd.concat({"best": best, "teacher": teacher}, axis=1, join="inner")
    return {
        "states": len(both),
        "teacher_recovered_mean": round(float(both["teacher"].mean()), 4) if len(both) else None,
        "best_rollout_recovered_mean": round(float(both["best"].mean()), 4) if len(both) else None,
        "best_rollout_better": int((both["best"] > both["teacher"]).sum()),
        "teacher_better": int((both["best"] < both["teacher"]).sum()),
    }


def plan_queries(text: str) -> tuple[str, ...] | None:
    """A plan's queries as the reward reads them (None: unparseable)."""
    plan = parse_plan_output(text, RewardSettings())
    return None if plan.parse_failed else tuple(i.query_text() for i in plan.intents)


def as_teacher(rollouts: pd.DataFrame, states: pd.DataFrame) -> pd.Series:
    """Per rollout: whether it asks exactly the teacher's queries for its state."""
    teacher = dict(zip(states["state_id"], states["teacher_output"].map(plan_queries), strict=True))
    return pd.Series(
        [
            queries is not None and queries == teacher.get(state_id)
            for state_id, queries in zip(
                rollouts["state_id"], rollouts["completion"].map(plan_queries), strict=True
            )
        ],
        index=rollouts.index,
        dtype=bool,
    )


def group_verdicts(rollouts: pd.DataFrame) -> pd.Series:
    """Per state: ``group_verdict`` of its rollouts (older rollouts without ``parse_failed``
    count every sample as parsed)."""
    failed = (
        rollouts["parse_failed"]
        if "parse_failed" in rollouts.columns
        else pd.Series(False, index=rollouts.index)
    )
    return pd.Series(
        {
            state_id: group_verdict(group["recovered_share"].tolist(), failed[group.index].tolist())
            for state_id, group in rollouts.groupby("state_id")
        },
        dtype=object,
    )


def sample_spread(rollouts: pd.DataFrame, states: pd.DataFrame) -> dict[str, Any]:
    """How varied and how valid a filtering's samples are: distinct parseable plans per state
    (queries as the reward reads them), copies of the teacher's queries, empty plans (the
    heuristic's "nothing to ask", scored as unparseable) apart from broken replies, and the
    states whose samples recover different shares (the only ones where GRPO can learn which
    plan finds more). Of those, ``states_with_unequal_parsed_recovery`` counts the states
    where the parsed samples differ (``group_verdict`` "search"): in the others only the
    unparseable samples differ, and GRPO learns the reply format there, not the search."""
    queries = rollouts["completion"].map(plan_queries)
    empty = rollouts["completion"].map(
        lambda text: text.replace(" ", "").startswith('{"intents":[]}')
    )
    distinct = queries.dropna().groupby(rollouts["state_id"]).nunique()
    spread = rollouts.groupby("state_id")["recovered_share"].nunique()
    return {
        "states": int(rollouts["state_id"].nunique()),
        "rollouts": len(rollouts),
        "distinct_parsed_plans_per_state": round(
            float(distinct.reindex(spread.index, fill_value=0).mean()), 3
        ),
        "as_teacher": int(as_teacher(rollouts, states).sum()),
        "empty_plans": int(empty.sum()),
        "broken": int((queries.isna() & ~empty).sum()),
        "mean_recovered": round(float(rollouts["recovered_share"].mean()), 4),
        "states_with_unequal_recovery": int((spread > 1).sum()),
        "states_with_unequal_parsed_recovery": int((group_verdicts(rollouts) == "search").sum()),
    }


def state_mix(
    questions: pd.DataFrame, states: pd.DataFrame, rollouts: pd.DataFrame, retained: pd.DataFrame
) -> dict[str, Any]:
    kinds = dict(
        zip(
            questions["question_id"],
            map(question_kind, questions["question"], questions["category"]),
            strict=True,
        )
    )
    states = states.assign(
        kind=states["question_id"].map(kinds),
        recall=[
            len(set(f) & set(g)) / len(g)
            for f, g in zip(states["found_turn_ids"], states["gold_turn_ids"], strict=True)
        ],
    )
    recovered = rollouts.groupby("state_id")["recovered_share"].agg(["min", "max"])
    drawn = states[states["state_id"].isin(recovered.index)].set_index("state_id")
    # what filtering did with each drawn state: kept, or dropped for its group's verdict
    # ("format_only" only under training.filtering.drop_format_only)
    verdicts = group_verdicts(rollouts)
    kept_ids = set(retained["state_id"])
    fate = pd.Series(
        ["retained" if i in kept_ids else verdicts[i] for i in drawn.index],
        index=drawn.index,
        dtype=object,
    )
    kept = states[states["state_id"].isin(retained["state_id"])]
    teacher = teacher_recovered(states)
    copies = (
        as_teacher(rollouts, states)
        if "completion" in rollouts.columns and "teacher_output" in states.columns
        else None
    )
    out: dict[str, Any] = {}
    for kind, group in states.groupby("kind"):
        in_filtering = fate[fate.index.isin(group["state_id"])]
        out[str(kind)] = {
            "questions": int(group["question_id"].nunique()),
            "states": len(group),
            "states_with_missing_evidence": int((group["recall"] < 1).sum()),
            # found before the planner call of round r: the teacher's recall after r - 1 rounds
            "recall_before_round": {
                int(r): round(float(v), 4)
                for r, v in group.groupby("round_index")["recall"].mean().items()
            },
            "into_filtering": len(in_filtering),
            **{
                name: int((in_filtering == name).sum())
                for name in ("all_full", "retained", "all_zero", "format_only")
            },
            "retained_by_round": {
                int(r): int(n)
                for r, n in kept[kept["kind"] == kind].groupby("round_index").size().items()
            },
            "against_teacher": against_teacher(
                recovered["max"][recovered.index.isin(group["state_id"])], teacher
            ),
        }
        if copies is not None:
            of_kind = rollouts["state_id"].isin(group["state_id"])
            out[str(kind)]["rollouts"] = int(of_kind.sum())
            out[str(kind)]["rollouts_as_teacher"] = int(copies[of_kind].sum())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", required=True, type=Path)
    parser.add_argument("--questions-version")
    parser.add_argument("--states-version")
    parser.add_argument("--filter-version")
    parser.add_argument(
        "--compare-filter",
        action="append",
        default=[],
        metavar="NAME=VERSION",
        help="another filtering's rollouts, restricted to the states of --filter-version: "
        "sample_spread side by side (repeatable)",
    )
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    questions, questions_version = read_version(args.project, "questions", args.questions_version)
    states, states_version = read_version(args.project, "states", args.states_version)
    rollouts, filter_version = read_version(args.project, "rollouts", args.filter_version)
    retained, _ = read_version(args.project, "retained", filter_version)
    result = {
        "benchmark": "state_mix",
        "versions": {
            "questions": questions_version,
            "states": states_version,
            "filter": filter_version,
        },
        "by_kind": state_mix(questions, states, rollouts, retained),
    }
    if "completion" in rollouts.columns and "teacher_output" in states.columns:
        result["sample_spread"] = {"this": sample_spread(rollouts, states)}
    elif args.compare_filter:
        raise SystemExit("--compare-filter needs rollouts with completions and teacher plans")
    for spec in args.compare_filter:
        name, sep, version = spec.partition("=")
        if not sep or not name or not version:
            raise SystemExit(f"--compare-filter {spec!r}: expected NAME=VERSION")
        other, _ = read_version(args.project, "rollouts", version)
        same = other[other["state_id"].isin(rollouts["state_id"])]
        result["sample_spread"][name] = {"version": version, **sample_spread(same, states)}
    write_json(args.out, result)
    print(result)


if __name__ == "__main__":
    main()
