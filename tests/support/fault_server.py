"""Fault injection for the OpenAI-compatible stub: a handler that breaks a share of the calls.

    answer = extraction_answer            # what a healthy server replies
    faults = FaultInjector(answer, FaultPlan(rate=0.3, seed=7))
    with StubServer(handler=faults) as server: ...
    faults.injected  # Counter: fault kind -> how many were served

Each fault is one of ``FAULT_KINDS``: a 429 with Retry-After, a 500, a 503, a dropped
connection, a reply slower than the client's timeout, a truncated HTTP body, malformed JSON
content, JSON content cut off mid-value, empty content, a refusal.

Decisions are seeded and per *logical call* (the prompt: the request's first two messages,
which a JSON re-ask keeps): the n-th attempt of a given call draws from
``Random(f"{seed}:{call}:{n}")``, so the same faults hit the same calls whatever the thread
interleaving. ``max_faults_per_call`` bounds the faults one call meets (and content faults to
one, the one re-ask the client makes) so that with enough retries every call can succeed: the
setting for "faults survived, results unchanged" tests. ``max_faults_per_call=None`` lets a
call fail for good (for failure-budget tests).
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.support.openai_stub import Reply

TRANSPORT_FAULTS = (
    "rate_limited",
    "server_error",
    "unavailable",
    "dropped_connection",
    "timeout",
    "truncated_body",
)
CONTENT_FAULTS = ("malformed_json", "truncated_json", "empty", "refusal")
FAULT_KINDS = TRANSPORT_FAULTS + CONTENT_FAULTS

Answer = Callable[[dict[str, Any]], Reply]


@dataclass(frozen=True)
class FaultPlan:
    rate: float = 0.3
    seed: int = 0
    kinds: tuple[str, ...] = FAULT_KINDS
    max_faults_per_call: int | None = 2
    timeout_delay: float = 1.5  # seconds; set above the client's timeout
    retry_after: str = "0.05"  # the Retry-After header of a 429

    def __post_init__(self) -> None:
        unknown = set(self.kinds) - set(FAULT_KINDS)
        if unknown or not 0 <= self.rate <= 1:
            raise ValueError(f"bad fault plan: unknown kinds {unknown} or rate {self.rate}")


def call_key(body: dict[str, Any]) -> str:
    """The logical call a request belongs to: its first two messages (a re-ask adds more)."""
    messages = body.get("messages", [])[:2] if isinstance(body, dict) else []
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class _CallState:
    attempts: int = 0
    faults: int = 0
    content_faults: int = 0


@dataclass
class FaultInjector:
    """A StubServer handler: ``answer`` for healthy requests, a planned fault for the others."""

    answer: Answer
    plan: FaultPlan = field(default_factory=FaultPlan)
    injected: Counter = field(default_factory=Counter)
    answered: int = 0
    _calls: dict[str, _CallState] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, body: dict[str, Any]) -> Reply:
        key = call_key(body)
        body = body if isinstance(body, dict) else {}
        with self._lock:
            state = self._calls.setdefault(key, _CallState())
            rng = random.Random(f"{self.plan.seed}:{key}:{state.attempts}")
            state.attempts += 1
            kind = self._pick(state, rng, json_mode="response_format" in body)
            if kind is not None:
                state.faults += 1
                state.content_faults += kind in CONTENT_FAULTS
                self.injected[kind] += 1
            else:
                self.answered += 1
        if kind is None:
            return self.answer(body)
        return self._fault_reply(kind, body)

    @property
    def total_injected(self) -> int:
        return sum(self.injected.values())

    def _pick(self, state: _CallState, rng: random.Random, json_mode: bool) -> str | None:
        limit = self.plan.max_faults_per_call
        if rng.random() >= self.plan.rate or (limit is not None and state.faults >= limit):
            return None
        # Bad content is detectable (and re-asked) only where JSON was asked for: in a plain
        # text call "I can't help with that" is an answer like any other.
        kinds = [
            kind
            for kind in self.plan.kinds
            if kind not in CONTENT_FAULTS
            or (json_mode and (limit is None or state.content_faults == 0))
        ]
        return rng.choice(kinds) if kinds else None

    def _fault_reply(self, kind: str, body: dict[str, Any]) -> Reply:
        if kind == "rate_limited":
            return Reply.rate_limited(retry_after=self.plan.retry_after)
        if kind == "server_error":
            return Reply.server_error(500)
        if kind == "unavailable":
            return Reply.unavailable()
        if kind == "dropped_connection":
            return Reply.dropped_connection()
        if kind == "timeout":
            return Reply.slow(self.plan.timeout_delay)
        if kind == "truncated_body":
            return Reply.truncated_body()
        if kind == "malformed_json":
            return Reply.malformed_json()
        if kind == "empty":
            return Reply.empty()
        if kind == "refusal":
            return Reply.refused()
        # truncated_json: the healthy reply's content cut inside its first string
        healthy = self.answer(body)
        content = healthy.content or ""
        cut = content.find('"', content.find(":") + 1) + 6 if ":" in content else len(content) // 2
        return Reply(content[:cut], finish_reason="length")
