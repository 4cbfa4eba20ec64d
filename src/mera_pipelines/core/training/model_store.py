"""Trained planners on disk: one folder per version, with a metadata file written last.

    <root>/<version>/            a transformers model folder (config, weights, tokenizer)
    <root>/<version>/mera_planner.json   stage, base model, training memories, prompt settings

Versions use Kedro's timestamp format, so they sort in time order. A version is written under a
temporary name and renamed when complete: an interrupted save never looks like a model.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mera_pipelines.core.errors import ConfigError

METADATA_FILE = "mera_planner.json"
_VERSION_FORMAT = "%Y-%m-%dT%H.%M.%S.%f"


def new_version() -> str:
    """Kedro's version string format (``2026-11-30T07.12.01.123Z``)."""
    now = datetime.now(tz=UTC)
    return now.strftime(_VERSION_FORMAT)[:-3] + "Z"


@dataclass
class PlannerModel:
    """A model folder with its training metadata."""

    folder: Path
    metadata: dict[str, Any] = field(default_factory=dict)
    version: str | None = None

    @property
    def train_memory_ids(self) -> list[str]:
        return list(self.metadata.get("train_memory_ids", []))

    @property
    def prompt_settings(self) -> dict[str, Any]:
        return dict(self.metadata.get("prompt", {}))


def read_model_folder(folder: str | Path) -> PlannerModel:
    path = Path(folder)
    if not (path / "config.json").is_file():
        raise ConfigError(f"No model folder at '{path}' (config.json missing)")
    metadata_file = path / METADATA_FILE
    metadata = json.loads(metadata_file.read_text()) if metadata_file.is_file() else {}
    return PlannerModel(path, metadata, metadata.get("version"))


class PlannerModelStore:
    """The versions of one trained model (e.g. data/06_models/planner)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def versions(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(
            p.name
            for p in self.root.iterdir()
            if p.is_dir() and not p.name.startswith(".") and (p / METADATA_FILE).is_file()
        )

    def get(self, version: str = "latest") -> PlannerModel:
        versions = self.versions()
        if not versions:
            raise ConfigError(
                f"No trained planner in '{self.root}': run `kedro run --pipeline=train` first"
            )
        chosen = versions[-1] if version == "latest" else version
        if chosen not in versions:
            raise ConfigError(
                f"No planner version '{version}' in '{self.root}'; available: {versions}"
            )
        return read_model_folder(self.root / chosen)

    def save(self, model: PlannerModel) -> PlannerModel:
        """Copy ``model.folder`` in as a new version; the metadata file is written last."""
        self.root.mkdir(parents=True, exist_ok=True)
        version = new_version()
        while (self.root / version).exists():  # two saves in one millisecond
            time.sleep(0.001)
            version = new_version()
        staging = self.root / f".{version}.partial-{uuid.uuid4().hex[:8]}"
        try:
            shutil.copytree(model.folder, staging, ignore=shutil.ignore_patterns(METADATA_FILE))
            metadata = {**model.metadata, "version": version}
            (staging / METADATA_FILE).write_text(json.dumps(metadata, indent=2) + "\n")
            os.replace(staging, self.root / version)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        return PlannerModel(self.root / version, metadata, version)

    def trained_on(self, memory_id: str) -> list[PlannerModel]:
        """The versions whose weights were trained on the memory. A ``base``-stage version (SFT
        switched off: the base weights copied, metadata listing the split) never saw it."""
        models = [self.get(version) for version in self.versions()]
        return [
            model
            for model in models
            if memory_id in model.train_memory_ids and model.metadata.get("stage") != "base"
        ]

    def delete(self, version: str) -> Path:
        """Delete a version folder; returns the path it had.

        First renamed to a hidden ``.<version>.deleting-*`` name (one atomic step), so from
        then on it is neither a version of the store nor at the path a user may have given as
        ``evaluation.planner_model`` (``read_model_folder`` accepts any folder with a config,
        metadata or not, so deleting the metadata file first would leave a loadable model
        without its training memories). Then the metadata file, then the rest. A delete killed
        midway leaves only a hidden folder, which the next ``delete`` sweeps away."""
        if version not in self.versions():
            raise ConfigError(f"No planner version '{version}' in '{self.root}'")
        folder = self.root / version
        doomed = self.root / f".{version}.deleting-{uuid.uuid4().hex[:8]}"
        os.replace(folder, doomed)
        (doomed / METADATA_FILE).unlink(missing_ok=True)
        shutil.rmtree(doomed)
        for leftover in self.root.glob(".*.deleting-*"):
            shutil.rmtree(leftover, ignore_errors=True)
        return folder


def resolve_planner(
    spec: str, store: PlannerModelStore, setting: str = "evaluation.planner_model"
) -> PlannerModel:
    """``latest`` or a version of ``store``, or the path of any model folder; ``setting`` names
    the parameter ``spec`` came from, for the error."""
    if spec == "latest" or spec in store.versions():
        return store.get(spec)
    if Path(spec).is_dir():
        return read_model_folder(spec)
    raise ConfigError(
        f"{setting} '{spec}' is neither 'latest', a version in "
        f"'{store.root}' ({store.versions() or 'none yet'}) nor a model folder"
    )


def check_not_trained_on(model: PlannerModel, memory_ids: set[str]) -> None:
    """Refuse to score a planner on memories it was trained on (its score would be inflated)."""
    overlap = sorted(memory_ids & set(model.train_memory_ids))
    if overlap:
        raise ConfigError(
            f"The planner at '{model.folder}' was trained on memories {overlap}, which this "
            "evaluation would score. Evaluate it on other memories (evaluation.memories) or "
            "train it without them (training.train_memories)."
        )
