"""Raw benchmark file -> canonical conversations, turns and questions tables + ingest report."""

from mera_pipelines.pipelines.ingest.pipeline import create_pipeline

__all__ = ["create_pipeline"]
