"""A deterministic bag-of-words embedder for unit tests (the real default is MiniLM)."""

from __future__ import annotations

import hashlib
import re

import numpy as np


class HashingEmbedder:
    def __init__(self, dim: int = 64, name: str = "test-hashing") -> None:
        self.dim = dim
        self.name = name
        self.calls = 0

    def embed(self, texts: list[str], *, progress: bool = False) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in re.findall(r"[a-z0-9]+", text.lower()):
                bucket = int(hashlib.md5(token.encode()).hexdigest(), 16) % self.dim
                out[row, bucket] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)
