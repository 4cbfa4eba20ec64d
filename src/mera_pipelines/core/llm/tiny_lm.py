"""A tiny causal LM: a 2-layer from-config Qwen3 with a BPE tokenizer trained on the fly.

For smoke tests and step-time benchmarks of the training stack (tests/, benchmarks/bench_grpo.py),
never for results. Nothing is downloaded; building one takes about a second. It writes JSON poorly
(it is random), which is what the planner's parse-failure paths and the training loop's plumbing
need.
"""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}<|end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
SPECIAL_TOKENS = ["<|pad|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]
_CORPUS = [
    '{"intents": [{"desired_fact": "when did Caroline go to the support group", '
    '"entities": ["Caroline", "support group"], "topics": ["event"]}]}',
    "You plan searches over a memory of conversation facts. You reply with JSON only.",
    "Question: What did Melanie paint? Evidence graph so far (verified facts, entities)",
    "Newly verified anchors, question words no evidence covers yet, earlier queries",
    "the a of to and in is was what when where who how did does her his their with for on at",
]


def build_tiny_lm(target: Path, *, vocab_size: int = 400, seed: int = 0) -> Path:
    """Write a tiny Qwen3 model and tokenizer folder at ``target`` and return it."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    bpe = Tokenizer(models.BPE(unk_token=None))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_CORPUS * 4, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|end|>", pad_token="<|pad|>"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=4096,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target
