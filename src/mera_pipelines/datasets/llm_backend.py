"""An LLM backend declared in the catalog, with credentials from conf/local/credentials.yml.

Loads ``None`` for ``kind: none`` — the role then uses its offline heuristic. ``setting`` names
the configuration the backend came from (``llm.teacher_planner``), so a bad backend's error says
which setting to mend rather than only the dataset that failed to load.
"""

from __future__ import annotations

from typing import Any

from kedro.io import AbstractDataset, DatasetError

from mera_pipelines.core.llm import LLMBackend
from mera_pipelines.core.llm.factory import make_backend


class LLMBackendDataset(AbstractDataset[None, LLMBackend | None]):
    def __init__(
        self,
        backend: dict[str, Any] | None = None,
        cache_dir: str | None = None,
        credentials: dict[str, Any] | None = None,
        setting: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self._backend = dict(backend or {"kind": "none"})
        self._setting = setting
        self._cache_dir = cache_dir
        self._credentials = credentials  # never described, logged or saved
        self.metadata = metadata

    def load(self) -> LLMBackend | None:
        return make_backend(
            self._backend,
            cache_dir=self._cache_dir,
            credentials=self._credentials,
            setting=self._setting,
        )

    def save(self, data: None) -> None:
        raise DatasetError("An LLM backend is configuration; it cannot be saved.")

    def _describe(self) -> dict[str, Any]:
        backend = {k: v for k, v in self._backend.items() if "key" not in k.lower()}
        return {"setting": self._setting, "backend": backend}
