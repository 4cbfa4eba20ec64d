"""What decides a run's numbers besides the code and the data: package versions and the CPU.

The same command on the same data can give a different planner on another machine. In the
fifty-third session the locomo_split SFT ended at loss 0.1838 where earlier fresh machines had
reproduced 0.1856 exactly; its first step's loss already differed in the seventh digit, with the
same torch and the same loss again under the previous releases of transformers, accelerate and
datasets, so the difference is the CPU's kernels (this host: AVX2 only), not the packages. Train
runs (MLflow tags ``package.<name>``, ``cpu.capability``, ``cpu.model``) and benchmark results
(``machine``) carry both, so a difference between two results can be traced to the code, the
data, the packages or the machine.
"""

from __future__ import annotations

import platform
from importlib import metadata
from pathlib import Path

# What can change a trained planner, a retrieval result or a stage's speed.
RESULT_PACKAGES = (
    "torch",
    "transformers",
    "trl",
    "accelerate",
    "datasets",
    "tokenizers",
    "safetensors",
    "sentence-transformers",
    "lancedb",
    "pyarrow",
    "numpy",
    "pandas",
    "kedro",
    "mlflow",
)


def package_versions(names: tuple[str, ...] = RESULT_PACKAGES) -> dict[str, str | None]:
    """Installed version of each package (None when it is not installed)."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def cpu_description(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, str | None]:
    """The CPU's model name and the vector instructions torch's kernels use on it.

    ``capability`` (torch's "AVX2", "AVX512", ...) picks the kernels, and so both the speed and
    the last digits of every float a model computes.
    """
    model = None
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    import torch  # here, not at import: hooks and benchmarks load this module early

    return {
        "model": model or platform.processor() or None,
        "capability": torch.backends.cpu.get_cpu_capability(),
    }
