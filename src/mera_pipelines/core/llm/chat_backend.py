"""What every concrete backend shares: the response cache, the JSON re-ask, usage accounting.

A backend subclasses :class:`CachingChatBackend` and implements only ``_generate``: one request
to its model, returning the raw text and token counts.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from typing import Any

from mera_pipelines.core.errors import LLMCallError
from mera_pipelines.core.llm.base import ChatMessage, Completion, TokenUsage
from mera_pipelines.core.llm.cache import CachedResponse, ResponseCache, cache_key
from mera_pipelines.core.llm.failures import FailedCall, FailureBudgetExceeded, current_item
from mera_pipelines.core.llm.json_repair import (
    RawReply,
    complete_json_with_one_reask,
    parse_json_with_flag,
)


class CachingChatBackend(ABC):
    """Implements the LLMBackend protocol on top of ``_generate``."""

    model_name: str
    kind: str = "chat"  # the factory's name for this backend, shown in reports

    def __init__(self, model_name: str, cache: ResponseCache | None = None) -> None:
        self.model_name = model_name
        self.cache = cache
        self.usage = TokenUsage()
        self._usage_lock = threading.Lock()
        # How many requests callers may run at once (map_bounded); set by the factory.
        self.concurrency = 1
        # Calls that failed after every retry and re-ask, and how many a run may have (None:
        # no limit). Set by the factory from the backend config's ``failure_budget``.
        self.failed_calls: list[FailedCall] = []
        self.failure_budget: int | None = None

    @abstractmethod
    def _generate(
        self, messages: list[ChatMessage], *, max_tokens: int, temperature: float, want_json: bool
    ) -> RawReply:
        """One request to the model. Raise LLMCallError when it cannot be answered."""

    def describe(self) -> dict[str, Any]:
        """What produced the numbers, for reports (never a secret)."""
        return {"kind": self.kind, "model": self.model_name, "cache": self.cache is not None}

    def _cache_extra(self) -> dict[str, Any] | None:
        """Backend options that change replies and so belong in the cache key."""
        return None

    def complete(
        self,
        messages: list[ChatMessage],
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        cache_tag: str | None = None,
    ) -> Completion:
        key = self._key(messages, max_tokens, temperature, json_mode=False)
        hit = self._cache_get(key)
        if hit is not None:
            self._count(cached_calls=1)
            return Completion(hit.text, hit.tokens_in, hit.tokens_out, self.model_name, cached=True)
        self._check_budget()
        try:
            reply = self._generate_counted(
                messages, max_tokens=max_tokens, temperature=temperature, want_json=False
            )
        except LLMCallError as error:
            self._record_failure(error, cache_tag)
            raise
        self._cache_put(
            key,
            text=reply.text,
            tokens_in=reply.tokens_in,
            tokens_out=reply.tokens_out,
            tag=cache_tag,
            repaired=False,
            json_mode=False,
        )
        return Completion(reply.text, reply.tokens_in, reply.tokens_out, self.model_name)

    def complete_json(
        self,
        messages: list[ChatMessage],
        *,
        schema: dict[str, Any] | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
        cache_tag: str | None = None,
    ) -> Completion:
        key = self._key(messages, max_tokens, temperature, json_mode=True, schema=schema)
        hit = self._cache_get(key)
        if hit is not None:
            try:
                parsed = parse_json_with_flag(hit.text).value
            except ValueError:
                parsed = None  # cannot happen for rows we wrote; treat it as a miss
            else:
                self._count(cached_calls=1)
                return Completion(
                    hit.text,
                    hit.tokens_in,
                    hit.tokens_out,
                    self.model_name,
                    cached=True,
                    parsed=parsed,
                    repaired=hit.repaired,
                )

        self._check_budget()

        def call(request: list[ChatMessage]) -> RawReply:
            return self._generate_counted(
                request, max_tokens=max_tokens, temperature=temperature, want_json=True
            )

        try:
            reply = complete_json_with_one_reask(call, messages, schema, self.model_name)
        except LLMCallError as error:
            self._count(failed_calls=1)
            self._record_failure(error, cache_tag)
            raise
        if reply.repaired:
            self._count(repaired_calls=1)
        self._cache_put(
            key,
            text=reply.text,
            tokens_in=reply.tokens_in,
            tokens_out=reply.tokens_out,
            tag=cache_tag,
            repaired=reply.repaired,
            json_mode=True,
        )
        return Completion(
            reply.text,
            reply.tokens_in,
            reply.tokens_out,
            self.model_name,
            parsed=reply.value,
            repaired=reply.repaired,
        )

    def budget_error(self) -> FailureBudgetExceeded | None:
        """The error to stop the run with, once more calls failed than the budget allows."""
        with self._usage_lock:
            failed = len(self.failed_calls)
        if self.failure_budget is None or failed <= self.failure_budget:
            return None
        return FailureBudgetExceeded(self.model_name, failed, self.failure_budget)

    def _check_budget(self) -> None:
        # Over budget, no further request is sent: the roles fall back at no cost, and the
        # project hook ends the run after the node (nothing of the node is saved).
        error = self.budget_error()
        if error is not None:
            raise error

    def _record_failure(self, error: LLMCallError, tag: str | None) -> None:
        if isinstance(error, FailureBudgetExceeded):
            return
        failure = FailedCall(current_item(), tag, self.model_name, str(error))
        with self._usage_lock:
            self.failed_calls.append(failure)

    def _generate_counted(
        self, messages: list[ChatMessage], *, max_tokens: int, temperature: float, want_json: bool
    ) -> RawReply:
        try:
            reply = self._generate(
                messages, max_tokens=max_tokens, temperature=temperature, want_json=want_json
            )
        except LLMCallError:
            # complete_json counts its own failures once, whichever of its two calls failed.
            if not want_json:
                self._count(failed_calls=1)
            raise
        self._count(calls=1, tokens_in=reply.tokens_in, tokens_out=reply.tokens_out)
        return reply

    def _key(
        self,
        messages: list[ChatMessage],
        max_tokens: int,
        temperature: float,
        *,
        json_mode: bool,
        schema: dict[str, Any] | None = None,
    ) -> str:
        extra = dict(self._cache_extra() or {})
        if schema:
            extra["schema"] = schema  # the same prompt checked against another shape may differ
        return cache_key(self.model_name, messages, max_tokens, temperature, json_mode, extra=extra)

    def _cache_get(self, key: str) -> CachedResponse | None:
        return None if self.cache is None else self.cache.get(key)

    def _cache_put(
        self,
        key: str,
        *,
        text: str,
        tokens_in: int,
        tokens_out: int,
        tag: str | None,
        repaired: bool,
        json_mode: bool,
    ) -> None:
        if self.cache is not None:
            self.cache.put(
                key,
                CachedResponse(
                    text, tokens_in, tokens_out, self.model_name, tag, repaired, json_mode
                ),
            )

    def _count(self, **counts: int) -> None:
        with self._usage_lock:
            self.usage.add(TokenUsage(**counts))

    def usage_snapshot(self) -> TokenUsage:
        """A copy of the counts so far, safe to read while other threads keep calling."""
        with self._usage_lock:
            return TokenUsage(**self.usage.as_dict())
