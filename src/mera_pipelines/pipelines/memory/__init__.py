"""Turns -> atomic facts -> the LanceDB fact memory, with extraction cost and index stats."""

from mera_pipelines.pipelines.memory.pipeline import create_pipeline

__all__ = ["create_pipeline"]
