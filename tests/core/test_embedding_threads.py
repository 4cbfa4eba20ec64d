"""`embedding.threads`: torch's process-wide thread count is set for an encode call only."""

from __future__ import annotations

import pytest
import torch

from mera_pipelines.core.embedding import _torch_threads, load_embedder
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
