from kedro.pipeline import Node, Pipeline

from mera_pipelines.pipelines.evaluate.nodes import evaluate_systems, plot_evaluation


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                evaluate_systems,
                inputs=[
                    "questions",
                    "turns",
                    "memory_index",
                    "seeder_llm",
                    "planner_llm",
                    "verifier_llm",
                    "answerer_llm",
                    "judge_llm",
                    "trained_planner",
                    "params:source",
                    "params:evaluation",
                ],
                outputs=[
                    "trajectories",
                    "question_results",
                    "question_results_report",
                    "evaluate_summary",
                    "evaluate_metrics",
                ],
                name="evaluate_systems",
            ),
            Node(plot_evaluation, "evaluate_summary", "evaluate_plots", name="plot_evaluation"),
        ]
    )
