"""Every planner ever compared on the same questions, against one reference, in one table.

Each ``compare_planners.py`` run leaves its per-question rows in ``<out>.<planner>.jsonl`` next
to its ``<out>`` JSON. This script reads all of them that match ``--pattern``, keeps the planners
whose rows cover every question of the reference's rows (final recall defined) and whose run
used the reference run's loop settings, and reports each one's final and round-1 recall and its
paired final-recall difference from the reference (standard error, questions higher / lower).
Per kind of planner (by name: ``heuristic*`` the rules, ``sft*`` SFT, ``grpo*`` GRPO, anything
else e.g. weight averages ``other``) it counts the planners, their median and best difference,
and how many are ahead by more than two standard errors. The question it answers: after many
recipes and seeds, where do the trained planners sit against the rules and their SFT start?

    python benchmarks/planner_league.py --reference compare_planners_locomo_split_e2e36:heuristic36 \\
        --pattern 'compare_planners_locomo_split*' --out benchmarks/results/planner_league_locomo_split.json

Writes ``<out>`` (JSON) and ``<out>`` with ``.png`` (every planner's difference, +- two
standard errors, coloured by kind). Reads result files only; runs no planner.
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchlib import RESULTS, write_json
from compare_planners import SAME_RECALL, paired, rows_by_question

KINDS = ("heuristic", "sft", "grpo")


@dataclass
class LeagueEntry:
    """One planner's rows from one comparison, against the reference."""

    planner: str
    comparison: str  # the stem of the compare_planners JSON the rows belong to
    kind: str
    final_recall: float
    round1_recall: float
    minus_reference: dict[str, float]

    @property
    def label(self) -> str:
        return f"{self.planner} ({self.comparison.rsplit('_', 1)[-1]})"


def kind_of(planner: str) -> str:
    """The kind of planner its name says (the names compare_planners runs were given)."""
    return next((kind for kind in KINDS if planner.startswith(kind)), "other")


def split_reference(spec: str) -> tuple[str, str]:
    """``<comparison stem>:<planner>`` -> (stem, planner)."""
    stem, _, planner = spec.rpartition(":")
    if not stem or not planner:
        raise SystemExit(f"--reference {spec!r}: expected <compare_planners JSON stem>:<planner>")
    return stem, planner


def comparison_rows(comparison: Path) -> dict[str, Path]:
    """The planners whose rows sit next to a comparison's JSON: ``<stem>.<planner>.jsonl``."""
    prefix = comparison.stem + "."
    named = {
        path.name.removeprefix(prefix).removesuffix(".jsonl"): path
        for path in sorted(comparison.parent.glob(prefix + "*.jsonl"))
    }
    return {planner: path for planner, path in named.items() if "." not in planner}


def league(results: Path, pattern: str, reference: str) -> dict[str, Any]:
    """The table: every planner that covers the reference's questions under its loop settings."""
    reference_stem, reference_planner = split_reference(reference)
    reference_json = results / f"{reference_stem}.json"
    reference_path = reference_json.with_suffix(f".{reference_planner}.jsonl")
    for needed in (reference_json, reference_path):
        if not needed.exists():
            raise SystemExit(f"--reference {reference!r}: no {needed}")
    loop = json.loads(reference_json.read_text())["loop"]
    base = rows_by_question(reference_path)
    questions = sorted(q for q, row in base.items() if row["final"] is not None)
    entries: list[LeagueEntry] = []
    skipped: dict[str, str] = {}
    for comparison in sorted(results.glob(f"{pattern}.json")):
        same_loop = json.loads(comparison.read_text()).get("loop") == loop
        for planner, path in comparison_rows(comparison).items():
            key = f"{comparison.stem}:{planner}"
            if not same_loop:
                skipped[key] = "other loop settings"
                continue
            rows = rows_by_question(path)
            missing = [q for q in questions if (rows.get(q) or {}).get("final") is None]
            if missing:
                skipped[key] = f"{len(missing)} of {len(questions)} questions missing"
                continue
            entries.append(entry(planner, comparison.stem, rows, base, questions))
    entries.sort(key=lambda e: e.minus_reference["mean"])
    return {
        "benchmark": "planner_league",
        "reference": reference,
        "pattern": pattern,
        "n_questions": len(questions),
        "loop": loop,
        "by_kind": summary_by_kind(entries, reference),
        "planners": [{"label": e.label, **asdict(e)} for e in entries],
        "skipped": skipped,
    }


