"""The LLM layer against a fault-injecting OpenAI-compatible server on 127.0.0.1: faults are
survived with unchanged results, calls that fail for good are recorded against their item, and
a run over its failure budget stops."""

from __future__ import annotations

import json

import pytest

from mera_pipelines.core.llm.concurrency import map_bounded
from mera_pipelines.core.llm.factory import make_backend
from mera_pipelines.core.llm.failures import FailureBudgetExceeded, exceeded_budget
from mera_pipelines.core.records import Question
from tests.support.fault_server import FAULT_KINDS, FaultInjector, FaultPlan
from tests.support.openai_stub import StubServer
from tests.support.scripted_llm import extraction_reply

SCHEMA = {"type": "object", "properties": {"facts": {"type": "array"}}, "required": ["facts"]}


def backend_for(server: StubServer, **config):
    return make_backend(
        {
            "kind": "openai",
            "model": "stub-model",
            "base_url": server.base_url,
            "timeout": 0.5,
            "max_retries": 3,
            "backoff_base": 0.01,
            "backoff_max": 0.05,
            **config,
        },
        credentials={"api_key": "k"},
    )


def prompts(n: int) -> list[list[dict]]:
    return [
        [
            {"role": "system", "content": "Extract facts as JSON."},
            {"role": "user", "content": f"<<<TURN\nAna said thing number {i}.\nTURN>>>"},
        ]
        for i in range(n)
    ]


def test_thirty_percent_faults_of_every_kind_are_survived_with_equal_results():
    with StubServer(handler=extraction_reply) as healthy_server:
        healthy = backend_for(healthy_server)
        expected = [healthy.complete_json(m, schema=SCHEMA).parsed for m in prompts(40)]
    faults = FaultInjector(extraction_reply, FaultPlan(rate=0.3, seed=3, timeout_delay=0.8))
    with StubServer(handler=faults) as server:
        backend = backend_for(server)
        got = map_bounded(
            lambda m: backend.complete_json(m, schema=SCHEMA).parsed, prompts(40), 4, None, False
        )
    assert got == expected
    assert backend.failed_calls == []
    assert faults.total_injected >= 12  # ~30 % of ~50 requests
    assert len(server.chat_requests) == 40 + faults.total_injected
    assert set(faults.injected) <= set(FAULT_KINDS)


def test_the_same_seed_injects_the_same_faults():
    counts = []
    for _ in range(2):
        faults = FaultInjector(
            extraction_reply, FaultPlan(rate=0.3, seed=11, kinds=("server_error", "malformed_json"))
        )
        with StubServer(handler=faults) as server:
            backend = backend_for(server)
            for messages in prompts(20):
                backend.complete_json(messages, schema=SCHEMA)
        counts.append(dict(faults.injected))
    assert counts[0] == counts[1] and sum(counts[0].values()) > 0


def test_truncated_json_is_asked_again_not_kept_cut():
    faults = FaultInjector(extraction_reply, FaultPlan(rate=1.0, kinds=("truncated_json",)))
    with StubServer(handler=faults) as server:
        completion = backend_for(server).complete_json(prompts(1)[0], schema=SCHEMA)
    assert completion.parsed == json.loads(extraction_reply({"messages": prompts(1)[0]}).content)
    assert faults.injected["truncated_json"] == 1
    assert completion.repaired


def test_failed_calls_name_their_question_and_the_budget_stops_further_requests():
    faults = FaultInjector(
        extraction_reply, FaultPlan(rate=1.0, kinds=("unavailable",), max_faults_per_call=None)
    )
    questions = [Question(f"m/q{i}", "m", f"question {i}?", "a", "1", [], None) for i in range(5)]
    with StubServer(handler=faults) as server:
        backend = backend_for(server, max_retries=1, failure_budget=2)

        def ask(question: Question):
            messages = [{"role": "user", "content": f"JSON please: {question.question}"}]
            return backend.complete_json(messages, cache_tag=question.memory_id)

        results = map_bounded(ask, questions, concurrency=1, progress=False)
    failed = [call.item for call in backend.failed_calls]
    assert failed == ["question m/q0", "question m/q1", "question m/q2"]
    assert all(call.tag == "m" and "HTTP 503" in call.reason for call in backend.failed_calls)
    # over budget: the last two never reached the server (2 attempts each for the first 3)
    assert len(server.chat_requests) == 3 * 2
    assert [type(r.error) for r in results[3:]] == [FailureBudgetExceeded] * 2
    error = exceeded_budget({"answerer_llm": backend})
    assert isinstance(error, FailureBudgetExceeded) and "failure_budget" in str(error)


def test_failure_budget_must_be_a_whole_number():
    from mera_pipelines.core.errors import ConfigError

    with StubServer() as server, pytest.raises(ConfigError, match="failure_budget"):
        backend_for(server, failure_budget=-1)
