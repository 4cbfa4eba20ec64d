"""Thin node over ``core.training.states``."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pandas as pd

from mera_pipelines.core import evaluation
from mera_pipelines.core.loop import LoopSettings
from mera_pipelines.core.memory import MemoryIndex
from mera_pipelines.core.records import Question, from_frame
from mera_pipelines.core.roles.planner import HeuristicPlanner
from mera_pipelines.core.training.states import CollectSettings, collect_states


def collect_planner_states(
    synthetic_questions: pd.DataFrame,
    memory: MemoryIndex,
    params: dict[str, Any],
    loop_params: dict[str, Any],
) -> tuple[pd.DataFrame, dict[str, Any], dict[str, Any]]:
    """States before every planner call of heuristic MERA runs (the teacher is the heuristic
    planner: its plan for each state is the SFT target)."""
    roles = evaluation.build_roles({}, evaluation.RoleBackends(), {})
    collect = CollectSettings.from_params(params)
    settings = collect.teacher_loop(LoopSettings.from_params(loop_params))
    questions = from_frame(synthetic_questions, Question)
    records, report = collect_states(
        questions, memory, roles, settings, HeuristicPlanner(), collect.concurrency
    )
    table = pd.DataFrame([asdict(r) for r in records])
    metrics = {
        "collect.states": {"value": float(report.states), "step": 0},
        "collect.states_with_missing_evidence": {
            "value": float(report.states_with_missing_evidence),
            "step": 0,
        },
    }
    return table, report.as_dict(), metrics
