"""Planners side by side on the same questions: round-1 and final evidence recall, paired.

The question the train pipeline has to answer: does GRPO make the planner better than it was
before GRPO (after SFT) and better than the heuristic planner, at the same round budget and k?
This script runs MERA with each planner over the same questions of a built memory (the project's
own loop, roles and default loop settings from conf/base/parameters_evaluate.yml; the trained
planners' prompt settings come from their metadata, as in ``kedro run --pipeline=evaluate``) and
reports each planner's means, its means per question category, and the paired difference of
every pair with its standard error, in ``<out>`` (JSON) and ``<out>`` with ``.png`` (bars per
planner, and the paired final-recall differences from ``--reference``, default the first
planner, with +- one standard error).

Per-question results are appended to ``<out>.<planner>.jsonl`` as they finish, so a stopped
run resumes where it stopped and two planners can run in two processes (one core each):

    # the memory of locomo_dev5 (or any LoCoMo file), built once in a project folder
    kedro run --pipelines=ingest,memory --params="source.path=<locomo_dev5.json>"
    python benchmarks/compare_planners.py --project . --memories conv-42,conv-43 \\
        --planner heuristic --planner sft=data/06_models/planner_sft/<version> \\
        --planner grpo=data/06_models/planner/<version>
    # or one planner per process, then: --summarise-only with all --planner flags;
    # one planner in two processes: --shard 0/2 and --shard 1/2 (each takes every 2nd question)
    # seeds of one configuration: --average grpo=grpo_s0+grpo_s1 adds their per-question mean
    # (with --reference, "agreement" counts the questions where k seeds are higher, none lower);
    # seeds from different starts: --average starts=sft_a+sft_a+sft_b (a member may repeat), so
    # seeds minus starts is the mean of each seed's gain over its own start
    # --best-of oracle=heuristic+grpo adds the better of the two per question (headroom, not a
    # planner); every paired difference also counts the questions a planner is higher and lower
    # planners scored in an earlier comparison of the same memory and loop:
    #   --summarise-only --results-from <its --out> (joined on the questions all planners have)
    # --complement NAME: that trained planner's intents are followed by the heuristic's
    # --loop min_rounds=2: other loop settings for every planner (recorded in the result's "loop")
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from benchlib import RESULTS, dataset_version, machine, write_json

from mera_pipelines.core import evaluation
from mera_pipelines.core.embedding import load_embedder
from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.loop import LoopSettings, run_mera
from mera_pipelines.core.memory import MemoryIndex
from mera_pipelines.core.records import Question, from_frame
from mera_pipelines.core.training.model_store import check_not_trained_on, read_model_folder

CONF = Path(__file__).resolve().parents[1] / "conf" / "base" / "parameters_evaluate.yml"


def evaluation_params(
    memories: str | None, categories: str | None, max_questions: int | None
) -> dict[str, Any]:
    """conf/base's evaluation parameters with the question selection of the command line."""
    params = yaml.safe_load(CONF.read_text())["evaluation"]
    params.update(
        memories=memories.split(",") if memories else None,
        categories=categories.split(",") if categories else None,
        max_questions=max_questions,
    )
    return params


def open_memory(project: Path, dtype: str) -> MemoryIndex:
    """The project's built LanceDB memory with the packaged embedder for queries."""
    uri = project / "data" / "05_model_input" / "memory.lancedb"
    if not uri.is_dir():  # opening it would create an empty table and find nothing
        raise SystemExit(f"{uri}: no memory; build it first (see this script's docstring)")
    return MemoryIndex(str(uri), "facts", load_embedder(dtype=dtype))


def load_questions(project: Path, params: dict[str, Any]) -> list[Question]:
    frame = pd.read_parquet(
        dataset_version(project / "data" / "03_primary" / "questions.parquet")[0]
    )
    return evaluation.select_questions(from_frame(frame, Question), params)


HEURISTIC_VARIANT = "heuristic:"


