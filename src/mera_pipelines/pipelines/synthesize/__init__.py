"""Training data split and QA synthesis from the training memories."""

from mera_pipelines.pipelines.synthesize.pipeline import create_pipeline

__all__ = ["create_pipeline"]
