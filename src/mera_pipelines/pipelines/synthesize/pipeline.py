from kedro.pipeline import Node, Pipeline

from mera_pipelines.pipelines.synthesize.nodes import (
    select_training_memories,
    synthesize_training_questions,
)


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                select_training_memories,
                ["conversations", "params:training"],
                "training_split",
                name="select_training_memories",
            ),
            Node(
                synthesize_training_questions,
                [
                    "turns",
                    "facts",
                    "locomo_observations",
                    "training_split",
                    "question_writer_llm",
                    "params:training.synthesis",
                    "memory_index",
                    "questions",
                ],
                ["synthetic_questions", "synthesis_report", "synthesis_metrics"],
                name="synthesize_training_questions",
            ),
        ]
    )
