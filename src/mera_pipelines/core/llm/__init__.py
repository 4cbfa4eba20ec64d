"""LLM backends: one protocol used by every role (extractor, planner, verifier, answerer, judge)."""

from mera_pipelines.core.llm.base import ChatMessage, Completion, LLMBackend, TokenUsage

__all__ = ["ChatMessage", "Completion", "LLMBackend", "TokenUsage"]