def parse_planner(spec: str, summarise_only: bool = False) -> tuple[str, str | None]:
    """``heuristic``, ``name=<model folder>`` or ``name=heuristic:key=value,...`` (the heuristic
    planner with those settings, e.g. ``topic_labels=false``); a bare name when only
    summarising results."""
    if spec == "heuristic" or (summarise_only and "=" not in spec and spec):
        return spec, None
    name, sep, folder = spec.partition("=")
    if not sep or not name or not folder:
        raise SystemExit(
            f"--planner {spec!r}: use 'heuristic', 'name=<model folder>' or "
            "'name=heuristic:key=value,...'"
        )
    return name, folder


def heuristic_settings(spec: str) -> dict[str, Any]:
    """``key=value,...`` after ``heuristic:`` as HeuristicPlanner settings (YAML values)."""
    return key_values(spec, f"--planner ...=heuristic:{spec}")


def key_values(spec: str, flag: str) -> dict[str, Any]:
    """``key=value,...`` as a mapping of YAML values; ``flag`` names the option in errors."""
    settings = {}
    for item in spec.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"{flag}: use key=value,...")
        settings[key.strip()] = yaml.safe_load(value)
    return settings


def override_loop(params: dict[str, Any], spec: str | None) -> None:
    """``--loop key=value,...``: loop settings other than conf/base's for every planner
    (e.g. ``min_rounds=2``); checked against LoopSettings before any planner runs."""
    if not spec:
        return
    loop = {**params["loop"], **key_values(spec, f"--loop {spec}")}
    try:
        LoopSettings.from_params(loop)
    except ConfigError as exc:
        raise SystemExit(f"--loop {spec}: {exc}") from exc
    params["loop"] = loop


def build_roles(
    folder: str | None, questions: list[Question], threads: int, complement: bool = False
):
    if complement and (folder is None or folder.startswith(HEURISTIC_VARIANT)):
        raise SystemExit("--complement names a planner that is not a trained model folder")
    kinds = {"seeder": "heuristic", "planner": "heuristic", "verifier": "heuristic"}
    role_params: dict[str, dict[str, Any]] = {}
    backends = evaluation.RoleBackends()
    if folder is not None and folder.startswith(HEURISTIC_VARIANT):
        role_params["planner"] = heuristic_settings(folder[len(HEURISTIC_VARIANT) :])
    elif folder is not None:
        model = read_model_folder(folder)
        check_not_trained_on(model, {q.memory_id for q in questions})
        backends.planner = evaluation.use_trained_planner(
            model, {"torch_threads": threads, "max_new_tokens": 96}, kinds, role_params
        )
        if complement:  # as if trained with training.prompt.complement
            role_params["planner"]["complement"] = True
    return evaluation.build_roles(kinds, backends, role_params)


def shard_of(questions: list[Question], spec: str | None) -> list[Question]:
    """Every N-th question from the K-th for ``K/N``; all of them without a spec. The shards'
    processes append to the same JSONL file, one line (one write) per question."""
    if spec is None:
        return questions
    index, sep, count = spec.partition("/")
    if not sep or not index.isdigit() or not count.isdigit() or int(index) >= int(count):
        raise SystemExit(f"--shard {spec!r}: use K/N with 0 <= K < N, e.g. 0/2")
    return questions[int(index) :: int(count)]


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The per-question rows of one planner's ``<out>.<planner>.jsonl``."""
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def rows_by_question(path: Path) -> dict[str, dict[str, Any]]:
    """A planner's rows keyed by question id."""
    return {row["question_id"]: row for row in read_rows(path)}


def done_ids(path: Path) -> set[str]:
    return {row["question_id"] for row in read_rows(path)} if path.exists() else set()


