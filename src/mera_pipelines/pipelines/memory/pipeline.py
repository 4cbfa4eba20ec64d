from kedro.pipeline import Node, Pipeline

from mera_pipelines.pipelines.memory.nodes import extract_facts, index_rows, summarise_memory


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                extract_facts,
                inputs=["turns", "extractor_llm", "params:extraction"],
                outputs=["facts", "extraction_stats"],
                name="extract_facts",
            ),
            Node(index_rows, inputs="facts", outputs="memory_index", name="index_facts"),
            Node(
                summarise_memory,
                inputs=["memory_index", "facts", "extraction_stats"],
                outputs=["memory_report", "memory_metrics"],
                name="summarise_memory",
            ),
        ]
    )
