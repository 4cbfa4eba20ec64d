"""LoCoMo ``observation`` records (facts with evidence turn ids) for training QA synthesis."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kedro.io import AbstractDataset, DatasetError

from mera_pipelines.core.training.synthesis import Statement, observations_from_locomo


class LoCoMoObservationsDataset(AbstractDataset[None, list[Statement]]):
    """Read-only; other formats have no observations and load as an empty list (unread)."""

    def __init__(self, filepath: str, format: str, metadata: dict[str, Any] | None = None):  # noqa: A002
        self._filepath = str(filepath)
        self._format = str(format)
        self.metadata = metadata

    def load(self) -> list[Statement]:
        if self._format != "locomo":
            return []
        path = Path(self._filepath)
        try:
            samples = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DatasetError(f"{path}: cannot read LoCoMo observations: {exc}") from exc
        return observations_from_locomo(samples if isinstance(samples, list) else [])

    def save(self, data: None) -> None:
        raise DatasetError("A benchmark source is read-only: the project never writes raw data.")

    def _exists(self) -> bool:
        return Path(self._filepath).is_file()

    def _describe(self) -> dict[str, Any]:
        return {"filepath": self._filepath, "format": self._format}
