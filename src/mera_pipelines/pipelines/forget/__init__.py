"""Forget a memory or one of its turns: LanceDB rows, cached LLM replies, derived tables."""

from mera_pipelines.pipelines.forget.pipeline import create_pipeline

__all__ = ["create_pipeline"]
