"""Planner versions on disk, selection by spec, and the refusal to score on training memories."""

from __future__ import annotations

import json

import pytest

from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.training.model_store import (
    METADATA_FILE,
    PlannerModel,
    PlannerModelStore,
    check_not_trained_on,
    resolve_planner,
)


def model_folder(tmp_path, name="src"):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"weights")
    return folder


def test_save_writes_a_complete_version_with_metadata(tmp_path):
    store = PlannerModelStore(tmp_path / "planner")
    assert store.versions() == []
    saved = store.save(PlannerModel(model_folder(tmp_path), {"train_memory_ids": ["m1"]}))
    assert store.versions() == [saved.version]
    metadata = json.loads((saved.folder / METADATA_FILE).read_text())
    assert metadata == {"train_memory_ids": ["m1"], "version": saved.version}
    assert (saved.folder / "model.safetensors").read_bytes() == b"weights"
    assert not [p for p in store.root.iterdir() if p.name.startswith(".")]  # no staging left


def test_latest_and_named_versions(tmp_path):
    store = PlannerModelStore(tmp_path / "planner")
    first = store.save(PlannerModel(model_folder(tmp_path, "a"), {"n": 1}))
    second = store.save(PlannerModel(model_folder(tmp_path, "b"), {"n": 2}))
    assert first.version < second.version
    assert store.get("latest").metadata["n"] == 2
    assert store.get(first.version).metadata["n"] == 1
    with pytest.raises(ConfigError, match="No planner version 'nope'"):
        store.get("nope")


def test_a_folder_without_metadata_is_not_a_version(tmp_path):
    store = PlannerModelStore(tmp_path / "planner")
    (store.root / "2026-01-01T00.00.00.000Z").mkdir(parents=True)  # an interrupted copy
    assert store.versions() == []
    with pytest.raises(ConfigError, match="run `kedro run --pipeline=train` first"):
        store.get()


def test_resolve_by_latest_version_or_folder(tmp_path):
    store = PlannerModelStore(tmp_path / "planner")
    saved = store.save(PlannerModel(model_folder(tmp_path), {}))
    assert resolve_planner("latest", store).folder == saved.folder
    assert resolve_planner(saved.version, store).folder == saved.folder
    other = model_folder(tmp_path, "elsewhere")
    assert resolve_planner(str(other), store).folder == other
    with pytest.raises(ConfigError, match="neither 'latest'"):
        resolve_planner("missing-thing", store)


def test_refuses_to_score_on_training_memories(tmp_path):
    model = PlannerModel(tmp_path, {"train_memory_ids": ["conv-26", "conv-30"]})
    check_not_trained_on(model, {"conv-42", "conv-43"})
    with pytest.raises(ConfigError, match=r"trained on memories \['conv-30'\]"):
        check_not_trained_on(model, {"conv-30", "conv-42"})


def test_trained_on_lists_the_versions_whose_weights_saw_the_memory(tmp_path):
    store = PlannerModelStore(tmp_path / "planner")
    sft = store.save(PlannerModel(model_folder(tmp_path, "a"), {"train_memory_ids": ["m1", "m2"], "stage": "sft"}))  # fmt: skip
    store.save(PlannerModel(model_folder(tmp_path, "b"), {"train_memory_ids": ["m2"]}))
    # SFT switched off: the base weights copied with the split in the metadata
    store.save(PlannerModel(model_folder(tmp_path, "c"), {"train_memory_ids": ["m1"], "stage": "base"}))  # fmt: skip
    assert [m.version for m in store.trained_on("m1")] == [sft.version]
    assert len(store.trained_on("m2")) == 2
    assert store.trained_on("m3") == []
    assert PlannerModelStore(tmp_path / "never").trained_on("m1") == []


def test_delete_removes_the_version_folder_and_leaves_no_loadable_model(tmp_path):
    store = PlannerModelStore(tmp_path / "planner")
    kept = store.save(PlannerModel(model_folder(tmp_path, "a"), {"n": 1}))
    doomed = store.save(PlannerModel(model_folder(tmp_path, "b"), {"n": 2}))
    # a delete killed after its rename: only a hidden folder, swept by the next delete
    leftover = store.root / f".{kept.version}.deleting-0000"
    leftover.mkdir()
    (leftover / "config.json").write_text("{}")
    assert store.delete(doomed.version) == doomed.folder
    assert not doomed.folder.exists() and not leftover.exists()
    assert store.versions() == [kept.version]
    assert store.get("latest").metadata["n"] == 1
    assert [p.name for p in store.root.iterdir()] == [kept.version]
    with pytest.raises(ConfigError, match="neither 'latest'"):
        resolve_planner(str(doomed.folder), store)  # gone from its path too
    with pytest.raises(ConfigError, match=f"No planner version '{doomed.version}'"):
        store.delete(doomed.version)
