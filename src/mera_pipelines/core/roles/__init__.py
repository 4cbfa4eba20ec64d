"""Roles of the MERA loop (extractor, seeder, planner, verifier, answerer, judge, question
writer): each one interface with a heuristic (offline) and an LLM implementation."""

from mera_pipelines.core.roles.extractor import (
    ExtractionResult,
    FactExtractor,
    HeuristicExtractor,
    LLMExtractor,
    MemoryExtraction,
    TurnContext,
    extract_memory,
    make_extractor,
)

__all__ = [
    "ExtractionResult",
    "FactExtractor",
    "HeuristicExtractor",
    "LLMExtractor",
    "MemoryExtraction",
    "TurnContext",
    "extract_memory",
    "make_extractor",
]
