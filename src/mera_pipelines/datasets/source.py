"""A raw benchmark file (LoCoMo, LongMemEval, our JSONL) read into canonical records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kedro.io import AbstractDataset, DatasetError

from mera_pipelines.core.sources import IngestResult, read_source


class BenchmarkSourceDataset(AbstractDataset[None, IngestResult]):
    """Read-only. ``filepath`` may be absolute or relative to the project root (the cwd)."""

    def __init__(self, filepath: str, format: str, metadata: dict[str, Any] | None = None):  # noqa: A002
        self._filepath = str(filepath)
        self._format = str(format)
        self.metadata = metadata

    def load(self) -> IngestResult:
        return read_source(Path(self._filepath), self._format)

    def save(self, data: None) -> None:
        raise DatasetError("A benchmark source is read-only: the project never writes raw data.")

    def _exists(self) -> bool:
        return Path(self._filepath).is_file()

    def _describe(self) -> dict[str, Any]:
        return {"filepath": self._filepath, "format": self._format}
