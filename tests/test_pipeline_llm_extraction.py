"""`kedro run --env <env>` with the LLM extractor on a real OpenAI-compatible HTTP server.

The server is the local stub on 127.0.0.1; the client, retries, cache and pipeline are the real
ones. Faults are injected on some calls: the run must still extract every turn with the LLM.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.openai_stub import Reply, StubServer
from tests.support.project import kedro_cli, make_project_copy
from tests.test_pipelines import latest

SECRET = "sk-test-planted-secret-0123456789"
TURN_RE = re.compile(r"<<<TURN\n(.*?)\nTURN>>>", re.S)


def scripted_extraction(request_json: dict) -> Reply:
    prompt = request_json["messages"][-1]["content"]
    turn_text = TURN_RE.search(prompt).group(1)
    fact = {"fact": f"LLM: {turn_text[:80]}", "keywords": ["llm"], "topics": ["general"]}
    return Reply(json.dumps({"facts": [fact]}), prompt_tokens=100, completion_tokens=20)


@pytest.fixture
def server():
    attempts: dict[str, int] = {}

    def handler(request_json: dict) -> Reply:
        prompt = request_json["messages"][-1]["content"]
        attempts[prompt] = attempts.get(prompt, 0) + 1
        # A server error on the first attempt of every 9th distinct prompt; its retry succeeds.
        # Keyed by prompt, not by a global request count: with 4 calls in flight a global count
        # can land one prompt's every retry on a failing slot and exhaust its retries.
        if attempts[prompt] == 1 and len(attempts) % 9 == 0:
            return Reply.server_error(503)
        return scripted_extraction(request_json)

    with StubServer(handler=handler) as stub:
        yield stub


def write_env(project: Path, base_url: str) -> None:
    env = project / "conf" / "stub"
    env.mkdir()
    (env / "globals.yml").write_text(
        "llm:\n"
        "  cache_dir: data/02_intermediate/llm_cache\n"
        "  extractor:\n"
        "    kind: openai\n"
        "    model: stub-model\n"
        f"    base_url: {base_url}\n"
        "    api_key_env: STUB_API_KEY\n"
        "    timeout: 10\n"
        "    max_retries: 3\n"
        "    concurrency: 4\n"
    )
    (env / "parameters_memory.yml").write_text(
        "extraction:\n  extractor: llm\n  max_facts_per_turn: 12\n  concurrency: 4\n"
        "  progress: false\n"
    )


def test_llm_extraction_through_kedro_with_faults_cache_and_no_leaked_key(tmp_path, server):
    project = make_project_copy(tmp_path)
    write_env(project, server.base_url)
    env = {"STUB_API_KEY": SECRET}

    first = kedro_cli(project, "run", "--env", "stub", extra_env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    facts = latest(project, "data/04_feature/facts.parquet")
    turns = latest(project, "data/03_primary/turns.parquet")
    assert len(facts) == len(turns)  # one scripted fact per turn, none from the fallback
    assert facts["text"].str.startswith("LLM: ").all()
    report = json.loads((project / "data/08_reporting/memory_report.json").read_text())
    assert report["offline_tokens"] == {"in": 100 * len(turns), "out": 20 * len(turns)}
    assert report["extraction_failures"] == 0
    requests_after_first_run = len(server.chat_requests)
    assert requests_after_first_run > len(turns)  # the injected 503s were retried

    second = kedro_cli(project, "run", "--env", "stub", "--pipelines=memory", extra_env=env)
    assert second.returncode == 0, second.stderr[-3000:]
    assert len(server.chat_requests) == requests_after_first_run  # all from the cache

    leaked = [
        str(path)
        for path in project.rglob("*")
        if path.is_file() and SECRET.encode() in path.read_bytes()
    ]
    assert leaked == []
    assert SECRET not in first.stderr + first.stdout + second.stderr + second.stdout
