from kedro.pipeline import Node, Pipeline

from mera_pipelines.pipelines.forget.nodes import (
    forget_in_index_and_cache,
    forget_report,
    forget_rows,
)


def create_pipeline(**kwargs) -> Pipeline:
    # The forgotten tables are saved through their own catalog entries (same files, new
    # versions): a node cannot write the dataset it reads.
    return Pipeline(
        [
            Node(
                forget_rows,
                inputs=["conversations", "turns", "questions", "facts", "params:forget"],
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
                forget_in_index_and_cache,
                inputs=["memory_index", "llm_response_cache", "params:forget"],
                outputs="forget_index_counts",
                name="forget_in_index_and_cache",
            ),
            Node(
                forget_report,
                inputs=["forget_table_counts", "forget_index_counts", "params:forget"],
                outputs=["forget_report", "forget_metrics"],
                name="forget_report",
            ),
        ]
    )
