"""A local causal LM from a folder on disk (SmolLM2, Qwen3, a trained planner), via transformers.

The model loads on the first call, not at construction: building a pipeline must stay cheap, and
a backend that is configured but never asked costs nothing. Generation is serialised by a lock:
one model on CPU gains nothing from parallel generate calls and torch is not safe under them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mera_pipelines.core.errors import ConfigError, LLMCallError
from mera_pipelines.core.llm.base import ChatMessage
from mera_pipelines.core.llm.cache import ResponseCache
from mera_pipelines.core.llm.chat_backend import CachingChatBackend
from mera_pipelines.core.llm.json_repair import (
    RawReply,
    json_value_closed,
    with_json_instruction,
)

logger = logging.getLogger(__name__)


class TransformersBackend(CachingChatBackend):
    kind = "transformers"

    def __init__(
        self,
        path: str | Path,
        *,
        device: str = "cpu",
        torch_threads: int | None = None,
        max_new_tokens: int = 512,
        cache: ResponseCache | None = None,
        model_name: str | None = None,
    ) -> None:
        self.path = Path(path)
        super().__init__(model_name or self.path.name, cache)
        if max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        self.device = device
        self.torch_threads = torch_threads
        self.max_new_tokens = int(max_new_tokens)
        self._model: Any = None
        self._tokenizer: Any = None
        self._load_lock = threading.Lock()
        self._generate_lock = threading.Lock()

    @classmethod
    def from_loaded(cls, model: Any, tokenizer: Any, model_name: str) -> TransformersBackend:
        """A backend over a model already in memory: the policy GRPO is training, whose later
        rounds the trajectory reward plays (``reward.continuation: policy``). No cache: its
        weights change between calls."""
        backend = cls("<in memory>", model_name=model_name)
        backend._model, backend._tokenizer = model, tokenizer
        return backend

    def __repr__(self) -> str:
        return f"TransformersBackend(path={str(self.path)!r}, device={self.device!r})"

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "path": str(self.path), "device": self.device}

    def _cache_extra(self) -> dict[str, Any] | None:
        if self.cache is None:  # no key is looked up: spare the folder's stat calls
            return None
        # Two folders of the same name (a retrained planner) must not share cached replies.
        return {"weights": _folder_fingerprint(self.path)}

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def load(self) -> None:
        """Load tokenizer and weights now (otherwise done on the first call)."""
        with self._load_lock:
            if self._model is not None:
                return
            if not (self.path / "config.json").is_file():
                raise ConfigError(
                    f"No model folder at '{self.path}' (config.json missing): give the path of a "
                    "saved transformers model"
                )
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            if self.torch_threads:
                # Process-wide: on 2 cores, an unset count makes tiny models stall under contention.
                torch.set_num_threads(int(self.torch_threads))
            tokenizer = AutoTokenizer.from_pretrained(self.path, local_files_only=True)
            if tokenizer.chat_template is None:
                raise ConfigError(f"The tokenizer in '{self.path}' has no chat template")
            model = AutoModelForCausalLM.from_pretrained(
                self.path, local_files_only=True, dtype=torch.float32
            )
            model.to(self.device)
            model.eval()
            self._tokenizer = tokenizer
            self._model = model
            logger.info("Loaded %s from %s on %s", self.model_name, self.path, self.device)

    def _generate(
        self, messages: list[ChatMessage], *, max_tokens: int, temperature: float, want_json: bool
    ) -> RawReply:
        self.load()
        import torch

        request = with_json_instruction(messages) if want_json else messages
        tokenizer, model = self._tokenizer, self._model
        try:
            encoded = tokenizer.apply_chat_template(
                request,
                add_generation_prompt=True,
                tokenize=True,
                return_dict=True,
                return_tensors="pt",
            )
        except Exception as exc:  # a template that rejects the roles, e.g. no system role
            raise LLMCallError(
                f"Model '{self.model_name}': its chat template rejected the messages: {exc}"
            ) from exc
        input_ids = encoded["input_ids"].to(self.device)
        attention_mask = encoded["attention_mask"].to(self.device)
        options = _sampling_options(temperature)
        if want_json:
            options["stopping_criteria"] = _stop_when_json_closes(tokenizer, input_ids.shape[1])
        with self._generate_lock, torch.inference_mode(), _eval_mode(model):
            output = model.generate(
                input_ids=input_ids,
                attention_mask=attention_mask,
                max_new_tokens=min(int(max_tokens), self.max_new_tokens),
                pad_token_id=tokenizer.pad_token_id
                if tokenizer.pad_token_id is not None
                else tokenizer.eos_token_id,
                **options,
            )
        new_tokens = output[0, input_ids.shape[1] :]
        text = tokenizer.decode(new_tokens, skip_special_tokens=True).strip()
        return RawReply(text, int(input_ids.shape[1]), int(new_tokens.shape[0]))


@contextmanager
def _eval_mode(model: Any) -> Iterator[None]:
    """Generate without dropout, and leave a model that is being trained in training mode."""
    training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(training)


def _stop_when_json_closes(tokenizer: Any, prompt_length: int) -> Any:
    """Stop a JSON reply at the end of its first value (``json_value_closed``), not at the limit."""
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    class JsonValueClosed(StoppingCriteria):
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            # a value can only close on a token with a closing bracket: decode the reply then
            last = tokenizer.decode(input_ids[0, -1:], skip_special_tokens=True)
            done = ("}" in last or "]" in last) and json_value_closed(
                tokenizer.decode(input_ids[0, prompt_length:], skip_special_tokens=True)
            )
            return torch.full(
                (input_ids.shape[0],), done, dtype=torch.bool, device=input_ids.device
            )

    return StoppingCriteriaList([JsonValueClosed()])


def _sampling_options(temperature: float) -> dict[str, Any]:
    if temperature > 0:
        return {"do_sample": True, "temperature": float(temperature), "top_p": 1.0, "top_k": 0}
    # Greedy. Saved generation configs often carry sampling defaults that would only warn here.
    return {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}


def _folder_fingerprint(path: Path) -> str:
    """The resolved folder with the size and mtime of its weight and config files."""
    parts = [str(path.resolve())]
    if path.is_dir():
        for file in sorted(path.iterdir()):
            if file.suffix in {".safetensors", ".bin", ".json"} and file.is_file():
                stat = file.stat()
                parts.append(f"{file.name}:{stat.st_size}:{stat.st_mtime_ns}")
    return "|".join(parts)
