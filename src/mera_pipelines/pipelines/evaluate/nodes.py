"""Thin nodes over ``core.evaluation``; plots are built here from the summary and the rows."""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless: figures are files and MLflow artifacts
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from mera_pipelines.core import evaluation  # noqa: E402
from mera_pipelines.core.llm import LLMBackend  # noqa: E402
from mera_pipelines.core.loop import LoopSettings  # noqa: E402
from mera_pipelines.core.memory import MemoryIndex  # noqa: E402
from mera_pipelines.core.records import Question, Turn, from_frame  # noqa: E402
from mera_pipelines.core.roles.judge import make_judge  # noqa: E402
from mera_pipelines.core.training.model_store import (  # noqa: E402
    PlannerModelStore,
    check_not_trained_on,
    resolve_planner,
)


def evaluate_systems(
    questions: pd.DataFrame,
    turns: pd.DataFrame,
    memory: MemoryIndex,
    seeder_llm: LLMBackend | None,
    planner_llm: LLMBackend | None,
    verifier_llm: LLMBackend | None,
    answerer_llm: LLMBackend | None,
    judge_llm: LLMBackend | None,
    trained_planners: PlannerModelStore,
    source: dict[str, Any],
    params: dict[str, Any],
) -> tuple[list[dict[str, Any]], pd.DataFrame, pd.DataFrame, dict[str, Any], dict[str, Any]]:
    """Run every system, score it, and return trajectories, per-question rows, the summary."""
    selected = evaluation.select_questions(from_frame(questions, Question), params)
    kinds = dict(params["roles"])
    role_params = {k: dict(v or {}) for k, v in (params.get("role_params") or {}).items()}
    notes: list[str] = []
    if params.get("planner_model"):
        planner_llm = _trained_planner(
            str(params["planner_model"]), trained_planners, selected, params, kinds, role_params
        )
        notes.append(f"planner: trained planner at {planner_llm.path}")
    backends = evaluation.RoleBackends(
        seeder_llm, planner_llm, verifier_llm, answerer_llm, judge_llm
    )
    roles = evaluation.build_roles(kinds, backends, role_params)
    settings = LoopSettings.from_params(params["loop"])
    concurrency = int(params.get("concurrency", 1))
    runs, run_notes = evaluation.run_systems(
        selected,
        from_frame(turns, Turn),
        memory,
        roles,
        settings,
        list(params["systems"]),
        naive_k=params.get("naive_rag_k", "match"),
        concurrency=concurrency,
        answerer_is_llm=kinds.get("answerer") == "llm",
    )
    judge = make_judge(kinds.get("judge", "none"), backend=judge_llm, dataset=source["format"])
    rows = evaluation.score_runs(
        runs, selected, source["format"], judge, settings.max_rounds, concurrency=concurrency
    )
    summary = evaluation.summarise(
        rows,
        runs,
        source,
        {"roles": kinds, "llm": backends.describe()},
        judge.name if judge else None,
        notes + run_notes,
    )
    trajectories = [
        evaluation.trajectory_record(t) for run in runs.values() for t in run.trajectories
    ]
    table = pd.DataFrame([r.as_dict() for r in rows])
    return trajectories, table, table, summary, summary_metrics(summary)


def _trained_planner(
    spec: str,
    store: PlannerModelStore,
    selected: list[Question],
    params: dict[str, Any],
    kinds: dict[str, str],
    role_params: dict[str, dict[str, Any]],
) -> LLMBackend:
    """The planner backend for ``evaluation.planner_model``; refuses its training memories."""
    model = resolve_planner(spec, store)
    check_not_trained_on(model, {q.memory_id for q in selected})
    return evaluation.use_trained_planner(
        model, dict(params.get("planner_model_backend") or {}), kinds, role_params
    )


def summary_metrics(summary: dict[str, Any]) -> dict[str, Any]:
    """MLflow metrics: headline figures per system, recall as a history with step = round."""
    metrics: dict[str, Any] = {}
    for system, values in summary["systems"].items():
        for key in (
            "f1",
            "accuracy",
            "round1_recall",
            "evidence_recall_final",
            "accepted_recall_final",
            "mean_rounds",
            "mean_turns_viewed",
            "seconds_per_question",
        ):
            if values.get(key) is not None:
                metrics[f"{system}.{key}"] = {"value": float(values[key]), "step": 0}
        metrics[f"{system}.evidence_recall_by_round"] = [
            {"value": float(v), "step": step}
            for step, v in enumerate(values["evidence_recall_by_round"], start=1)
        ]
        tokens = values["tokens_online_per_question"]
        metrics[f"{system}.tokens_in_per_question"] = {"value": float(tokens["in"] or 0), "step": 0}
        metrics[f"{system}.tokens_out_per_question"] = {
            "value": float(tokens["out"] or 0),
            "step": 0,
        }
    return metrics


def plot_evaluation(summary: dict[str, Any]) -> dict[str, plt.Figure]:
    systems = summary["systems"]
    return {
        "recall_by_round.png": _recall_plot(systems),
        "termination.png": _stacked_shares(systems, "termination", "Why each question stopped"),
        "f1_by_category.png": _by_category_plot(systems),
        "failure_attribution.png": _failure_plot(systems),
    }


def _recall_plot(systems: dict[str, Any]) -> plt.Figure:
    figure, axis = plt.subplots(figsize=(6, 4))
    for system, values in systems.items():
        curve = values["evidence_recall_by_round"]
        if curve:
            axis.plot(
                range(1, len(curve) + 1),
                curve,
                marker="o",
                label=f"{system} ({values['mean_turns_viewed']:.1f} turns)",
            )
    axis.set(
        xlabel="round",
        ylabel="cumulative gold-turn recall (viewed)",
        ylim=(0, 1),
        title="Evidence recall by round",
    )
    axis.xaxis.get_major_locator().set_params(integer=True)
    axis.grid(alpha=0.3)
    axis.legend()
    figure.tight_layout()
    return figure


def _stacked_shares(systems: dict[str, Any], key: str, title: str) -> plt.Figure:
    figure, axis = plt.subplots(figsize=(6, 4))
    reasons = sorted({reason for v in systems.values() for reason in v[key]})
    bottoms = [0.0] * len(systems)
    for reason in reasons:
        shares = [v[key].get(reason, 0.0) for v in systems.values()]
        axis.bar(list(systems), shares, bottom=bottoms, label=reason)
        bottoms = [b + s for b, s in zip(bottoms, shares, strict=True)]
    axis.set(ylabel="share of questions", title=title, ylim=(0, 1))
    axis.legend()
    figure.tight_layout()
    return figure


def _by_category_plot(systems: dict[str, Any]) -> plt.Figure:
    frame = pd.DataFrame(
        {s: {c: m["f1"] for c, m in v["by_category"].items()} for s, v in systems.items()}
    )
    figure, axis = plt.subplots(figsize=(7, 4))
    frame.plot.bar(ax=axis, rot=0)
    axis.set(
        xlabel="category",
        ylabel="token F1 (heuristic score, not an accuracy)",
        title="Answer F1 by category",
        ylim=(0, 1),
    )
    figure.tight_layout()
    return figure


def _failure_plot(systems: dict[str, Any]) -> plt.Figure:
    frame = pd.DataFrame({s: v["failure_attribution"] for s, v in systems.items()}).fillna(0)
    figure, axis = plt.subplots(figsize=(7, 4))
    if not frame.empty:
        frame.plot.bar(ax=axis, rot=20)
    axis.set(ylabel="wrong answers", title="Failure attribution of wrong answers")
    figure.tight_layout()
    return figure
