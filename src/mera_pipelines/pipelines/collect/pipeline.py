from kedro.pipeline import Node, Pipeline

from mera_pipelines.pipelines.collect.nodes import collect_planner_states


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                collect_planner_states,
                [
                    "synthetic_questions",
                    "memory_index",
                    "teacher_planner_llm",
                    "params:training",
                    "params:evaluation.loop",
                ],
                ["planner_states", "collect_report", "collect_metrics"],
                name="collect_planner_states",
            )
        ]
    )