def entry(
    planner: str,
    comparison: str,
    rows: dict[str, dict[str, Any]],
    base: dict[str, dict[str, Any]],
    questions: list[str],
) -> LeagueEntry:
    finals = [rows[q]["final"] for q in questions]
    return LeagueEntry(
        planner=planner,
        comparison=comparison,
        kind=kind_of(planner),
        final_recall=statistics.fmean(finals),
        round1_recall=statistics.fmean(rows[q]["round1"] for q in questions),
        minus_reference=paired(finals, [base[q]["final"] for q in questions]),
    )


def summary_by_kind(entries: list[LeagueEntry], reference: str) -> dict[str, dict[str, Any]]:
    """Per kind: how many planners, their median and best difference from the reference, and
    how many are ahead (point estimate) or ahead by more than two standard errors. The reference
    itself is left out (its difference is zero by construction)."""
    reference_key = tuple(reversed(split_reference(reference)))
    summary: dict[str, dict[str, Any]] = {}
    for kind in (*KINDS, "other"):
        members = [
            e for e in entries if e.kind == kind and (e.planner, e.comparison) != reference_key
        ]
        if not members:
            continue
        means = [e.minus_reference["mean"] for e in members]
        best = max(members, key=lambda e: e.minus_reference["mean"])
        summary[kind] = {
            "planners": len(members),
            "median_minus_reference": statistics.median(means),
            "best": best.label,
            "best_minus_reference": best.minus_reference,
            "ahead": sum(m > SAME_RECALL for m in means),
            "ahead_by_two_standard_errors": sum(
                e.minus_reference["mean"] > 2 * e.minus_reference["standard_error"] for e in members
            ),
            "behind_by_two_standard_errors": sum(
                e.minus_reference["mean"] < -2 * e.minus_reference["standard_error"]
                for e in members
            ),
        }
    return summary


def plot_league(result: dict[str, Any], path: Path) -> Path:
    """One row per planner, sorted: its paired difference from the reference, +- two standard
    errors, coloured by kind."""
    import matplotlib

    matplotlib.use("Agg")  # headless: the figure is a file
    import matplotlib.pyplot as plt

    planners = result["planners"]
    colours = {"heuristic": "tab:grey", "sft": "tab:orange", "grpo": "tab:blue"}
    fig, axis = plt.subplots(figsize=(8, max(4, 0.19 * len(planners))))
    for row, planner in enumerate(planners):
        pair = planner["minus_reference"]
        axis.errorbar(
            100 * pair["mean"],
            row,
            xerr=200 * pair["standard_error"],
            fmt="o",
            markersize=3,
            capsize=2,
            color=colours.get(planner["kind"], "tab:green"),
        )
    axis.axvline(0, color="black", linewidth=0.8)
    axis.set_yticks(range(len(planners)), [p["label"] for p in planners], fontsize=6)
    axis.set_xlabel(
        f"final recall - {result['reference'].rpartition(':')[2]} (points, +- 2 standard errors)"
    )
    handles = [
        plt.Line2D([], [], color=colour, marker="o", linestyle="", label=kind)
        for kind, colour in (*colours.items(), ("other", "tab:green"))
    ]
    axis.legend(handles=handles, loc="lower right", fontsize=8)
    axis.set_title(f"{len(planners)} planners on the same {result['n_questions']} questions")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder of the results")
    parser.add_argument(
        "--pattern", default="compare_planners*", help="glob of the comparisons' JSON stems"
    )
    parser.add_argument(
        "--reference",
        required=True,
        help="<comparison JSON stem>:<planner>, e.g. compare_planners_locomo_split_e2e36:heuristic36",
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "planner_league.json")
    args = parser.parse_args()
    result = league(args.results, args.pattern, args.reference)
    write_json(args.out, result)
    print(f"figure: {plot_league(result, args.out.with_suffix('.png'))}")
    print(json.dumps(result["by_kind"], indent=1))


if __name__ == "__main__":
    main()
