"""Kedro datasets the catalog needs: a benchmark source file, the LanceDB memory, LLM backends."""

from mera_pipelines.datasets.lancedb_memory import LanceDBMemoryDataset
from mera_pipelines.datasets.llm_backend import LLMBackendDataset
from mera_pipelines.datasets.llm_cache import LLMResponseCacheDataset
from mera_pipelines.datasets.source import BenchmarkSourceDataset

__all__ = [
    "BenchmarkSourceDataset",
    "LLMBackendDataset",
    "LLMResponseCacheDataset",
    "LanceDBMemoryDataset",
]
