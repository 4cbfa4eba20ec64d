"""Thin nodes over ``core.training.synthesis``."""

from __future__ import annotations

from typing import Any

import pandas as pd

from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.llm import LLMBackend
from mera_pipelines.core.memory import MemoryIndex
from mera_pipelines.core.records import Fact, Question, Turn, from_frame, to_frame
from mera_pipelines.core.training.synthesis import (
    Statement,
    SynthesisReport,
    SynthesisSettings,
    annotated_questions,
    make_question_writer,
    synthesize_questions,
)


def select_training_memories(conversations: pd.DataFrame, params: dict[str, Any]) -> dict:
    """The memories training may read; every listed id must exist in the source."""
    available = sorted(conversations["memory_id"].astype(str))
    wanted = params.get("train_memories")
    if isinstance(wanted, str):
        wanted = [w.strip() for w in wanted.split(",") if w.strip()]
    if not wanted:
        raise ConfigError(
            "training.train_memories is empty: list the conversations training may use "
            f"(available: {available})"
        )
    missing = sorted(set(map(str, wanted)) - set(available))
    if missing:
        raise ConfigError(
            f"training.train_memories names {missing}, which the source does not have; "
            f"available: {available}"
        )
    train = sorted(set(map(str, wanted)))
    return {"train_memory_ids": train, "held_out_memory_ids": sorted(set(available) - set(train))}


def synthesize_training_questions(
    turns: pd.DataFrame,
    facts: pd.DataFrame,
    observations: list[Statement],
    split: dict[str, Any],
    writer_llm: LLMBackend | None,
    params: dict[str, Any],
    memory: MemoryIndex | None = None,
    source_questions: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, dict[str, Any], dict[str, Any]]:
    settings = SynthesisSettings.from_params(params)
    if settings.writer == "annotated":
        questions, report = annotated_questions(
            split["train_memory_ids"],
            from_frame(source_questions, Question) if source_questions is not None else [],
            from_frame(facts, Fact),
            settings,
        )
        return _synthesis_outputs(questions, report, "annotated", split)
    # the window and the style shape the heuristic writer's questions; an LLM writes its own.
    # Category aggregates group statements with the embedder the memory was built with.
    options = (
        {
            "question_window": settings.question_window,
            "question_style": settings.question_style,
            "aggregate": settings.aggregate,
            "topic_words": settings.topic_words,
            "min_category_similarity": settings.category_min_similarity,
            "embedder": memory.embedder if memory is not None else None,
        }
        if settings.writer == "heuristic"
        else {}
    )
    writer = make_question_writer(settings.writer, backend=writer_llm, **options)
    questions, report = synthesize_questions(
        split["train_memory_ids"],
        from_frame(turns, Turn),
        from_frame(facts, Fact),
        writer,
        settings,
        observations,
    )
    return _synthesis_outputs(questions, report, writer.name, split)


def _synthesis_outputs(
    questions: list[Question], report: SynthesisReport, writer_name: str, split: dict[str, Any]
) -> tuple[pd.DataFrame, dict[str, Any], dict[str, Any]]:
    if not questions:
        hint = (
            "the source has no annotated questions with evidence for them"
            if writer_name == "annotated"
            else "check the memories' facts"
        )
        raise ConfigError(
            f"QA synthesis ({writer_name}) wrote no usable question from "
            f"{split['train_memory_ids']} (rejected: {dict(report.rejected)}); {hint}"
        )
    summary = {"writer": writer_name, **report.as_dict()}
    metrics = {
        "synthesis.questions": {"value": float(len(questions)), "step": 0},
        "synthesis.rejected": {"value": float(sum(report.rejected.values())), "step": 0},
    }
    return to_frame(questions, Question), summary, metrics
