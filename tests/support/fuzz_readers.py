"""Count the bad inputs the readers survive: ``python -m tests.support.fuzz_readers [N]``.

Feeds N hypothesis-generated mutated files per format (see ``tests.support.fuzzing``) to the
real readers and prints, as JSON, how many of each kind were tried and how each ended: a clean
error naming file/record/field, a valid (repaired) result, or a crash (any other exception,
or an unclear error). The reliability figures in docs/reliability.md come from this.
"""

from __future__ import annotations

import json
import sys
import tempfile
import traceback
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.fuzzing import FORMATS, OutcomeTally, bad_inputs, read_outcome


def fuzz(examples_per_format: int) -> dict:
    tally = OutcomeTally()
    crashes: list[str] = []
    with tempfile.TemporaryDirectory() as folder:
        for fmt in FORMATS:
            _fuzz_format(fmt, examples_per_format, Path(folder) / "input", tally, crashes)
    return {**tally.table(), "crash_examples": crashes[:5]}


def _fuzz_format(
    fmt: str, examples: int, path: Path, tally: OutcomeTally, crashes: list[str]
) -> None:
    strategy = bad_inputs(fmt)

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,  # the same figures on every run
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        bad = data.draw(strategy)
        path.write_bytes(bad.data)
        try:
            outcome = read_outcome(path, bad.fmt)
        except Exception:  # a crash: count it and keep fuzzing
            outcome = "crash"
            crashes.append(f"{bad.base}/{bad.kind}: {traceback.format_exc(limit=3)}")
        tally.add(bad.base, bad.kind, outcome)

    run()


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    print(json.dumps(fuzz(n), indent=2))
