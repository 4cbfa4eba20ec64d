"""`kedro run --pipeline=evaluate --env <env>` with an LLM answerer and an LLM judge.

A real OpenAI-compatible HTTP server on 127.0.0.1 (the test stub) plays both roles: the
answerer always replies "the right answer", the judge grades CORRECT exactly when it sees
that reply. The report must then carry an accuracy over the judged questions (LoCoMo category
5 excluded), name the judge model, and run full_text (which needs an LLM answerer).
"""

from __future__ import annotations

import json

import pytest

from tests.support.openai_stub import Reply, StubServer
from tests.support.project import kedro_cli, make_project_copy


def scripted(request_json: dict) -> Reply:
    prompt = request_json["messages"][-1]["content"]
    if "<<<ANSWER" in prompt:  # the judge: CORRECT when the prediction is the scripted right one
        label = "CORRECT" if "right answer" in prompt else "WRONG"
        return Reply(json.dumps({"reasoning": "scripted", "label": label}), 40, 8)
    return Reply("the right answer", 120, 4)  # the answerer


@pytest.fixture
def server():
    with StubServer(handler=scripted) as stub:
        yield stub


def test_llm_answerer_and_judge_through_evaluate(tmp_path, server):
    project = make_project_copy(tmp_path)
    env = project / "conf" / "stub"
    env.mkdir()
    backend = (
        f"    kind: openai\n    model: judge-model\n    base_url: {server.base_url}\n"
        "    api_key_env: STUB_API_KEY\n    timeout: 10\n    max_retries: 2\n"
    )
    (env / "globals.yml").write_text(f"llm:\n  answerer:\n{backend}  judge:\n{backend}")
    (env / "parameters_evaluate.yml").write_text(
        "evaluation:\n  max_questions: 8\n  roles:\n    answerer: llm\n    judge: llm\n"
    )
    result = kedro_cli(
        project, "run", "--pipelines=evaluate", "--env", "stub", extra_env={"STUB_API_KEY": "k"}
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((project / "data/08_reporting/evaluate_summary.json").read_text())
    assert set(summary["systems"]) == {"mera", "flat", "naive_rag", "full_text"}
    mera = summary["systems"]["mera"]
    assert mera["judge"] == "llm:judge-model"
    assert mera["accuracy"] == 1.0  # every scripted answer is graded CORRECT
    adversarial = mera["by_category"].get("5", {}).get("n", 0)
    assert mera["n_judged"] == mera["n_questions"] - adversarial
    assert mera["tokens_online_per_question"]["by_role"]["answerer"]["in"] == 120
    assert summary["backend"]["llm"]["judge"]["model"] == "judge-model"
    assert "LLM judge" in summary["scoring"]["accuracy"]
