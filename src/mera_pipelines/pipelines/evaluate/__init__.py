"""Answer a benchmark's questions with MERA and baselines on the same memory; judge; report."""

from mera_pipelines.pipelines.evaluate.pipeline import create_pipeline

__all__ = ["create_pipeline"]
