"""`kedro run --pipeline=evaluate --env vllm` against a real local OpenAI-compatible server.

The stub on 127.0.0.1 stands in for vLLM: both server URLs and model names come from the
environment variables conf/vllm reads. Each reply is held briefly, so with concurrency > 1
several requests must be in flight at once; the test checks the server saw that, that every
role reached the model named for it, and that the run finished with a report.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from tests.support.openai_stub import Reply, StubServer
from tests.support.project import kedro_cli, make_project_copy


class InFlight:
    """Counts requests being answered at the same moment."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self.models: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, request_json: dict) -> Reply:
        with self._lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
            self.models.add(request_json.get("model", ""))
        try:
            time.sleep(0.05)  # a server busy generating: overlapping requests pile up
            prompt = request_json["messages"][-1]["content"]
            if "<<<ANSWER" in prompt:  # the judge
                return Reply(json.dumps({"reasoning": "scripted", "label": "CORRECT"}), 40, 8)
            return Reply("the right answer", 30, 4)
        finally:
            with self._lock:
                self.now -= 1


@pytest.fixture
def server():
    counter = InFlight()
    with StubServer(handler=counter) as stub:
        stub.counter = counter
        yield stub


def test_vllm_env_runs_every_role_on_the_server_with_concurrency(tmp_path, server):
    project = make_project_copy(tmp_path)
    evaluate = project / "conf" / "vllm" / "parameters_evaluate.yml"
    text = evaluate.read_text().replace("concurrency: 16", "concurrency: 4")
    evaluate.write_text(text + "  max_questions: 8\n  systems: [mera, naive_rag]\n")
    env = {
        "VLLM_BASE_URL": server.base_url,
        "VLLM_MODEL": "served-evidence-model",
        "VLLM_PLANNER_BASE_URL": server.base_url,
        "VLLM_PLANNER_MODEL": "served-planner",
    }
    result = kedro_cli(project, "run", "--pipelines=evaluate", "--env", "vllm", extra_env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert server.counter.peak > 1, "requests were never in flight together"
    assert server.counter.models == {"served-evidence-model", "served-planner"}
    summary = json.loads((project / "data/08_reporting/evaluate_summary.json").read_text())
    assert summary["backend"]["llm"]["planner"]["model"] == "served-planner"
    assert summary["backend"]["llm"]["judge"]["model"] == "served-evidence-model"
    mera = summary["systems"]["mera"]
    assert mera["n_questions"] == 8 and mera["judge"] == "llm:served-evidence-model"
