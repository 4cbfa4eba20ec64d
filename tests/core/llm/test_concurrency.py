import threading
import time

import pytest

from mera_pipelines.core.llm.concurrency import ItemFailure, failures, map_bounded


def slow_square(value: int) -> int:
    # Later items finish first, so ordering by completion would scramble the results.
    time.sleep(0.01 * (5 - value % 5))
    return value * value


@pytest.mark.parametrize("concurrency", [1, 3])
def test_results_keep_input_order(concurrency):
    assert map_bounded(slow_square, range(10), concurrency, progress=False) == [
        v * v for v in range(10)
    ]


def test_failures_are_collected_in_place_without_stopping_the_others():
    def fragile(value: int) -> int:
        if value % 4 == 0:
            raise ValueError(f"bad item {value}")
        return value

    results = map_bounded(fragile, range(9), concurrency=2, desc="fragile", progress=False)
    found = failures(results)
    assert [failure.index for failure in found] == [0, 4, 8]
    assert results[1:4] == [1, 2, 3] and results[5:8] == [5, 6, 7]
    assert found[1] == results[4]
    assert found[1].item_repr == "4" and isinstance(found[1].error, ValueError)
    assert found[1].message == "item 4 (4): ValueError: bad item 4"


def test_at_most_concurrency_calls_run_at_once():
    running = 0
    peak = 0
    lock = threading.Lock()

    def track(_):
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.02)
        with lock:
            running -= 1

    map_bounded(track, range(12), concurrency=3, progress=False)
    assert peak == 3


def test_sequential_mode_runs_in_the_calling_thread():
    caller = threading.get_ident()
    assert map_bounded(lambda _: threading.get_ident(), range(3), 1, progress=False) == [caller] * 3


def test_long_items_are_shortened_in_the_failure_and_bad_concurrency_is_refused():
    def boom(_):
        raise RuntimeError("x")

    (failure,) = map_bounded(boom, ["y" * 1000], progress=False)
    assert isinstance(failure, ItemFailure) and len(failure.item_repr) == 200
    with pytest.raises(ValueError, match="concurrency must be >= 1"):
        map_bounded(boom, [1], concurrency=0)


def test_progress_bar_is_shown_with_its_description(capsys):
    map_bounded(lambda v: v, range(3), 2, desc="answering", progress=True)
    assert "answering" in capsys.readouterr().err
