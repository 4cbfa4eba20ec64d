"""Training the query planner: QA synthesis, state collection, rollout filtering, SFT, GRPO.

Only the planner changes; memory, evidence model and answer model stay fixed. Plain Python:
the train pipelines' nodes are thin wrappers over these modules.
"""
