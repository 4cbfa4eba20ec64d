"""A throwaway copy of the Kedro project (conf + demo data) so runs never touch the repo's data/."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def make_project_copy(target: Path) -> Path:
    shutil.copy(REPO_ROOT / "pyproject.toml", target / "pyproject.toml")
    shutil.copytree(
        REPO_ROOT / "conf", target / "conf", ignore=shutil.ignore_patterns("credentials.yml")
    )
    shutil.copytree(REPO_ROOT / "data" / "01_raw" / "demo", target / "data" / "01_raw" / "demo")
    # Kedro checks that the source dir exists; the package comes from PYTHONPATH (kedro_cli).
    (target / "src").mkdir()
    return target


def kedro_env(extra_env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a `kedro` subprocess: offline, and importing this checkout."""
    return {
        **(extra_env or {}),
        **os.environ,
        "KEDRO_DISABLE_TELEMETRY": "true",
        "DO_NOT_TRACK": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        # this checkout's package, also when the editable install points at another worktree
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(REPO_ROOT / "src"), os.environ.get("PYTHONPATH", "")) if p
        ),
    }


def kedro_executable() -> str:
    return str(Path(sys.executable).parent / "kedro")


def kedro_cli(
    project: Path, *args: str, timeout: int = 600, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run the real `kedro` CLI of this interpreter's environment inside ``project``."""
    return subprocess.run(
        [kedro_executable(), *args],
        cwd=project,
        env=kedro_env(extra_env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def kedro_popen(
    project: Path, *args: str, extra_env: dict[str, str] | None = None
) -> subprocess.Popen:
    """Start the real `kedro` CLI in ``project`` without waiting (to kill it mid-run)."""
    return subprocess.Popen(
        [kedro_executable(), *args],
        cwd=project,
        env=kedro_env(extra_env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
