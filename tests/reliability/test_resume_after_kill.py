"""A `kedro run` killed mid-way (SIGKILL) and started again repeats no completed LLM call,
leaves no duplicate rows in the LanceDB table and ends with the outputs of an uninterrupted
run; file outputs are written atomically."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading

import lancedb
import pandas as pd
import pytest
from kedro.io import DatasetError

from mera_pipelines.datasets.atomic import JSONDataset, ParquetDataset
from tests.support.llm_project import facts_table, make_llm_project, point_at
from tests.support.openai_stub import Reply, StubServer
from tests.support.project import kedro_cli, kedro_popen
from tests.support.scripted_llm import TURN_RE, extraction_reply, prompt_text

KEY = {"STUB_API_KEY": "k"}
CACHE = "data/02_intermediate/llm_cache/llm_responses.sqlite"
KILL_AFTER = 12  # requests


class KillAfter:
    """Replies like the extractor model; at the n-th request, SIGKILLs the kedro process."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.served = 0
        self.pid: int | None = None
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> Reply:
        with self.lock:
            self.served += 1
            if self.served == self.n and self.pid is not None:
                os.kill(self.pid, signal.SIGKILL)
        return extraction_reply(body)


def requested_turns(server: StubServer) -> list[str]:
    return [TURN_RE.search(prompt_text(r.body)).group(1) for r in server.chat_requests]


def cached_turns(project) -> set[str]:
    with sqlite3.connect(project / CACHE) as db:
        texts = [row[0] for row in db.execute("SELECT text FROM responses")]
    return {__import__("json").loads(t)["facts"][0]["fact"].removeprefix("LLM: ") for t in texts}


def lance_rows(project) -> pd.DataFrame:
    table = lancedb.connect(project / "data/05_model_input/memory.lancedb").open_table("facts")
    rows = table.to_pandas()[["fact_id", "memory_id", "turn_id", "text"]]
    return rows.sort_values("fact_id").reset_index(drop=True)


def test_killed_run_resumes_without_repeating_llm_calls(tmp_path):
    (tmp_path / "killed").mkdir()
    (tmp_path / "whole").mkdir()
    killer = KillAfter(KILL_AFTER)
    with StubServer(handler=killer) as server:
        project = make_llm_project(tmp_path / "killed", server.base_url)
        process = kedro_popen(
            project, "run", "--pipelines=ingest,memory", "--env", "stub", extra_env=KEY
        )
        killer.pid = process.pid
        process.wait(timeout=300)
    assert process.returncode == -signal.SIGKILL
    completed = cached_turns(project)
    assert 0 < len(completed) < KILL_AFTER
    assert not (project / "data/04_feature/facts.parquet").exists()  # killed before saving

    with StubServer(handler=extraction_reply) as server:
        point_at(project, server.base_url)
        resumed = kedro_cli(
            project, "run", "--pipelines=ingest,memory", "--env", "stub", extra_env=KEY
        )
        second_requests = requested_turns(server)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    repeated = [turn for turn in second_requests if turn[:80] in completed]
    assert repeated == []  # the figure: LLM calls repeated after resume
    print(f"completed before kill: {len(completed)}; repeated after resume: {len(repeated)}")

    with StubServer(handler=extraction_reply) as server:
        whole = make_llm_project(tmp_path / "whole", server.base_url)
        assert (
            kedro_cli(
                whole, "run", "--pipelines=ingest,memory", "--env", "stub", extra_env=KEY
            ).returncode
            == 0
        )
        total_calls = len(server.chat_requests)
    assert len(second_requests) == total_calls - len(completed)
    pd.testing.assert_frame_equal(facts_table(project), facts_table(whole))
    rows = lance_rows(project)
    assert rows["fact_id"].is_unique  # no duplicate rows
    pd.testing.assert_frame_equal(rows, lance_rows(whole))


@pytest.mark.parametrize("dataset_class", [ParquetDataset, JSONDataset])
def test_atomic_datasets_leave_no_file_when_the_write_fails(tmp_path, dataset_class):
    target = tmp_path / "out"
    dataset = dataset_class(filepath=str(target))
    good = pd.DataFrame({"a": [1]}) if dataset_class is ParquetDataset else {"a": 1}
    dataset.save(good)
    bad = pd.DataFrame({"a": [object()]}) if dataset_class is ParquetDataset else {"a": object()}
    with pytest.raises(DatasetError):
        dataset.save(bad)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temporary file left behind
    loaded = dataset.load()
    assert loaded.equals(good) if dataset_class is ParquetDataset else loaded == good
