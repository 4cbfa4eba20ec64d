"""`kedro run --pipeline=forget` deletes a turn, then a whole memory: its facts leave the
LanceDB table (and its files: old versions are cleaned up), its cached LLM replies and its rows
of the derived tables go, and a search can no longer return it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from mera_pipelines.core.embedding import PACKAGED_MINILM, load_embedder
from mera_pipelines.core.memory import MemoryIndex, SearchSettings
from mera_pipelines.pipelines.forget.nodes import forget_target
from tests.support.llm_project import latest_table, make_llm_project
from tests.support.openai_stub import StubServer
from tests.support.project import kedro_cli
from tests.support.scripted_llm import extraction_reply

KEY = {"STUB_API_KEY": "k"}
TABLES = ["data/03_primary/turns.parquet", "data/03_primary/questions.parquet",
          "data/04_feature/facts.parquet", "data/03_primary/conversations.parquet"]  # fmt: skip
LANCE = "data/05_model_input/memory.lancedb"


def cached_tags(project: Path) -> list[str]:
    path = project / "data/02_intermediate/llm_cache/llm_responses.sqlite"
    with sqlite3.connect(path) as db:
        return [row[0] for row in db.execute("SELECT tag FROM responses")]


def bytes_in_table(project: Path, needle: str) -> int:
    return sum(
        path.read_bytes().count(needle.encode())
        for path in (project / LANCE).rglob("*")
        if path.is_file()
    )


def search_turns(project: Path, query: str) -> set[str]:
    index = MemoryIndex(str(project / LANCE), "facts", load_embedder(PACKAGED_MINILM))
    try:
        hits = index.search([query], "demo-1", SearchSettings(k=50))
        return {hit.turn_id for hit in hits}
    finally:
        index.close()


def versions(project: Path, dataset: str) -> int:
    return len(list((project / dataset).iterdir()))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("forget")
    with StubServer(handler=extraction_reply) as server:
        project = make_llm_project(tmp, server.base_url, sessions=2)
        result = kedro_cli(
            project, "run", "--pipelines=ingest,memory", "--env", "stub", extra_env=KEY
        )
    assert result.returncode == 0, result.stderr[-3000:]
    return project


def test_forget_a_turn_then_the_memory(built):
    project = built
    turns = latest_table(project, TABLES[0])
    victim = turns.iloc[3]
    marker = f"LLM: {victim['text'][:80]}"
    assert victim["turn_id"] in search_turns(project, victim["text"])
    assert bytes_in_table(project, marker) > 0  # the fact's text is in the table files
    assert "demo-1" in cached_tags(project)

    result = kedro_cli(
        project, "run", "--pipeline=forget", "--env", "stub",
        f"--params=forget.memory_id=demo-1,forget.turn_id={victim['turn_id']}", extra_env=KEY,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((project / "data/08_reporting/forget_report.json").read_text())
    assert report["turns_removed"] == 1 and report["facts_removed"] == 1
    assert report["index_rows_removed"] == 1 and report["index_versions_kept"] == 1
    assert victim["turn_id"] not in search_turns(project, victim["text"])
    assert bytes_in_table(project, marker) == 0  # no old version or fragment keeps it
    assert cached_tags(project) == []  # the memory's replies (the turn is quoted in several)
    assert all(versions(project, table) == 2 for table in TABLES)  # a new version each
    turns_after = latest_table(project, TABLES[0])
    assert len(turns_after) == len(turns) - 1
    assert victim["turn_id"] not in set(turns_after["turn_id"])
    questions = latest_table(project, TABLES[1])
    assert not any(victim["turn_id"] in list(ids) for ids in questions["gold_turn_ids"])

    result = kedro_cli(
        project, "run", "--pipeline=forget", "--env", "stub", "--params=forget.memory_id=demo-1",
        extra_env=KEY,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert search_turns(project, turns.iloc[0]["text"]) == set()
    assert bytes_in_table(project, "LLM: ") == 0
    for table in TABLES:
        assert "demo-1" not in set(latest_table(project, table)["memory_id"])


def test_forget_needs_a_known_memory(built):
    result = kedro_cli(built, "run", "--pipeline=forget", "--params=forget.memory_id=nope")
    assert result.returncode != 0
    assert "no turn, training table or planner to delete has memory_id 'nope'" in result.stderr


def test_forget_without_memory_id_is_a_config_error():
    from mera_pipelines.core.errors import ConfigError

    with pytest.raises(ConfigError, match="forget.memory_id"):
        forget_target({"memory_id": None})
