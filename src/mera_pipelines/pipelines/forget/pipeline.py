from kedro.pipeline import Node, Pipeline

from mera_pipelines.pipelines.forget.nodes import (
    check_forget_target,
    forget_in_index_and_cache,
    forget_planners,
    forget_report,
    forget_rows,
    forget_training_rows,
)


def create_pipeline(**kwargs) -> Pipeline:
    # The forgotten tables are saved through their own catalog entries (same files, new
    # versions): a node cannot write the dataset it reads. Every step takes the checked
    # `forget_target`, so nothing is touched before the target is known to exist.
    return Pipeline(
        [
            Node(
                check_forget_target,
                inputs=[
                    "turns",
                    "training_tables",
                    "sft_planner",
                    "trained_planner",
                    "params:forget",
                ],
                outputs="forget_target",
                name="check_forget_target",
            ),
            Node(
                forget_rows,
                inputs=["conversations", "turns", "questions", "facts", "forget_target"],
                outputs=[
                    "forget_conversations",
                    "forget_turns",
                    "forget_questions",
                    "forget_facts",
                    "forget_table_counts",
                ],
                name="forget_rows",
            ),
            Node(
                forget_training_rows,
                inputs=["training_tables", "forget_target"],
                outputs=["forget_training_tables", "forget_training_counts"],
                name="forget_training_rows",
            ),
            Node(
                forget_planners,
                inputs=["sft_planner", "trained_planner", "forget_target"],
                outputs="forget_planner_counts",
                name="forget_planners",
            ),
            Node(
                forget_in_index_and_cache,
                inputs=["memory_index", "llm_response_cache", "forget_target"],
                outputs="forget_index_counts",
                name="forget_in_index_and_cache",
            ),
            Node(
                forget_report,
                inputs=[
                    "forget_target",
                    "forget_table_counts",
                    "forget_training_counts",
                    "forget_planner_counts",
                    "forget_index_counts",
                ],
                outputs=["forget_report", "forget_metrics"],
                name="forget_report",
            ),
        ]
    )
