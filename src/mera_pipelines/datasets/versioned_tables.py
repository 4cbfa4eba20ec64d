"""Several versioned Parquet tables as one Kedro dataset: ``{name: DataFrame}``.

    forget_training_tables:
      type: mera_pipelines.datasets.VersionedTablesDataset
      versioned: true
      tables:
        synthetic_questions: data/05_model_input/synthetic_questions.parquet
        planner_states: data/05_model_input/planner_states.parquet

``load()`` returns the latest version of each table that has one and leaves out the tables
never written (a project that never trained has none), so a node handles "absent" as a missing
key. ``save(tables)`` writes a new version of each table given, and only of those, with the
run's save version; each write is atomic (``datasets.atomic.ParquetDataset``). The tables are
written one after the other: a run killed in between leaves some of them at their new version,
and rerunning the node that produced them finishes the rest.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from kedro.io import AbstractDataset, DatasetError, Version
from kedro.io.core import generate_timestamp

from mera_pipelines.datasets.atomic import ParquetDataset


class VersionedTablesDataset(AbstractDataset[dict[str, pd.DataFrame], dict[str, pd.DataFrame]]):
    def __init__(
        self,
        tables: dict[str, str],
        version: Version | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        if not tables:
            raise DatasetError("VersionedTablesDataset needs at least one table in 'tables'")
        # one save version for every table: the run's when the catalog entry is versioned
        save_version = (version.save if version else None) or generate_timestamp()
        self._tables = {
            name: ParquetDataset(filepath=str(path), version=Version(None, save_version))
            for name, path in tables.items()
        }
        self._paths = {name: str(path) for name, path in tables.items()}
        self.metadata = metadata

    def load(self) -> dict[str, pd.DataFrame]:
        return {name: table.load() for name, table in self._tables.items() if table.exists()}

    def save(self, data: dict[str, pd.DataFrame]) -> None:
        unknown = sorted(set(data) - set(self._tables))
        if unknown:
            raise DatasetError(
                f"Tables {unknown} are not in this dataset's 'tables' ({sorted(self._tables)})"
            )
        for name, frame in data.items():
            self._tables[name].save(frame)

    def _exists(self) -> bool:
        return any(table.exists() for table in self._tables.values())

    def _describe(self) -> dict[str, Any]:
        return {"tables": dict(self._paths)}
