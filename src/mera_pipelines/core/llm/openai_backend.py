"""Any OpenAI-compatible chat endpoint (OpenAI, vLLM, SGLang, Ollama, llama.cpp server).

The client's own retries are off: we retry here so that the policy (what is retried, how long we
wait, what is logged) is ours and the same for every server.
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from typing import Any

import openai

from mera_pipelines.core.errors import ConfigError, LLMCallError
from mera_pipelines.core.llm.base import ChatMessage
from mera_pipelines.core.llm.cache import ResponseCache
from mera_pipelines.core.llm.chat_backend import CachingChatBackend
from mera_pipelines.core.llm.json_repair import RawReply, with_json_instruction

logger = logging.getLogger(__name__)

# 408 is a server-side timeout and 429 a rate limit: both pass. Other 4xx are our fault.
_RETRYABLE_4XX = {408, 429}
# Local servers (vLLM, Ollama, llama.cpp) accept any key; the client insists on one.
_PLACEHOLDER_KEY = "not-needed"


class _Retryable(Exception):
    """An attempt failed in a way that may pass; ``wait`` is the server's Retry-After, if any."""

    def __init__(self, reason: str, wait: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.wait = wait


class OpenAIBackend(CachingChatBackend):
    kind = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 60.0,
        max_retries: int = 4,
        backoff_base: float = 0.5,
        backoff_max: float = 20.0,
        cache: ResponseCache | None = None,
        json_mode: bool = True,
        extra_body: dict[str, Any] | None = None,
        retry_after_max: float = 120.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(model, cache)
        if max_retries < 0:
            raise ConfigError(f"max_retries must be >= 0, got {max_retries}")
        if timeout <= 0:
            raise ConfigError(f"timeout must be > 0 seconds, got {timeout}")
        key = api_key or os.environ.get(api_key_env)
        if not key:
            if base_url is None:
                raise ConfigError(
                    f"No API key for model '{model}': set the environment variable "
                    f"{api_key_env} or give the key in conf/local/credentials.yml"
                )
            key = _PLACEHOLDER_KEY
        self.base_url = base_url
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff_base = float(backoff_base)
        self.backoff_max = float(backoff_max)
        self.retry_after_max = float(retry_after_max)
        self.json_mode = json_mode
        self.extra_body = dict(extra_body) if extra_body else None
        self._sleep = sleep
        self._secret = key
        self._client = openai.OpenAI(
            api_key=key, base_url=base_url, timeout=self.timeout, max_retries=0
        )

    def __repr__(self) -> str:
        return f"OpenAIBackend(model={self.model_name!r}, base_url={self.base_url!r})"

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "base_url": self.base_url or "https://api.openai.com/v1"}

    def _cache_extra(self) -> dict[str, Any] | None:
        return {"extra_body": self.extra_body} if self.extra_body else None

    def _generate(
        self, messages: list[ChatMessage], *, max_tokens: int, temperature: float, want_json: bool
    ) -> RawReply:
        request: dict[str, Any] = {
            "model": self.model_name,
            "messages": with_json_instruction(messages) if want_json else messages,
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        if want_json and self.json_mode:
            request["response_format"] = {"type": "json_object"}
        if self.extra_body:
            request["extra_body"] = self.extra_body
        last_reason = ""
        for attempt in range(self.max_retries + 1):
            try:
                return self._attempt(request)
            except _Retryable as failure:
                last_reason = failure.reason
                if attempt == self.max_retries:
                    break
                delay = self._delay(attempt, failure.wait)
                logger.warning(
                    "LLM call to '%s' failed (%s); retry %d/%d in %.2f s",
                    self.model_name,
                    last_reason,
                    attempt + 1,
                    self.max_retries,
                    delay,
                )
                self._sleep(delay)
        raise LLMCallError(
            f"Model '{self.model_name}' at {self.base_url or 'the OpenAI API'} failed after "
            f"{self.max_retries + 1} attempts: {last_reason}"
        )

    def _attempt(self, request: dict[str, Any]) -> RawReply:
        """One HTTP request. Raises _Retryable for transient failures, LLMCallError otherwise."""
        try:
            response = self._client.chat.completions.create(**request)
        except openai.APIStatusError as exc:
            reason = f"HTTP {exc.status_code}: {self._scrub(exc.message)}"
            if exc.status_code in _RETRYABLE_4XX or exc.status_code >= 500:
                raise _Retryable(reason, _retry_after_seconds(exc.response.headers)) from None
            # from None: the chained openai error carries the request, and with it the key.
            raise LLMCallError(
                f"Model '{self.model_name}' at {self.base_url or 'the OpenAI API'} "
                f"refused the request ({reason})"
            ) from None
        except openai.APITimeoutError:
            raise _Retryable(f"no reply within {self.timeout:g} s") from None
        except openai.APIConnectionError as exc:
            raise _Retryable(
                f"connection error: {self._scrub(str(exc.__cause__ or exc))}"
            ) from None
        except openai.APIResponseValidationError as exc:
            raise _Retryable(f"unreadable response: {self._scrub(exc.message)}") from None
        except json.JSONDecodeError as exc:
            # A proxy's HTML error page sent as 200: the client fails decoding it.
            raise _Retryable(f"response body is not JSON ({exc.msg})") from None
        return self._read(response)

    def _read(self, response: Any) -> RawReply:
        choices = getattr(response, "choices", None)
        if not choices:
            raise _Retryable("response has no choices")
        message = choices[0].message
        text = message.content or ""
        refusal = getattr(message, "refusal", None)
        if not text and refusal:
            text = refusal  # the JSON check then reports it as not JSON, and it gets re-asked
        usage = getattr(response, "usage", None)
        tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0)
        tokens_out = int(getattr(usage, "completion_tokens", 0) or 0)
        return RawReply(text, tokens_in, tokens_out)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            # The server said when; a little jitter keeps parallel workers from returning together.
            return min(retry_after, self.retry_after_max) * random.uniform(1.0, 1.1)
        ceiling = min(self.backoff_max, self.backoff_base * (2**attempt))
        return random.uniform(ceiling / 2, ceiling)  # "equal jitter"

    def _scrub(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret else text


def _retry_after_seconds(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date), if present."""
    if headers is None:
        return None
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            return max(0.0, float(milliseconds) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None
