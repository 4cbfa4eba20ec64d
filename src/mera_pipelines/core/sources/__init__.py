"""Source readers: a benchmark file -> canonical conversations, turns and questions + a report.

    from mera_pipelines.core.sources import read_source
    result = read_source("locomo10.json", "locomo")
    result.report()   # counts, and what was dropped or repaired

Formats and their quirks are described in docs/data_formats.md.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.sources.base import IngestResult, check_file
from mera_pipelines.core.sources.jsonl import read_jsonl
from mera_pipelines.core.sources.locomo import read_locomo
from mera_pipelines.core.sources.longmemeval import read_longmemeval

READERS: dict[str, Callable[[Path], IngestResult]] = {
    "locomo": read_locomo,
    "longmemeval": read_longmemeval,
    "jsonl": read_jsonl,
}
FORMATS = tuple(READERS)


def read_source(path: str | Path, fmt: str) -> IngestResult:
    """Read a source file of the given format; raises InputDataError naming file, record, field."""
    name = fmt.strip().lower() if isinstance(fmt, str) else fmt
    if name not in READERS:
        raise ConfigError(
            f"Parameter 'source.format' is {fmt!r} for file '{path}': "
            f"allowed values are {', '.join(FORMATS)}."
        )
    source = Path(path)
    check_file(source)
    return READERS[name](source)


__all__ = ["FORMATS", "READERS", "IngestResult", "read_source"]
