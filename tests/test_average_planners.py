"""benchmarks/average_planners.py: the uniform weight average of planner folders."""

from __future__ import annotations

import json

import pytest

from tests.support.benchmark_scripts import load_benchmark_script


def planner_folder(path, value: float, shape=(2, 3)):
    import torch
    from safetensors.torch import save_file

    path.mkdir()
    save_file(
        {"w": torch.full(shape, value), "b": torch.full((3,), -value)},
        str(path / "model.safetensors"),
    )
    (path / "mera_planner.json").write_text(json.dumps({"stage": "grpo"}))
    (path / "tokenizer.json").write_text("{}")
    return path


def test_the_average_is_the_mean_of_each_weight_and_keeps_the_first_folders_files(tmp_path):
    from safetensors.torch import load_file

    script = load_benchmark_script("average_planners")
    a, b = planner_folder(tmp_path / "a", 1.0), planner_folder(tmp_path / "b", 4.0)
    out = script.average_planners([a, b], tmp_path / "soup")
    weights = load_file(str(out / "model.safetensors"))
    assert weights["w"].tolist() == [[2.5] * 3] * 2 and weights["b"].tolist() == [-2.5] * 3
    assert (out / "tokenizer.json").is_file()
    assert json.loads((out / "mera_planner.json").read_text())["averaged_from"] == [str(a), str(b)]


def test_planners_of_different_shapes_are_refused(tmp_path):
    script = load_benchmark_script("average_planners")
    a, b = planner_folder(tmp_path / "a", 1.0), planner_folder(tmp_path / "b", 1.0, shape=(3, 3))
    with pytest.raises(SystemExit, match="not the same architecture"):
        script.average_planners([a, b], tmp_path / "soup")
    assert not (tmp_path / "soup").exists()  # nothing half-written
