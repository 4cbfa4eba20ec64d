"""A throwaway Kedro project whose LLM roles talk to a stub server, on a small demo subset."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pandas as pd

from tests.support.project import make_project_copy

SUBSET = "data/01_raw/subset.json"


def make_llm_project(
    target: Path,
    base_url: str,
    *,
    env: str = "stub",
    roles: tuple[str, ...] = ("extractor",),
    sessions: int = 2,
    questions: int = 6,
    backend_extra: str = "",
    evaluation_concurrency: int = 1,
    max_retries: int = 4,
) -> Path:
    """A project copy reading the first ``sessions`` sessions of the first demo conversation
    (and ``questions`` of its questions), with ``roles`` on the stub at ``base_url``."""
    project = make_project_copy(target)
    write_subset(project, sessions, questions)
    folder = project / "conf" / env
    folder.mkdir(exist_ok=True)
    backend = (
        f"    kind: openai\n    model: stub-model\n    base_url: {base_url}\n"
        "    api_key_env: STUB_API_KEY\n    timeout: 1\n"
        f"    max_retries: {max_retries}\n"
        "    backoff_base: 0.01\n    backoff_max: 0.05\n    concurrency: 4\n" + backend_extra
    )
    (folder / "globals.yml").write_text(
        f"source:\n  path: {SUBSET}\n  format: locomo\nllm:\n"
        + "".join(f"  {role}:\n{backend}" for role in roles)
    )
    (folder / "parameters_memory.yml").write_text(
        "extraction:\n"
        f"  extractor: {'llm' if 'extractor' in roles else 'heuristic'}\n"
        "  concurrency: 4\n  progress: false\n"
    )
    role_lines = "".join(f"    {role}: llm\n" for role in roles if role in ("answerer", "judge"))
    (folder / "parameters_evaluate.yml").write_text(
        "evaluation:\n  systems: [mera, naive_rag]\n"
        f"  concurrency: {evaluation_concurrency}\n"
        + (f"  roles:\n{role_lines}" if role_lines else "")
    )
    return project


def point_at(project: Path, base_url: str, env: str = "stub") -> None:
    """Point the project's LLM backends at another server (a restarted stub)."""
    path = project / "conf" / env / "globals.yml"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(
        "".join(
            f"    base_url: {base_url}\n" if line.strip().startswith("base_url:") else line
            for line in lines
        )
    )


def write_subset(project: Path, sessions: int, questions: int) -> None:
    demo = json.loads((project / "data/01_raw/demo/demo_locomo.json").read_text())
    sample = demo[0]
    body = sample["conversation"]
    kept = {f"session_{n}" for n in range(1, sessions + 1)}
    kept |= {f"{key}_date_time" for key in kept}
    sample["conversation"] = {
        key: value for key, value in body.items() if not key.startswith("session_") or key in kept
    }
    sample["qa"] = sample["qa"][:questions]
    (project / SUBSET).write_text(json.dumps([sample]))


def latest_table(project: Path, dataset_path: str) -> pd.DataFrame:
    versions = sorted((project / dataset_path).iterdir())
    return pd.read_parquet(versions[-1] / Path(dataset_path).name)


def facts_table(project: Path) -> pd.DataFrame:
    facts = latest_table(project, "data/04_feature/facts.parquet")
    return facts.sort_values("fact_id").reset_index(drop=True)


def answers_table(project: Path) -> pd.DataFrame:
    results = latest_table(project, "data/07_model_output/question_results.parquet")
    columns = [
        "system",
        "question_id",
        "answer",
        "f1",
        "judged_correct",
        "judge_label",
        "failure",
        "judge_error",
        "turns_viewed",
        "termination",
    ]  # fmt: skip  (not tokens or seconds: a re-asked call costs more, answers the same)
    return results[columns].sort_values(["system", "question_id"]).reset_index(drop=True)


def mlflow_run_ids(project: Path) -> list[str]:
    with sqlite3.connect(project / "mlflow.db") as db:
        return [row[0] for row in db.execute("SELECT run_uuid FROM runs ORDER BY start_time")]
