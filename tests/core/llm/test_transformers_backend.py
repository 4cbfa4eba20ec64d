"""TransformersBackend on tiny from-config models saved to disk and loaded back like real ones.

The models are untrained, so their replies are made predictable by construction: with the output
layer zeroed every logit is 0 and greedy decoding always picks token id 0, whose text we choose.
"""

from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from mera_pipelines.core.errors import ConfigError, LLMCallError
from mera_pipelines.core.llm.base import LLMBackend
from mera_pipelines.core.llm.cache import ResponseCache
from mera_pipelines.core.llm.concurrency import map_bounded
from mera_pipelines.core.llm.transformers_backend import TransformersBackend

SPECIALS = ["<unk>", "<pad>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]
WORDS = [
    *("alice", "bob", "tea", "kyoto", "paris", "drank", "went", "to", "in", "the", "a"),
    *("what", "did", "who", "where", "when", "json", "reply"),
]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|> {{ message['content'] }} <|end|> "
    "{% endfor %}{% if add_generation_prompt %}<|assistant|> {% endif %}"
)


def build_tiny_model(folder: Path, first_token: str) -> Path:
    """A 2-layer Llama whose vocabulary starts with ``first_token``; lm_head zeroed if asked."""
    vocab = {token: index for index, token in enumerate([first_token, *SPECIALS, *WORDS])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        unk_token="<unk>",
        pad_token="<pad>",
        eos_token="<|end|>",
        additional_special_tokens=SPECIALS[3:],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=False,
        pad_token_id=vocab["<pad>"],
        eos_token_id=vocab["<|end|>"],
        bos_token_id=None,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        model.lm_head.weight.zero_()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def json_model(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("json_model"), '{"ok": true}')


@pytest.fixture(scope="module")
def prose_model(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("prose_model"), "hello")


QUESTION = [
    {"role": "system", "content": "reply in json"},
    {"role": "user", "content": "what did alice drink in kyoto"},
]


def test_loads_lazily_applies_the_chat_template_and_counts_tokens(prose_model):
    backend = TransformersBackend(prose_model, torch_threads=1, max_new_tokens=6)
    assert isinstance(backend, LLMBackend)
    assert not backend.loaded

    completion = backend.complete(QUESTION, max_tokens=50)

    assert backend.loaded
    # <|system|> reply in json <|end|> <|user|> what did alice drink in kyoto <|end|> <|assistant|>
    assert completion.tokens_in == 3 + 1 + 7 + 1 + 1 + 1
    assert completion.tokens_out == 6  # max_new_tokens caps the per-call max_tokens
    assert completion.text == " ".join(["hello"] * 6)
    assert completion.model == prose_model.name
    assert (
        backend.usage.calls == 1 and backend.usage.tokens_in == 14 and backend.usage.tokens_out == 6
    )


def test_sampling_runs_when_temperature_is_positive(prose_model):
    backend = TransformersBackend(prose_model, max_new_tokens=4)
    # Flat logits: sampling may pick any token, greedy always the first.
    completion = backend.complete(QUESTION, max_tokens=4, temperature=1.0)
    assert 1 <= completion.tokens_out <= 4


def test_complete_json_parses_the_reply_and_caches_it(json_model, tmp_path):
    backend = TransformersBackend(
        json_model, max_new_tokens=3, cache=ResponseCache(tmp_path / "c.sqlite")
    )
    first = backend.complete_json(QUESTION, max_tokens=3, cache_tag="mem")
    second = backend.complete_json(QUESTION, max_tokens=3, cache_tag="mem")

    assert first.parsed == {"ok": True}
    # generation stopped where the first value closed, not at the limit with three in a row
    assert first.text == '{"ok": true}' and first.tokens_out == 1
    assert not first.repaired
    assert second.cached and second.parsed == {"ok": True}
    assert backend.usage.calls == 1 and backend.usage.cached_calls == 1


def test_only_json_replies_stop_where_their_value_closes(json_model):
    backend = TransformersBackend(json_model, max_new_tokens=3)
    assert backend.complete(QUESTION, max_tokens=3).tokens_out == 3
    assert backend.complete_json(QUESTION, max_tokens=3).tokens_out == 1


def test_complete_json_reasks_once_then_raises(prose_model):
    backend = TransformersBackend(prose_model, max_new_tokens=3)
    with pytest.raises(
        LLMCallError, match=f"Model '{prose_model.name}' did not return usable JSON"
    ):
        backend.complete_json(QUESTION)
    assert backend.usage.calls == 2 and backend.usage.failed_calls == 1


def test_parallel_callers_share_one_model_safely(json_model):
    backend = TransformersBackend(json_model, max_new_tokens=2)
    questions = [[{"role": "user", "content": f"who went to paris {index}"}] for index in range(4)]
    results = map_bounded(lambda q: backend.complete_json(q).parsed, questions, 2, progress=False)
    assert results == [{"ok": True}] * 4
    assert backend.usage.calls == 4


def test_a_folder_without_a_model_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="config.json missing"):
        TransformersBackend(tmp_path).complete(QUESTION)
