"""The backend protocol. Roles depend on this and nothing else of the LLM layer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

ChatMessage = dict[str, str]  # {"role": "system"|"user"|"assistant", "content": str}


@dataclass
class TokenUsage:
    tokens_in: int = 0
    tokens_out: int = 0
    calls: int = 0
    cached_calls: int = 0
    failed_calls: int = 0
    repaired_calls: int = 0

    def add(self, other: TokenUsage) -> None:
        self.tokens_in += other.tokens_in
        self.tokens_out += other.tokens_out
        self.calls += other.calls
        self.cached_calls += other.cached_calls
        self.failed_calls += other.failed_calls
        self.repaired_calls += other.repaired_calls

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))


@dataclass
class Completion:
    text: str
    tokens_in: int
    tokens_out: int
    model: str
    cached: bool = False
    parsed: Any = None  # the decoded JSON value when JSON was asked for
    repaired: bool = False  # JSON had to be repaired or re-asked


@runtime_checkable
class LLMBackend(Protocol):
    """A chat model. ``complete_json`` returns a Completion whose ``parsed`` is a JSON value."""

    model_name: str

    def complete(
        self, messages: list[ChatMessage], *, max_tokens: int = 512, temperature: float = 0.0
    ) -> Completion: ...

    def complete_json(
        self,
        messages: list[ChatMessage],
        *,
        schema: dict[str, Any] | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
    ) -> Completion: ...
