"""SFT warm start, rollout filtering and GRPO of the query planner."""

from mera_pipelines.pipelines.train_planner.pipeline import create_pipeline

__all__ = ["create_pipeline"]