def run_planner(
    name: str,
    folder: str | None,
    questions: list[Question],
    memory: MemoryIndex,
    settings: LoopSettings,
    out: Path,
    threads: int,
    complement: bool = False,
) -> None:
    path = out.with_suffix(f".{name}.jsonl")
    finished = done_ids(path)
    todo = [q for q in questions if q.question_id not in finished]
    print(f"[{name}] {len(finished)} done, {len(todo)} to go", flush=True)
    roles = build_roles(folder, questions, threads, complement)
    with path.open("a") as sink:
        for number, question in enumerate(todo, 1):
            started = time.perf_counter()
            trajectory = run_mera(question, memory, roles, settings)
            usage = trajectory.usage.get("planner")
            record = {
                "question_id": question.question_id,
                "round1": trajectory.rounds[0].recall_retrieved,
                "round1_queries": len(trajectory.rounds[0].queries),
                "final": trajectory.rounds[-1].recall_retrieved,
                "rounds": len(trajectory.rounds),
                "turns": len(trajectory.viewed_turn_ids),
                "planner_usage": vars(usage) if usage else None,
                "seconds": time.perf_counter() - started,
            }
            sink.write(json.dumps(record) + "\n")
            sink.flush()
            if number % 25 == 0:
                print(f"[{name}] {number}/{len(todo)}", flush=True)


# per-question recalls closer than this count as equal (they are means of a few 0/1 hits)
SAME_RECALL = 1e-9


def paired(a: list[float], b: list[float]) -> dict[str, float]:
    """Mean of a - b and its standard error (paired over the same questions), and on how many
    questions a is higher and lower: a mean gain made on few questions is all the planners'
    disagreement, and the standard error cannot shrink below what those few questions allow."""
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    n = len(diffs)
    mean = sum(diffs) / n
    var = sum((d - mean) ** 2 for d in diffs) / (n - 1) if n > 1 else 0.0
    return {
        "mean": mean,
        "standard_error": math.sqrt(var / n) if n else 0.0,
        "higher": sum(d > SAME_RECALL for d in diffs),
        "lower": sum(d < -SAME_RECALL for d in diffs),
    }


def parse_members(spec: str, planners: list[str], flag: str = "--average") -> tuple[str, list[str]]:
    """``NAME=a+b+c``: a row made of planners a, b, c per question (``--average``: their mean,
    e.g. seeds of one configuration; ``--best-of``: the best of them); each member must also be
    a --planner."""
    name, _, members = spec.partition("=")
    names = [m for m in members.split("+") if m]
    if not name or len(names) < 2:
        raise SystemExit(f"{flag} {spec!r}: expected NAME=a+b (two or more --planner names)")
    unknown = [m for m in names if m not in planners]
    if unknown:
        raise SystemExit(f"{flag} {spec!r}: {unknown} are not --planner names {planners}")
    if name in planners:
        raise SystemExit(f"{flag} {spec!r}: {name!r} is already a --planner name")
    return name, names


def finished_by_all(member_rows: list[dict[str, dict[str, Any]]]) -> set[str]:
    """The questions every member finished with gold evidence (final recall defined)."""
    return set.intersection(
        *({q for q, r in rows.items() if r["final"] is not None} for rows in member_rows)
    )


