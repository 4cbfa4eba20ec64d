from kedro.pipeline import Node, Pipeline

from mera_pipelines.pipelines.train_planner.nodes import (
    filter_training_states,
    plot_training,
    prepare_base_planner,
    train_planner_grpo,
    warm_start_planner,
)


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(prepare_base_planner, "params:training", "base_planner", name="prepare_base"),
            Node(
                warm_start_planner,
                [
                    "base_planner",
                    "planner_states",
                    "collect_report",
                    "training_split",
                    "memory_index",
                    "synthetic_questions",
                    "params:training",
                    "params:evaluation.loop",
                ],
                ["sft_planner", "sft_report"],
                name="warm_start_planner",
            ),
            Node(
                filter_training_states,
                [
                    "planner_states",
                    "sft_planner",
                    "memory_index",
                    "synthetic_questions",
                    "params:training",
                    "params:evaluation.loop",
                ],
                [
                    "training_states",
                    "rollouts",
                    "state_table",
                    "filter_report",
                    "filter_metrics",
                ],
                name="filter_training_states",
            ),
            Node(
                train_planner_grpo,
                [
                    "training_states",
                    "sft_planner",
                    "memory_index",
                    "synthetic_questions",
                    "params:training",
                    "params:evaluation.loop",
                ],
                ["trained_planner", "grpo_report", "grpo_metrics"],
                name="train_planner_grpo",
            ),
            Node(
                plot_training,
                ["sft_report", "grpo_report"],
                "training_plots",
                name="plot_training",
            ),
        ]
    )
