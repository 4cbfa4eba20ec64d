"""The atomic-fact memory as a Kedro dataset, in the shape of kedro-datasets' vector stores.

``save(facts)`` embeds and upserts the facts (per memory; unchanged memories are skipped);
``load()`` returns a :class:`MemoryIndex` handle with add / search / delete / describe / close.
"""

from __future__ import annotations

import logging
from typing import Any

import pandas as pd
from kedro.io import AbstractDataset

from mera_pipelines.core.embedding import PACKAGED_MINILM, load_embedder
from mera_pipelines.core.memory import AnnSettings, MemoryIndex

logger = logging.getLogger(__name__)


class LanceDBMemoryDataset(AbstractDataset[pd.DataFrame, MemoryIndex]):
    def __init__(
        self,
        uri: str,
        table_name: str = "facts",
        embedder: dict[str, Any] | None = None,
        ann: dict[str, Any] | str | None = None,
        storage_options: dict[str, str] | None = None,
        progress: bool = True,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self._uri = uri
        self._table_name = table_name
        self._embedder_config = {"name": PACKAGED_MINILM, **(embedder or {})}
        self._ann = AnnSettings.from_params(ann)  # memory.ann_index; validated at catalog load
        self._storage_options = storage_options  # object stores: region, endpoint, keys
        self._progress = progress
        self.metadata = metadata
        self.last_upsert: dict[str, float] | None = None

    def _index(self) -> MemoryIndex:
        config = self._embedder_config
        threads = config.get("threads")
        embedder = load_embedder(
            config["name"],
            config.get("device", "cpu"),
            int(config.get("batch_size", 64)),
            int(threads) if threads else None,
            str(config.get("dtype", "auto")),
        )
        return MemoryIndex(
            self._uri,
            self._table_name,
            embedder,
            ann=self._ann,
            storage_options=self._storage_options,
        )

    def load(self) -> MemoryIndex:
        return self._index()

    def save(self, data: pd.DataFrame) -> None:
        index = self._index()
        stats = index.upsert_facts(data, progress=self._progress)
        self.last_upsert = stats.as_dict()
        logger.info(
            "Memory table %s/%s: %d memories written, %d unchanged, %d facts at %.0f facts/s",
            self._uri,
            self._table_name,
            stats.memories_written,
            stats.memories_unchanged,
            stats.facts_written,
            stats.facts_per_second,
        )
        index.close()
        _log_to_active_mlflow_run(self.last_upsert)

    def _exists(self) -> bool:
        index = self._index()
        try:
            return index.count() > 0
        finally:
            index.close()

    def _describe(self) -> dict[str, Any]:
        return {
            "uri": self._uri,
            "table_name": self._table_name,
            "embedder": self._embedder_config,
            "ann": vars(self._ann),
        }


def _log_to_active_mlflow_run(upsert: dict[str, float]) -> None:
    """Indexing throughput belongs with the run that built the index (kedro-mlflow's run)."""
    import mlflow

    if mlflow.active_run() is not None:
        mlflow.log_metrics({f"memory.upsert.{key}": float(value) for key, value in upsert.items()})
