"""LLM calls that finally failed: which item (turn or question) they served, why, and the
per-run failure budget.

A role falls back to its heuristic when a call fails, so a run goes on; these records make sure
no such fallback goes unnoticed (the project hook logs them to MLflow), and the budget stops a
run whose server is plainly broken before it spends hours producing heuristic results.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from mera_pipelines.core.errors import LLMCallError

# The item (a turn, a question) the current thread is working on; set by map_bounded.
_CURRENT_ITEM: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "mera_current_item", default=None
)


@dataclass(frozen=True)
class FailedCall:
    item: str | None  # e.g. "turn conv-1/D3:4" or "question conv-1/q7"; None outside map_bounded
    tag: str | None  # the call's cache tag (its memory id)
    model: str
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class FailureBudgetExceeded(LLMCallError):
    """More calls finally failed in this run than its failure budget allows."""

    def __init__(self, model: str, failed: int, budget: int) -> None:
        super().__init__(
            f"LLM failure budget exceeded for model '{model}': {failed} calls failed after every "
            f"retry and re-ask, the budget (llm.<role>.failure_budget) allows {budget}. The "
            "server is unreachable or broken; the run stops instead of finishing with heuristic "
            "fallbacks. Completed calls are cached: fix the server and run again."
        )
        self.failed = failed
        self.budget = budget


def item_label(item: Any) -> str:
    """How a failure names the item it served: a question id, a memory/turn id, or a repr."""
    if isinstance(item, tuple) and item:
        item = item[0]  # (turn, context) pairs of the extractor
    question_id = getattr(item, "question_id", None)
    if isinstance(question_id, str):
        return f"question {question_id}"
    turn_id = getattr(item, "turn_id", None)
    if isinstance(turn_id, str):
        return f"turn {getattr(item, 'memory_id', '?')}/{turn_id}"
    text = repr(item)
    return text if len(text) <= 120 else text[:117] + "..."


@contextmanager
def working_on(item: Any) -> Iterator[None]:
    """Within the block, failed LLM calls are recorded as serving ``item``."""
    token = _CURRENT_ITEM.set(item_label(item))
    try:
        yield
    finally:
        _CURRENT_ITEM.reset(token)


def current_item() -> str | None:
    return _CURRENT_ITEM.get()


def failed_calls_of(backends: dict[str, Any]) -> dict[str, list[FailedCall]]:
    """The failed calls of each backend-like value (by name) that records them."""
    return {
        name: list(backend.failed_calls)
        for name, backend in backends.items()
        if isinstance(getattr(backend, "failed_calls", None), list)
    }


def exceeded_budget(backends: dict[str, Any]) -> FailureBudgetExceeded | None:
    """The error to end the run with when any backend went over its failure budget."""
    for backend in backends.values():
        check = getattr(backend, "budget_error", None)
        error = check() if callable(check) else None
        if error is not None:
            return error
    return None