def average_rows(member_rows: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per question, the members' mean recall, rounds, turns, seconds and parse failures; only
    questions every member finished with gold evidence."""
    averaged = {}
    for qid in finished_by_all(member_rows):
        records = [rows[qid] for rows in member_rows]
        mean = {
            key: sum(r[key] for r in records) / len(records)
            for key in ("round1", "final", "rounds", "turns", "seconds")
        }
        failures = sum((r["planner_usage"] or {}).get("parse_failures", 0) for r in records)
        averaged[qid] = {
            "question_id": qid,
            **mean,
            "planner_usage": {"parse_failures": failures / len(records)},
        }
    return averaged


def best_rows(member_rows: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per question, the record of the member with the highest final recall (the first on a
    tie); only questions every member finished with gold evidence. Not a planner: what choosing
    the right planner for each question would reach, the headroom their disagreements hold."""
    return {
        qid: max((rows[qid] for rows in member_rows), key=lambda record: record["final"])
        for qid in finished_by_all(member_rows)
    }


def member_agreement(
    member_rows: list[dict[str, dict[str, Any]]],
    reference_rows: dict[str, dict[str, Any]],
    common: list[str],
) -> dict[str, Any]:
    """Whether an average's gain over the reference is the members' shared behaviour or their
    scatter: per question, how many members are higher and lower in final recall.
    ``higher_only[k]`` counts the questions where k members are higher and none lower (and
    ``lower_only`` the reverse); ``mixed`` some of each; ``same`` every member level."""
    higher_only: dict[str, int] = {}
    lower_only: dict[str, int] = {}
    mixed = same = 0
    for qid in common:
        diffs = [rows[qid]["final"] - reference_rows[qid]["final"] for rows in member_rows]
        up = sum(d > SAME_RECALL for d in diffs)
        down = sum(d < -SAME_RECALL for d in diffs)
        if up and down:
            mixed += 1
        elif up:
            higher_only[str(up)] = higher_only.get(str(up), 0) + 1
        elif down:
            lower_only[str(down)] = lower_only.get(str(down), 0) + 1
        else:
            same += 1
    return {
        "members": len(member_rows),
        "higher_only": dict(sorted(higher_only.items())),
        "lower_only": dict(sorted(lower_only.items())),
        "mixed": mixed,
        "same": same,
    }


def results_file(name: str, out: Path, results_from: list[Path] = ()) -> Path | None:
    """A planner's per-question results: next to ``out``, else next to the first of the other
    comparisons (``--results-from``) that has them; None when there are none."""
    for base in (out, *results_from):
        path = base.with_suffix(f".{name}.jsonl")
        if path.exists():
            return path
    return None


def summarise(
    names: list[str],
    questions: list[Question],
    out: Path,
    averages: dict[str, list[str]] | None = None,
    results_from: list[Path] = (),
    best_of: dict[str, list[str]] | None = None,
    reference: str | None = None,
) -> dict[str, Any]:
    files = {name: results_file(name, out, results_from) for name in names}
    missing = [name for name, path in files.items() if path is None]
    if missing:
        raise SystemExit(f"No results for {missing} next to {out}: run those planners first")
    rows = {name: rows_by_question(path) for name, path in files.items()}
    for name, members in (averages or {}).items():
        rows[name] = average_rows([rows[m] for m in members])
    for name, members in (best_of or {}).items():
        rows[name] = best_rows([rows[m] for m in members])
    names = [*names, *(averages or {}), *(best_of or {})]
    # Recall is defined for questions with gold evidence; only those every planner finished.
    common = [
        q.question_id
        for q in questions
        if all(
            q.question_id in rows[n] and rows[n][q.question_id]["final"] is not None for n in names
        )
    ]
    if not common:
        raise SystemExit("No question has results from every planner yet")
    result: dict[str, Any] = {"n_questions": len(common), "planners": {}, "paired_final": {}}
    for name in names:
        records = [rows[name][qid] for qid in common]
        result["planners"][name] = {
            "round1_recall": sum(r["round1"] for r in records) / len(records),
            "final_recall": sum(r["final"] for r in records) / len(records),
            "mean_rounds": sum(r["rounds"] for r in records) / len(records),
            "mean_turns": sum(r["turns"] for r in records) / len(records),
            "median_seconds_per_question": sorted(r["seconds"] for r in records)[len(records) // 2],
            "parse_failures": sum(
                (r["planner_usage"] or {}).get("parse_failures", 0) for r in records
            ),
            **round_one_query_counts(records),
        }
    compared = set(common)
    result["by_category"] = recall_by_category(
        rows, names, [q for q in questions if q.question_id in compared]
    )
    if reference in rows:
        # how each average's members agree against the reference (--average of seeds)
        result["agreement"] = {
            name: member_agreement([rows[m] for m in members], rows[reference], common)
            for name, members in (averages or {}).items()
            if reference not in members
        }
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            for key in ("final", "round1"):
                result[f"paired_{key}"] = result.get(f"paired_{key}", {})
                result[f"paired_{key}"][f"{second}_minus_{first}"] = paired(
                    [rows[second][q][key] for q in common], [rows[first][q][key] for q in common]
                )
    return result


def round_one_query_counts(records: list[dict[str, Any]]) -> dict[str, Any]:
    """How many queries round 1 asked: the mean and the share of single-query plans (GRPO
    planners learnt to ask one; twenty-eighth session). None when some record lacks the count
    (results written before it was recorded; average rows)."""
    counts = [r.get("round1_queries") for r in records]
    if not counts or None in counts:
        return {"round1_mean_queries": None, "round1_single_query_share": None}
    return {
        "round1_mean_queries": sum(counts) / len(counts),
        "round1_single_query_share": sum(count == 1 for count in counts) / len(counts),
    }


def recall_by_category(
    rows: dict[str, dict[str, dict[str, Any]]], names: list[str], questions: list[Question]
) -> dict[str, dict[str, Any]]:
    """Per question category (LoCoMo: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop):
    how many of the compared questions it has and each planner's mean round-1 and final recall,
    so a gain or a loss can be traced to the kind of question it comes from."""
    by_category: dict[str, dict[str, Any]] = {}
    for category in sorted({q.category for q in questions}):
        ids = [q.question_id for q in questions if q.category == category]
        by_category[category] = {"n_questions": len(ids)}
        for key in ("round1", "final"):
            by_category[category][f"{key}_recall"] = {
                name: sum(rows[name][qid][key] for qid in ids) / len(ids) for name in names
            }
    return by_category


def final_recall_gaps(result: dict[str, Any], reference: str) -> dict[str, tuple[float, float]]:
    """Every other planner's paired final-recall difference from ``reference``: (mean, standard
    error). The summary stores each pair once, later minus earlier in the --planner order."""
    names = list(result["planners"])
    if reference not in names:
        raise SystemExit(f"--reference {reference!r} is not one of the planners {names}")
    gaps = {}
    for name in names:
        if name == reference:
            continue
        pair = result["paired_final"].get(f"{name}_minus_{reference}")
        sign = 1
        if pair is None:
            pair, sign = result["paired_final"][f"{reference}_minus_{name}"], -1
        gaps[name] = (sign * pair["mean"], pair["standard_error"])
    return gaps


def plot_summary(result: dict[str, Any], path: Path, reference: str | None = None) -> Path:
    """Round-1 and final recall per planner, and every other planner's paired final-recall
    difference from ``reference`` (default the first; +- one standard error): the figure people
    look at instead of the JSON."""
    import matplotlib

    matplotlib.use("Agg")  # headless: the figure is a file
    import matplotlib.pyplot as plt

    names = list(result["planners"])
    reference = reference or names[0]
    # a wider figure as planners are added, so their names stay readable
    fig, (bars, diffs) = plt.subplots(1, 2, figsize=(max(11, 1.6 * len(names)), 4.5))
    width = 0.38
    for offset, key, label in (
        (-width / 2, "round1_recall", "round 1"),
        (width / 2, "final_recall", "final"),
    ):
        values = [result["planners"][n][key] for n in names]
        drawn = bars.bar([i + offset for i in range(len(names))], values, width, label=label)
        bars.bar_label(drawn, fmt="%.3f", fontsize=7)
    bars.set_xticks(range(len(names)), names, rotation=30, ha="right")
    bars.set_ylim(0, 1)
    bars.set_ylabel("evidence recall")
    bars.set_title(f"{result['n_questions']} questions")
    bars.legend(loc="lower right")
    gaps = final_recall_gaps(result, reference)
    others = list(gaps)
    means = [100 * mean for mean, _ in gaps.values()]
    errors = [100 * error for _, error in gaps.values()]
    diffs.errorbar(range(len(others)), means, yerr=errors, fmt="o", capsize=4)
    diffs.axhline(0, color="grey", linewidth=0.8)
    if "heuristic" in gaps:  # the learned planners' other bar: level with the built-in planner
        level = 100 * gaps["heuristic"][0]
        diffs.axhline(level, color="grey", linestyle="--", linewidth=0.8, label="heuristic")
        diffs.legend(loc="lower right", fontsize=8)
    diffs.set_xticks(range(len(others)), others, rotation=30, ha="right")
    diffs.set_ylabel(f"final recall - {reference} (points)")
    diffs.set_title("paired difference, +- 1 standard error")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", default=".", help="a Kedro project with a built memory")
    parser.add_argument("--planner", action="append", required=True)
    parser.add_argument("--memories", default=None, help="comma list; default all")
    parser.add_argument("--categories", default="1,2,3,4")
    parser.add_argument("--max-questions", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process")
    parser.add_argument(
        "--shard",
        default=None,
        help="K/N: run only every N-th question from the K-th (several processes, one planner)",
    )
    parser.add_argument(
        "--dtype",
        default="auto",
        choices=["auto", "float32", "bfloat16"],
        help="query embedding dtype (embedding.dtype); match the earlier runs you compare with",
    )
    parser.add_argument(
        "--average",
        action="append",
        default=[],
        help="NAME=a+b: also summarise the per-question mean of planners a and b (e.g. seeds; "
        "a member may repeat, e.g. the SFT start of each seed: start_a+start_a+start_b)",
    )
    parser.add_argument(
        "--best-of",
        action="append",
        default=[],
        help="NAME=a+b: also summarise the better of planners a and b per question (an upper "
        "bound of choosing between them, not a planner)",
    )
    parser.add_argument(
        "--complement",
        action="append",
        default=[],
        help="NAME: that trained planner searches with the heuristic's intents after its own, "
        "as one trained with training.prompt.complement does",
    )
    parser.add_argument(
        "--loop",
        default=None,
        help="key=value,...: loop settings other than conf/base's, for every planner (results "
        "of other loop settings must not be joined with --results-from)",
    )
    parser.add_argument("--summarise-only", action="store_true")
    parser.add_argument(
        "--results-from",
        action="append",
        type=Path,
        default=[],
        help="another comparison's --out: planners with no results next to --out are read from "
        "there (only for runs on the same memory, loop settings and questions)",
    )
    parser.add_argument(
        "--reference", default=None, help="the figure's paired differences are from this planner"
    )
    parser.add_argument("--out", default=str(RESULTS / "compare_planners.json"))
    args = parser.parse_args()

    project = Path(args.project)
    params = evaluation_params(args.memories, args.categories, args.max_questions)
    override_loop(params, args.loop)
    questions = load_questions(project, params)
    planners = [parse_planner(spec, args.summarise_only) for spec in args.planner]
    planner_names = [name for name, _ in planners]
    averages = dict(parse_members(spec, planner_names) for spec in args.average)
    best_of = dict(parse_members(spec, planner_names, "--best-of") for spec in args.best_of)
    if args.reference and args.reference not in {**dict(planners), **averages, **best_of}:
        # checked before any planner runs, not after an hour of evaluation
        raise SystemExit(
            f"--reference {args.reference!r} is not a --planner, --average or --best-of name"
        )
    unknown = sorted(set(args.complement) - set(planner_names))
    if unknown:
        raise SystemExit(f"--complement {unknown}: not a --planner name")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if not args.summarise_only:
        settings = LoopSettings.from_params(params["loop"])
        memory = open_memory(project, args.dtype)
        memory.require_memories({q.memory_id for q in questions})
        shard = shard_of(questions, args.shard)
        for name, folder in planners:
            complement = name in args.complement
            run_planner(name, folder, shard, memory, settings, out, args.threads, complement)
    result = {
        "benchmark": "compare_planners",
        "machine": machine(),
        "selection": {k: params[k] for k in ("memories", "categories", "max_questions")},
        "loop": params["loop"],
        "planner_folders": dict(planners),
        "averages": averages,
        "best_of": best_of,
        "results_from": [str(path) for path in args.results_from],
        **summarise(
            planner_names, questions, out, averages, args.results_from, best_of, args.reference
        ),
    }
    write_json(out, result)
    print(f"figure: {plot_summary(result, out.with_suffix('.png'), args.reference)}")
    shown = ("n_questions", "planners", "paired_final", "by_category")
    print(json.dumps({k: result[k] for k in shown}, indent=1))


if __name__ == "__main__":
    main()
