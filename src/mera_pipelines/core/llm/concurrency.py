"""Run a function over many items with bounded parallelism, keeping going past failures.

LLM calls are I/O-bound against a server (threads suffice); one bad item must not throw away the
hundreds of answers already paid for, so failures come back as values the caller counts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, TypeVar

from tqdm.auto import tqdm

from mera_pipelines.core.llm.failures import working_on

Item = TypeVar("Item")
Result = TypeVar("Result")

_REPR_LIMIT = 200


@dataclass(frozen=True)
class ItemFailure:
    """Stands in the results for an item whose call raised."""

    index: int
    item_repr: str
    error: Exception

    @property
    def message(self) -> str:
        return f"item {self.index} ({self.item_repr}): {type(self.error).__name__}: {self.error}"


def map_bounded(
    fn: Callable[[Item], Result],
    items: Iterable[Item],
    concurrency: int = 1,
    desc: str | None = None,
    progress: bool = True,
) -> list[Result | ItemFailure]:
    """``[fn(item) for item in items]`` in input order, at most ``concurrency`` at once.

    An item whose call raises an Exception yields an :class:`ItemFailure` in its place.
    KeyboardInterrupt and other BaseExceptions still stop the run.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    materialised = list(items)
    results: list[Any] = [None] * len(materialised)
    with tqdm(total=len(materialised), desc=desc, disable=not progress) as bar:
        if concurrency == 1 or len(materialised) <= 1:
            for index, item in enumerate(materialised):
                results[index] = _call(fn, index, item)
                bar.update(1)
            return results
        pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="map_bounded")
        try:
            futures: dict[Future[Any], int] = {
                pool.submit(_call, fn, index, item): index
                for index, item in enumerate(materialised)
            }
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                bar.update(1)
        except BaseException:
            # Ctrl-C: drop the queued items instead of waiting for every one of them.
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
    return results


def failures(results: Iterable[Any]) -> list[ItemFailure]:
    return [result for result in results if isinstance(result, ItemFailure)]


def _call(fn: Callable[[Any], Any], index: int, item: Any) -> Any:
    try:
        with working_on(item):  # a failed LLM call inside fn is recorded against this item
            return fn(item)
    except Exception as error:
        return ItemFailure(index, _short_repr(item), error)


def _short_repr(item: Any) -> str:
    text = repr(item)
    return text if len(text) <= _REPR_LIMIT else text[: _REPR_LIMIT - 3] + "..."
