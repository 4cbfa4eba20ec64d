"""Planner-state collection: MERA trajectories on the synthesised training questions."""

from mera_pipelines.pipelines.collect.pipeline import create_pipeline

__all__ = ["create_pipeline"]
