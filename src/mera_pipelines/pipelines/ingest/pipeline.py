from kedro.pipeline import Node, Pipeline

from mera_pipelines.pipelines.ingest.nodes import canonical_tables


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                canonical_tables,
                inputs=["raw_source", "params:source"],
                outputs=["conversations", "turns", "questions", "ingest_report", "ingest_metrics"],
                name="canonical_tables",
            )
        ]
    )
