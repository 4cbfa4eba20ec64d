"""LLM backends: one protocol used by every role (extractor, planner, verifier, answerer, judge)."""

from typing import Any

from mera_pipelines.core.llm.base import ChatMessage, Completion, LLMBackend, TokenUsage
from mera_pipelines.core.llm.cache import ResponseCache, cache_key
from mera_pipelines.core.llm.concurrency import ItemFailure, failures, map_bounded
from mera_pipelines.core.llm.factory import make_backend
from mera_pipelines.core.llm.json_repair import parse_json_lenient, validate_shape
from mera_pipelines.core.llm.smollm2 import ensure_smollm2

# The backends import openai / transformers (seconds of start-up): load them on first use.
_LAZY = {
    "OpenAIBackend": "mera_pipelines.core.llm.openai_backend",
    "TransformersBackend": "mera_pipelines.core.llm.transformers_backend",
}

__all__ = [
    "ChatMessage",
    "Completion",
    "ItemFailure",
    "LLMBackend",
    "OpenAIBackend",
    "ResponseCache",
    "TokenUsage",
    "TransformersBackend",
    "cache_key",
    "ensure_smollm2",
    "failures",
    "make_backend",
    "map_bounded",
    "parse_json_lenient",
    "validate_shape",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
