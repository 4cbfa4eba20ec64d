"""Shared helpers of the benchmark scripts: timing, percentiles, machine facts, JSON output.

Every benchmark reports medians (p50) and p95 over repeated measurements, measures a simple
baseline in the same run, and writes one JSON file to ``benchmarks/results/``. The machine's
load average at the start is recorded: on a shared machine the figures are upper bounds.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
SRC = Path(__file__).resolve().parents[1] / "src"

# Offline and quiet, whatever the caller's environment (benchmarks never download).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("KEDRO_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("RUST_LOG", "error")  # LanceDB k-means warnings on small tables
os.environ.setdefault("LANCE_LOG", "error")
if str(SRC) not in sys.path:  # run from a checkout without installing it
    sys.path.insert(0, str(SRC))

# after SRC is on the path
from mera_pipelines.core.provenance import cpu_description, package_versions  # noqa: E402

SIZES = {"10k": 10_000, "100k": 100_000, "1m": 1_000_000}


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def latency_summary(seconds: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in seconds]
    return {"n": len(ms), "p50_ms": percentile(ms, 50), "p95_ms": percentile(ms, 95)}


def timed(fn: Callable, *args, **kwargs) -> tuple[Any, float]:
    started = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - started


def repeat(fn: Callable[[], Any], n: int) -> list[float]:
    """Wall seconds of n calls."""
    out = []
    for _ in range(n):
        _, seconds = timed(fn)
        out.append(seconds)
    return out


def ratio(value: float, baseline: float) -> float | None:
    return float(value / baseline) if baseline else None


def machine() -> dict[str, Any]:
    """Who measured: cores, load at the start (other jobs share this CPU), niceness, and the
    CPU and package versions that decide the figures (core.provenance)."""
    return {
        "cpus": os.cpu_count(),
        "loadavg_at_start": list(os.getloadavg()),
        "nice": os.nice(0),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch_threads_env": os.environ.get("OMP_NUM_THREADS"),
        "cpu": cpu_description(),
        "packages": package_versions(),
    }


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write_json(path: str | Path, result: dict[str, Any]) -> Path:
    """``result`` as indented JSON at ``path``, creating its folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, default=float))
    return path


def write_result(name: str, result: dict[str, Any], out: str | None = None) -> Path:
    """A timing benchmark's result, with this process's peak memory."""
    result.setdefault("peak_rss_mb", peak_rss_mb())
    return write_json(out or RESULTS / f"{name}.json", result)


def dataset_version(dataset_folder: Path, version: str | None = None) -> tuple[Path, str]:
    """The file of one version of a versioned Kedro dataset (``<name>/<version>/<name>``): the
    named version, or the newest; with that version's name."""
    versions = (
        sorted(p.name for p in dataset_folder.iterdir() if p.is_dir())
        if (dataset_folder.is_dir())
        else []
    )
    if not versions:
        raise SystemExit(f"{dataset_folder}: no versions; run the pipeline that writes it first")
    chosen = version or versions[-1]
    if chosen not in versions:
        raise SystemExit(f"{dataset_folder}: no version {chosen!r}; newest: {versions[-5:]}")
    return dataset_folder / chosen / dataset_folder.name, chosen
