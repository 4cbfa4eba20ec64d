"""OpenAIBackend with the real ``openai`` client against a real HTTP server on 127.0.0.1."""

import logging
import time

import pytest

from mera_pipelines.core.errors import ConfigError, LLMCallError
from mera_pipelines.core.llm.base import LLMBackend
from mera_pipelines.core.llm.cache import ResponseCache
from mera_pipelines.core.llm.concurrency import ItemFailure, map_bounded
from mera_pipelines.core.llm.openai_backend import OpenAIBackend
from tests.support import openai_stub
from tests.support.openai_stub import Reply

# The fixture, bound here so pytest finds it (a plain import reads as unused to linters).
stub_server = openai_stub.stub_server

SECRET = "sk-test-DO-NOT-LEAK-4242"
QUESTION = [
    {"role": "system", "content": "Extract facts as JSON."},
    {"role": "user", "content": "Alice: I drank green tea in Kyoto."},
]


def make_backend(server, **overrides):
    options = {
        "base_url": server.base_url,
        "api_key": SECRET,
        "timeout": 2.0,
        "max_retries": 3,
        "backoff_base": 0.01,
        "backoff_max": 0.05,
    }
    options.update(overrides)
    return OpenAIBackend("stub-model", **options)


def test_success_returns_text_and_counts_usage(stub_server):
    stub_server.enqueue(
        Reply('{"facts": ["Alice drank green tea"]}', prompt_tokens=30, completion_tokens=9)
    )
    backend = make_backend(stub_server)
    assert isinstance(backend, LLMBackend)

    completion = backend.complete_json(QUESTION, max_tokens=100)

    assert completion.parsed == {"facts": ["Alice drank green tea"]}
    assert (completion.tokens_in, completion.tokens_out) == (30, 9)
    assert completion.model == "stub-model" and not completion.cached and not completion.repaired
    assert backend.usage.as_dict() == {
        "tokens_in": 30,
        "tokens_out": 9,
        "calls": 1,
        "cached_calls": 0,
        "failed_calls": 0,
        "repaired_calls": 0,
    }
    (request,) = stub_server.chat_requests
    assert request.body["model"] == "stub-model"
    assert request.body["messages"] == QUESTION
    assert request.body["max_tokens"] == 100 and request.body["temperature"] == 0.0
    assert request.body["response_format"] == {"type": "json_object"}
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    assert request.headers["x-stainless-retry-count"] == "0"  # the client's own retries are off


def test_plain_completion_sends_no_json_format_and_missing_usage_counts_zero(stub_server):
    stub_server.enqueue(Reply("Green tea.", include_usage=False))
    backend = make_backend(stub_server)
    completion = backend.complete([{"role": "user", "content": "What did Alice drink?"}])
    assert completion.text == "Green tea." and (completion.tokens_in, completion.tokens_out) == (
        0,
        0,
    )
    assert "response_format" not in stub_server.chat_requests[0].body
    assert backend.usage.calls == 1


def test_json_mode_off_and_extra_body_reach_the_server(stub_server):
    stub_server.enqueue(Reply('{"a": 1}'))
    backend = make_backend(
        stub_server,
        json_mode=False,
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
    )
    backend.complete_json([{"role": "user", "content": "Say hi"}])
    body = stub_server.chat_requests[0].body
    assert "response_format" not in body
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    # The conversation never said JSON, so the backend said it (OpenAI rejects JSON mode otherwise).
    assert body["messages"][0]["role"] == "system" and "JSON" in body["messages"][0]["content"]


def test_rate_limit_honours_retry_after_then_succeeds(stub_server):
    stub_server.enqueue(Reply.rate_limited(retry_after=0.4), Reply('{"ok": true}'))
    backend = make_backend(stub_server)
    started = time.perf_counter()
    completion = backend.complete_json(QUESTION)
    elapsed = time.perf_counter() - started
    assert completion.parsed == {"ok": True}
    assert len(stub_server.chat_requests) == 2
    # backoff_max is 0.05 s, so only the server's Retry-After can explain the wait.
    assert 0.4 <= elapsed < 1.5
    assert backend.usage.calls == 1 and backend.usage.failed_calls == 0


