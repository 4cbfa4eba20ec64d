"""The on-disk LLM response cache as a Kedro dataset (a handle, like the memory index)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kedro.io import AbstractDataset, DatasetError

from mera_pipelines.core.llm.cache import ResponseCache
from mera_pipelines.core.llm.factory import CACHE_FILE_NAME


class LLMResponseCacheDataset(AbstractDataset[None, ResponseCache]):
    def __init__(self, cache_dir: str, metadata: dict[str, Any] | None = None) -> None:
        self._path = Path(cache_dir) / CACHE_FILE_NAME
        self.metadata = metadata

    def load(self) -> ResponseCache:
        return ResponseCache(self._path)

    def save(self, data: None) -> None:
        raise DatasetError("The LLM response cache is written by the backends, not saved.")

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path)}
