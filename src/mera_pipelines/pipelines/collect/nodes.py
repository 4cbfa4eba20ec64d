"""Thin node over ``core.training.states``."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pandas as pd

from mera_pipelines.core.llm import LLMBackend
from mera_pipelines.core.loop import LoopSettings
from mera_pipelines.core.memory import MemoryIndex
from mera_pipelines.core.records import Question, from_frame
from mera_pipelines.core.training.states import (
    CollectSettings,
    collect_states,
    collection_roles,
    make_teacher,
)
from mera_pipelines.core.training.trainers import planner_prompt_settings


def collect_planner_states(
    synthetic_questions: pd.DataFrame,
    memory: MemoryIndex,
    teacher_llm: LLMBackend | None,
    params: dict[str, Any],
    loop_params: dict[str, Any],
) -> tuple[pd.DataFrame, dict[str, Any], dict[str, Any]]:
    """States before every planner call of MERA runs planned by the teacher, whose plan for
    each state is the SFT target: the heuristic planner, or an LLM planner over the backend
    ``llm.teacher_planner`` when one is configured."""
    roles = collection_roles()
    collect = CollectSettings.from_params(params.get("collect"))
    settings = collect.teacher_loop(LoopSettings.from_params(loop_params))
    questions = from_frame(synthetic_questions, Question)
    records, report = collect_states(
        questions,
        memory,
        roles,
        settings,
        make_teacher(teacher_llm, planner_prompt_settings(params)),
        collect.concurrency,
    )
    table = pd.DataFrame([asdict(r) for r in records])
    metrics = {
        "collect.states": {"value": float(report.states), "step": 0},
        "collect.states_with_missing_evidence": {
            "value": float(report.states_with_missing_evidence),
            "step": 0,
        },
        "collect.teacher_parse_failures": {
            "value": float(report.teacher_parse_failures),
            "step": 0,
        },
    }
    return table, report.as_dict(), metrics