@pytest.mark.parametrize(
    "fault",
    [
        Reply.server_error(500),
        Reply.unavailable(),
        Reply.truncated_body(),
        Reply.dropped_connection(),
        Reply(fault="garbage_body"),
    ],
    ids=["500", "503", "truncated-body", "dropped-connection", "garbage-body"],
)
def test_transient_failure_is_retried_then_succeeds(stub_server, fault):
    stub_server.enqueue(fault, Reply("fine"))
    backend = make_backend(stub_server)
    assert backend.complete([{"role": "user", "content": "hi"}]).text == "fine"
    assert len(stub_server.chat_requests) == 2


def test_503_until_retries_run_out_raises_llm_call_error(stub_server):
    stub_server.set_handler(lambda request: Reply.unavailable())
    backend = make_backend(stub_server, max_retries=2)
    with pytest.raises(LLMCallError, match="Model 'stub-model'.*failed after 3 attempts: HTTP 503"):
        backend.complete_json(QUESTION)
    assert len(stub_server.chat_requests) == 3
    assert backend.usage.failed_calls == 1 and backend.usage.calls == 0


def test_timeout_is_retried_and_the_slow_reply_is_not_waited_for(stub_server):
    stub_server.enqueue(Reply.slow(5.0, "too late"), Reply("in time"))
    backend = make_backend(stub_server, timeout=0.3)
    started = time.perf_counter()
    assert backend.complete([{"role": "user", "content": "hi"}]).text == "in time"
    assert time.perf_counter() - started < 2.0
    assert len(stub_server.chat_requests) == 2


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_client_errors_are_not_retried(stub_server, status):
    stub_server.set_handler(lambda request: Reply.bad_request(status))
    backend = make_backend(stub_server)
    with pytest.raises(LLMCallError, match=f"refused the request \\(HTTP {status}"):
        backend.complete([{"role": "user", "content": "hi"}])
    assert len(stub_server.chat_requests) == 1


def test_malformed_json_is_repaired_by_one_reask_showing_the_bad_output(stub_server):
    bad = Reply.malformed_json()
    stub_server.enqueue(bad, Reply('{"facts": []}', prompt_tokens=50, completion_tokens=3))
    backend = make_backend(stub_server)
    completion = backend.complete_json(QUESTION)
    assert completion.parsed == {"facts": []} and completion.repaired
    assert (completion.tokens_in, completion.tokens_out) == (11 + 50, 7 + 3)
    reask = stub_server.chat_requests[1].body["messages"]
    assert reask[: len(QUESTION)] == QUESTION
    assert reask[-2] == {"role": "assistant", "content": bad.content}
    assert "could not be used" in reask[-1]["content"]
    assert backend.usage.repaired_calls == 1 and backend.usage.calls == 2


@pytest.mark.parametrize(
    "reply",
    [Reply.empty(), Reply.refused(), Reply.malformed_json()],
    ids=["empty", "refusal", "prose"],
)
def test_json_still_bad_after_the_reask_raises_naming_the_model(stub_server, reply):
    stub_server.set_handler(lambda request: reply)
    backend = make_backend(stub_server)
    with pytest.raises(LLMCallError, match="Model 'stub-model' did not return usable JSON"):
        backend.complete_json(QUESTION)
    assert len(stub_server.chat_requests) == 2
    assert backend.usage.failed_calls == 1


def test_schema_mismatch_is_reasked(stub_server):
    stub_server.enqueue(Reply('{"fact": "x"}'), Reply('{"facts": ["x"]}'))
    backend = make_backend(stub_server)
    schema = {"type": "object", "required": ["facts"], "properties": {"facts": {"type": "array"}}}
    completion = backend.complete_json(QUESTION, schema=schema)
    assert completion.parsed == {"facts": ["x"]} and completion.repaired
    assert (
        "missing required key 'facts'"
        in stub_server.chat_requests[1].body["messages"][-1]["content"]
    )


def test_cache_hit_makes_no_second_request_and_delete_tag_forgets(stub_server, tmp_path):
    stub_server.set_handler(lambda request: Reply('{"answer": "tea"}'))
    cache = ResponseCache(tmp_path / "cache.sqlite")
    backend = make_backend(stub_server, cache=cache)

    first = backend.complete_json(QUESTION, cache_tag="memory-7")
    second = backend.complete_json(QUESTION, cache_tag="memory-7")
    fresh_backend = make_backend(stub_server, cache=ResponseCache(tmp_path / "cache.sqlite"))
    third = fresh_backend.complete_json(QUESTION)

    assert len(stub_server.chat_requests) == 1
    assert not first.cached and second.cached and third.cached
    assert second.parsed == first.parsed == {"answer": "tea"}
    assert (second.tokens_in, second.tokens_out) == (first.tokens_in, first.tokens_out)
    assert backend.usage.calls == 1 and backend.usage.cached_calls == 1

    assert cache.delete_tag("memory-7") == 1
    assert not backend.complete_json(QUESTION).cached
    assert len(stub_server.chat_requests) == 2


