"""Globals a run can override with --params (`memory.ann_index`, the SFT teacher's backend), and
the errors that name the setting to mend."""

from __future__ import annotations

from pathlib import Path

import pytest
from kedro.config import OmegaConfigLoader
from kedro.io import DatasetError

from mera_pipelines.core.memory import AnnSettings
from mera_pipelines.datasets import LanceDBMemoryDataset
from mera_pipelines.datasets.llm_backend import LLMBackendDataset
from mera_pipelines.hooks import find_mera_error

CONF = Path(__file__).resolve().parents[1] / "conf"


def catalog_entry(name: str, runtime_params: dict | None = None) -> dict:
    loader = OmegaConfigLoader(
        str(CONF), base_env="base", default_run_env="local", runtime_params=runtime_params
    )
    return loader["catalog"][name]


def memory_index_config(runtime_params: dict | None = None) -> dict:
    return catalog_entry("memory_index", runtime_params)


def test_default_is_auto_with_a_row_threshold():
    ann = AnnSettings.from_params(memory_index_config()["ann"])
    assert ann.index == "auto" and ann.min_rows == 250_000 and ann.index_type == "IVF_FLAT"


def test_runtime_param_overrides_the_index(tmp_path):
    config = memory_index_config({"memory": {"ann_index": "none"}})
    assert config["ann"] == "none"
    dataset = LanceDBMemoryDataset(uri=str(tmp_path / "db"), ann=config["ann"])
    assert dataset._describe()["ann"]["index"] == "none"


def test_a_bad_index_type_fails_when_the_catalog_is_built(tmp_path):
    with pytest.raises(Exception, match="ann_index"):
        LanceDBMemoryDataset(uri=str(tmp_path / "db"), ann={"index": "faiss"})


def test_the_teacher_is_the_heuristic_unless_a_run_names_one():
    assert catalog_entry("teacher_planner_llm")["backend"] == {"kind": "none"}


def test_a_run_can_name_a_trained_planner_as_the_teacher():
    # a trained planner is a versioned folder, so a run names it on the command line:
    # --params="llm.teacher_planner.kind=transformers,llm.teacher_planner.path=<folder>"
    teacher = {"kind": "transformers", "path": "data/06_models/planner/2026-12-03T14.38.01.680Z"}
    backend = catalog_entry("teacher_planner_llm", {"llm": {"teacher_planner": teacher}})["backend"]
    assert backend == teacher


def test_a_teacher_named_without_its_kind_fails_naming_the_setting(tmp_path):
    # the override replaces the whole backend, so `path` alone leaves no kind
    entry = catalog_entry("teacher_planner_llm", {"llm": {"teacher_planner": {"path": "x"}}})
    dataset = LLMBackendDataset(
        backend=entry["backend"], cache_dir=str(tmp_path), setting=entry["setting"]
    )
    with pytest.raises(DatasetError) as raised:  # Kedro wraps a load error
        dataset.load()
    # the paragraph the run's error hook prints: `ERROR: <this>`
    assert str(find_mera_error(raised.value)).startswith(
        "llm.teacher_planner: Unknown LLM backend kind None"
    )


def test_every_llm_backend_in_the_catalog_names_its_setting():
    loader = OmegaConfigLoader(str(CONF), base_env="base", default_run_env="local")
    backends = {
        name: entry
        for name, entry in loader["catalog"].items()
        if entry.get("type", "").endswith("LLMBackendDataset")
    }
    assert len(backends) >= 8
    for name, entry in backends.items():
        assert entry.get("setting") == f"llm.{name.removesuffix('_llm')}", name
