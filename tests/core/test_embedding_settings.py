"""Embedding settings: `threads` (torch's process-wide thread count, set for an encode call
only) and `dtype` (bfloat16 where the CPU has native bf16 units)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mera_pipelines.core.embedding import (
    PACKAGED_MINILM,
    _torch_threads,
    cpu_has_native_bf16,
    load_embedder,
    resolve_dtype,
)
from mera_pipelines.core.errors import ConfigError


def test_threads_are_set_during_the_call_and_restored_after():
    before = torch.get_num_threads()
    with _torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_no_threads_leaves_torch_alone():
    before = torch.get_num_threads()
    with _torch_threads(None):
        assert torch.get_num_threads() == before


def test_zero_threads_is_a_config_error():
    with pytest.raises(ConfigError, match="embedding.threads"):
        load_embedder("packaged:all-MiniLM-L6-v2", "cpu", 64, 0)


AMX_CPU = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f amx_bf16 amx_tile\n"
OLD_CPU = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f\n"


def test_native_bf16_is_read_from_the_cpu_flags():
    assert cpu_has_native_bf16(AMX_CPU)
    assert cpu_has_native_bf16(AMX_CPU.replace("amx_bf16", "avx512_bf16"))
    assert not cpu_has_native_bf16(OLD_CPU)
    assert not cpu_has_native_bf16("")


def test_explicit_dtypes_pass_through_and_auto_keeps_float32_off_cpu():
    assert resolve_dtype("float32") == "float32"
    assert resolve_dtype("bfloat16") == "bfloat16"
    assert resolve_dtype("auto", device="cuda") == "float32"
    assert resolve_dtype("auto") in ("float32", "bfloat16")


def test_unknown_dtype_is_a_config_error():
    with pytest.raises(ConfigError, match="embedding.dtype"):
        load_embedder(PACKAGED_MINILM, "cpu", 64, None, "float16")


def test_bfloat16_vectors_are_unit_length_and_agree_with_float32():
    texts = [
        "Caroline went to the LGBTQ support group on 7 May 2023.",
        "Melanie painted a sunrise over the lake last year.",
        "The user adopted a beagle named Biscuit.",
    ]
    exact = load_embedder(PACKAGED_MINILM, "cpu", 64, None, "float32")
    half = load_embedder(PACKAGED_MINILM, "cpu", 64, None, "bfloat16")
    assert (exact.dtype, half.dtype) == ("float32", "bfloat16")
    a, b = exact.embed(texts), half.embed(texts)
    assert b.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    assert float((a * b).sum(axis=1).min()) > 0.999
    # and the nearest neighbours stay the same
    assert ((a @ a.T).argsort(axis=1) == (b @ b.T).argsort(axis=1)).all()


def test_auto_shares_the_model_of_the_dtype_it_resolves_to():
    auto = load_embedder(PACKAGED_MINILM, "cpu", 64, None, "auto")
    assert auto is load_embedder(PACKAGED_MINILM, "cpu", 64, None, resolve_dtype("auto"))
    assert auto.dtype == resolve_dtype("auto")
