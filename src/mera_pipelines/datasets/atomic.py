"""kedro-datasets' file datasets, writing atomically: to a temporary file, then a rename.

The stock datasets open the target and write into it, so a run killed mid-save leaves a
half-written file that the next load (or the latest *version* of a versioned dataset) takes
for a result. Here every write goes to ``<target>.tmp-<random>`` beside the target and is
renamed over it only when complete; a rename within one directory is atomic on POSIX file
systems. Object stores (s3://...) upload a whole object per write anyway.

    type: mera_pipelines.datasets.atomic.ParquetDataset   # instead of pandas.ParquetDataset
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from kedro_datasets.json import JSONDataset as _JSONDataset
from kedro_datasets.matplotlib import MatplotlibDataset as _MatplotlibDataset
from kedro_datasets.pandas import CSVDataset as _CSVDataset
from kedro_datasets.pandas import ParquetDataset as _ParquetDataset

_WRITE_MODES = set("wax+")


class AtomicWrites:
    """An fsspec file system whose ``open`` for writing writes a temporary file, then renames."""

    def __init__(self, fs: Any) -> None:
        self._fs = fs

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fs, name)

    @contextmanager
    def open(self, path: str, mode: str = "rb", **kwargs: Any) -> Iterator[Any]:
        if not _WRITE_MODES & set(mode):
            with self._fs.open(path, mode, **kwargs) as handle:
                yield handle
            return
        temporary = f"{path}.tmp-{uuid.uuid4().hex[:12]}"
        try:
            with self._fs.open(temporary, mode, **kwargs) as handle:
                yield handle
            self._fs.mv(temporary, path)
        except BaseException:
            with suppress(Exception):
                self._fs.rm(temporary)
            raise


class _AtomicMixin:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._fs = AtomicWrites(self._fs)


class ParquetDataset(_AtomicMixin, _ParquetDataset):
    pass


class CSVDataset(_AtomicMixin, _CSVDataset):
    pass


class JSONDataset(_AtomicMixin, _JSONDataset):
    pass


class MatplotlibDataset(_AtomicMixin, _MatplotlibDataset):
    pass
