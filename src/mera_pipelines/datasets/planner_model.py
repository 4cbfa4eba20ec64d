"""Trained planner models as a versioned Kedro dataset (and MLflow artifacts).

``save(PlannerModel)`` adds a version folder under ``path`` (moved in when the node's folder is
temporary, copied otherwise) and, when ``log_to_mlflow`` and a run is active, logs the folder as
an artifact. ``load()`` returns the store, so a node picks ``latest`` or a given version and a
pipeline that never trained still loads fine.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from kedro.io import AbstractDataset

from mera_pipelines.core.training.model_store import PlannerModel, PlannerModelStore

logger = logging.getLogger(__name__)


class PlannerModelDataset(AbstractDataset[PlannerModel, PlannerModelStore]):
    def __init__(
        self,
        path: str,
        log_to_mlflow: bool = False,
        artifact_path: str = "models",
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self._store = PlannerModelStore(path)
        self._log_to_mlflow = log_to_mlflow
        self._artifact_path = artifact_path
        self.metadata = metadata

    def load(self) -> PlannerModelStore:
        return self._store

    def save(self, data: PlannerModel) -> None:
        saved = self._store.save(data)
        if _is_temporary(data.folder):
            shutil.rmtree(data.folder.parent, ignore_errors=True)
        logger.info("Saved planner version %s at %s", saved.version, saved.folder)
        if self._log_to_mlflow:
            _log_artifacts(saved, f"{self._artifact_path}/{self._store.root.name}")

    def _exists(self) -> bool:
        return bool(self._store.versions())

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._store.root), "log_to_mlflow": self._log_to_mlflow}


def _is_temporary(folder: Path) -> bool:
    """Trainers write into ``<tmp>/mera-*/model``; that whole scratch folder can go."""
    tmp = Path(tempfile.gettempdir()).resolve()
    parent = folder.resolve().parent
    return parent.parent == tmp and parent.name.startswith("mera-")


def _log_artifacts(model: PlannerModel, artifact_path: str) -> None:
    import mlflow

    if mlflow.active_run() is None:
        return
    mlflow.log_artifacts(str(model.folder), artifact_path=f"{artifact_path}/{model.version}")
    mlflow.set_tag(f"{artifact_path.replace('/', '.')}.version", model.version)
