"""Thin nodes over ``core.roles.extractor`` and ``core.memory``."""

from __future__ import annotations

from typing import Any

import pandas as pd

from mera_pipelines.core.llm import LLMBackend
from mera_pipelines.core.memory import MemoryIndex
from mera_pipelines.core.records import Fact, Turn, from_frame, to_frame
from mera_pipelines.core.roles.extractor import extract_memory, make_extractor


def extract_facts(
    turns: pd.DataFrame, backend: LLMBackend | None, params: dict[str, Any]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Atomic facts for every turn, and per-memory extraction cost (offline tokens, failures)."""
    extractor = make_extractor(
        params["extractor"], backend=backend, max_facts=int(params.get("max_facts_per_turn", 12))
    )
    result = extract_memory(
        from_frame(turns, Turn),
        extractor,
        concurrency=int(params.get("concurrency", 1)),
        progress=bool(params.get("progress", True)),
    )
    return to_frame(result.facts, Fact), extraction_stats_frame(result.stats.values())


def extraction_stats_frame(stats) -> pd.DataFrame:
    """One row per memory; failed turns listed by id and reason, never silently dropped."""
    rows = []
    for memory in stats:
        row = memory.as_dict()
        row["failures"] = len(memory.failures)
        row["failed_turns"] = "; ".join(f"{f.turn_id}: {f.reason}" for f in memory.failures)
        rows.append(row)
    columns = [
        "memory_id",
        "extractor",
        "turns",
        "facts",
        "tokens_in",
        "tokens_out",
        "fallbacks",
        "filled_empty",
        "failures",
        "failed_turns",
    ]
    return pd.DataFrame(rows, columns=columns)


def index_rows(facts: pd.DataFrame) -> pd.DataFrame:
    """The memory dataset embeds and upserts on save; the node only hands the facts over."""
    return facts


def summarise_memory(
    index: MemoryIndex, facts: pd.DataFrame, extraction_stats: pd.DataFrame
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Index description + facts per turn + offline token cost, for the report and MLflow."""
    n_turns = int(extraction_stats["turns"].sum()) if len(extraction_stats) else 0
    report = {
        "index": index.describe(),
        "memories": int(facts["memory_id"].nunique()),
        "turns": n_turns,
        "facts": len(facts),
        "facts_per_turn": len(facts) / n_turns if n_turns else 0.0,
        "offline_tokens": {
            "in": int(extraction_stats["tokens_in"].sum()) if len(extraction_stats) else 0,
            "out": int(extraction_stats["tokens_out"].sum()) if len(extraction_stats) else 0,
        },
        "extraction_failures": int(extraction_stats["failures"].sum()),
        "extraction_fallbacks": int(extraction_stats["fallbacks"].sum()),
    }
    metrics = {
        "facts": {"value": float(report["facts"]), "step": 0},
        "facts_per_turn": {"value": float(report["facts_per_turn"]), "step": 0},
        "offline_tokens_in": {"value": float(report["offline_tokens"]["in"]), "step": 0},
        "offline_tokens_out": {"value": float(report["offline_tokens"]["out"]), "step": 0},
        "extraction_failures": {"value": float(report["extraction_failures"]), "step": 0},
    }
    return report, metrics
