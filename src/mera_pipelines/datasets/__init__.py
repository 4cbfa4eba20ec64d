"""Kedro datasets the catalog needs: a benchmark source file, the LanceDB memory, LLM backends
and their response cache, LoCoMo observations, trained planner models and groups of versioned
tables. Atomic file datasets (temp file + rename) are in ``mera_pipelines.datasets.atomic``."""

from mera_pipelines.datasets.lancedb_memory import LanceDBMemoryDataset
from mera_pipelines.datasets.llm_backend import LLMBackendDataset
from mera_pipelines.datasets.llm_cache import LLMResponseCacheDataset
from mera_pipelines.datasets.observations import LoCoMoObservationsDataset
from mera_pipelines.datasets.planner_model import PlannerModelDataset
from mera_pipelines.datasets.source import BenchmarkSourceDataset
from mera_pipelines.datasets.versioned_tables import VersionedTablesDataset

__all__ = [
    "BenchmarkSourceDataset",
    "LLMBackendDataset",
    "LLMResponseCacheDataset",
    "LanceDBMemoryDataset",
    "LoCoMoObservationsDataset",
    "PlannerModelDataset",
    "VersionedTablesDataset",
]