def test_plain_and_json_replies_are_cached_apart(stub_server, tmp_path):
    stub_server.set_handler(lambda request: Reply('{"a": 1}'))
    backend = make_backend(stub_server, cache=ResponseCache(tmp_path / "c.sqlite"))
    backend.complete(QUESTION)
    backend.complete_json(QUESTION)
    assert len(stub_server.chat_requests) == 2


def test_api_key_never_reaches_errors_logs_or_cache(stub_server, tmp_path, caplog):
    echo = f"Incorrect API key provided: {SECRET}"
    stub_server.enqueue(
        Reply(status=500, error_message=echo),  # retried, and logged as a warning
        Reply('{"a": 1}'),
        Reply(status=401, error_message=echo),
    )
    cache_path = tmp_path / "c.sqlite"
    backend = make_backend(stub_server, cache=ResponseCache(cache_path))
    caplog.set_level(logging.DEBUG)

    backend.complete_json(QUESTION, cache_tag="m1")
    with pytest.raises(LLMCallError) as raised:
        backend.complete([{"role": "user", "content": "again"}])

    error = raised.value
    assert "HTTP 401" in str(error) and "***" in str(error)
    assert SECRET not in str(error) and SECRET not in repr(error)
    assert error.__cause__ is None and error.__suppress_context__  # no chained openai error shown
    assert "retry 1/3" in caplog.text and SECRET not in caplog.text
    assert SECRET not in repr(backend)
    backend.cache.close()
    stored = b"".join(path.read_bytes() for path in tmp_path.iterdir() if path.is_file())
    assert b'{"a": 1}' in stored  # the reply is there, readable ...
    assert SECRET.encode() not in stored  # ... and the key is not


def test_missing_key_for_the_openai_api_is_a_config_error(monkeypatch):
    monkeypatch.delenv("MERA_TEST_KEY", raising=False)
    with pytest.raises(ConfigError, match="MERA_TEST_KEY"):
        OpenAIBackend("gpt-4o-mini", api_key_env="MERA_TEST_KEY")


def test_key_comes_from_the_environment_and_local_servers_need_none(stub_server, monkeypatch):
    monkeypatch.setenv("MERA_TEST_KEY", "sk-from-env")
    stub_server.set_handler(lambda request: Reply("ok"))
    make_backend(stub_server, api_key=None, api_key_env="MERA_TEST_KEY").complete(QUESTION)
    monkeypatch.delenv("MERA_TEST_KEY")
    make_backend(stub_server, api_key=None, api_key_env="MERA_TEST_KEY").complete(QUESTION)
    first, second = stub_server.chat_requests
    assert first.headers["authorization"] == "Bearer sk-from-env"
    assert second.headers["authorization"] == "Bearer not-needed"


def test_parallel_calls_through_map_bounded_count_usage_exactly(stub_server):
    def answer(request):
        question = request["messages"][-1]["content"]
        if question == "q5":
            return Reply.bad_request(400)
        return Reply(f'{{"echo": "{question}"}}', prompt_tokens=3, completion_tokens=2, delay=0.02)

    stub_server.set_handler(answer)
    backend = make_backend(stub_server)
    questions = [f"q{index}" for index in range(12)]
    results = map_bounded(
        lambda q: backend.complete_json([{"role": "user", "content": q}]).parsed["echo"],
        questions,
        concurrency=4,
        progress=False,
    )
    assert [r for r in results if not isinstance(r, ItemFailure)] == [
        q for q in questions if q != "q5"
    ]
    assert isinstance(results[5], ItemFailure) and isinstance(results[5].error, LLMCallError)
    assert (
        backend.usage.calls == 11
        and backend.usage.tokens_in == 33
        and backend.usage.tokens_out == 22
    )
    assert backend.usage.failed_calls == 1
