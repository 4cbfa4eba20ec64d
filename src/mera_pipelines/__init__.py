"""mera_pipelines: MERA (Missing-Evidence Retrieval Augmentation) as Kedro pipelines."""

__version__ = "0.1.0"
