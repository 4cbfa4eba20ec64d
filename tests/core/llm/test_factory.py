import pytest

from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.llm import factory
from mera_pipelines.core.llm.base import LLMBackend
from mera_pipelines.core.llm.factory import CACHE_FILE_NAME, make_backend
from mera_pipelines.core.llm.openai_backend import OpenAIBackend
from mera_pipelines.core.llm.transformers_backend import TransformersBackend
from tests.support import openai_stub
from tests.support.openai_stub import Reply

# The fixture, bound here so pytest finds it (a plain import reads as unused to linters).
stub_server = openai_stub.stub_server


def test_none_kind_means_heuristic_roles():
    assert make_backend({"kind": "none"}) is None
    assert make_backend(None) is None


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"kind": "claude"}, "Unknown LLM backend kind 'claude'"),
        ({}, "Unknown LLM backend kind None"),
        ({"kind": "openai"}, "needs 'model'"),
        ({"kind": "openai", "model": "  "}, "needs 'model'"),
        ({"kind": "openai", "model": "m", "api_key": "sk-x"}, "Do not put 'api_key' in parameters"),
        ({"kind": "openai", "model": "m", "modle": "typo"}, "Unknown key\\(s\\) modle"),
        (
            {"kind": "openai", "model": "m", "base_url": "http://x", "timeout": 0},
            "'timeout' must be > 0",
        ),
        (
            {"kind": "openai", "model": "m", "base_url": "http://x", "timeout": "60"},
            "must be a number",
        ),
        (
            {"kind": "openai", "model": "m", "base_url": "http://x", "concurrency": 0},
            "'concurrency' must be a whole number >= 1",
        ),
        (
            {"kind": "openai", "model": "m", "base_url": "http://x", "max_retries": 1.5},
            "'max_retries' must be a whole number >= 0",
        ),
        (
            {"kind": "openai", "model": "m", "base_url": "http://x", "extra_body": [1]},
            "'extra_body' must be a mapping",
        ),
        ({"kind": "transformers"}, "needs 'path'"),
        (
            {"kind": "transformers", "path": "/nonexistent/model"},
            "no model folder at '/nonexistent/model'",
        ),
    ],
)
def test_bad_configs_are_clear_config_errors(config, message):
    with pytest.raises(ConfigError, match=message):
        make_backend(config)


def test_a_named_setting_leads_the_error_and_a_good_config_is_unaffected():
    with pytest.raises(ConfigError, match=r"^llm\.verifier: Unknown LLM backend kind 'claude'"):
        make_backend({"kind": "claude"}, setting="llm.verifier")
    assert make_backend({"kind": "none"}, setting="llm.verifier") is None


def test_openai_config_builds_a_working_backend_with_cache_and_concurrency(stub_server, tmp_path):
    stub_server.set_handler(lambda request: Reply('{"a": 1}'))
    backend = make_backend(
        {
            "kind": "openai",
            "model": "served-model",
            "base_url": stub_server.base_url,
            "timeout": 5,
            "max_retries": 1,
            "concurrency": 4,
        },
        cache_dir=tmp_path,
        credentials={"api_key": "sk-from-credentials"},
    )
    assert isinstance(backend, OpenAIBackend) and isinstance(backend, LLMBackend)
    assert backend.concurrency == 4 and backend.max_retries == 1 and backend.timeout == 5.0
    assert backend.describe() == {
        "kind": "openai",
        "model": "served-model",
        "cache": True,
        "base_url": stub_server.base_url,
    }
    messages = [{"role": "user", "content": "JSON please"}]
    backend.complete_json(messages)
    assert backend.complete_json(messages).cached
    assert (tmp_path / CACHE_FILE_NAME).is_file()
    (request,) = stub_server.chat_requests
    assert request.headers["authorization"] == "Bearer sk-from-credentials"


def test_credentials_win_over_the_environment_and_named_entries_are_used(stub_server, monkeypatch):
    monkeypatch.setenv("MY_LLM_KEY", "sk-env")
    stub_server.set_handler(lambda request: Reply("ok"))
    config = {
        "kind": "openai",
        "model": "m",
        "base_url": stub_server.base_url,
        "api_key_env": "MY_LLM_KEY",
    }
    make_backend(config).complete([{"role": "user", "content": "a"}])
    make_backend(
        {**config, "credentials": "llm"}, credentials={"llm": {"api_key": "sk-named"}}
    ).complete([{"role": "user", "content": "b"}])
    keys = [request.headers["authorization"] for request in stub_server.chat_requests]
    assert keys == ["Bearer sk-env", "Bearer sk-named"]
    assert make_backend(config).cache is None  # no cache_dir, no cache


def test_named_credentials_entry_must_exist():
    config = {
        "kind": "openai",
        "model": "m",
        "base_url": "http://127.0.0.1:9/v1",
        "credentials": "llm",
    }
    with pytest.raises(ConfigError, match="Credentials entry 'llm'"):
        make_backend(config, credentials={"other": {"api_key": "x"}})


def test_cache_false_disables_the_cache(tmp_path):
    config = {"kind": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1", "cache": False}
    assert make_backend(config, cache_dir=tmp_path).cache is None
    assert not (tmp_path / CACHE_FILE_NAME).exists()


def test_transformers_config_is_lazy_and_serial(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    backend = make_backend(
        {"kind": "transformers", "path": str(tmp_path), "torch_threads": 1, "concurrency": 4}
    )
    assert isinstance(backend, TransformersBackend)
    assert not backend.loaded  # nothing is loaded until the first call
    assert backend.concurrency == 1 and backend.torch_threads == 1
    assert backend.model_name == tmp_path.name
    assert backend.describe() == {
        "kind": "transformers",
        "model": tmp_path.name,
        "cache": False,
        "path": str(tmp_path),
        "device": "cpu",
    }


def test_smollm2_kind_converts_first_then_loads_lazily(tmp_path, monkeypatch):
    converted = []

    def fake_ensure(path):  # the real conversion is covered by the slow test in test_smollm2.py
        converted.append(path)
        return tmp_path

    monkeypatch.setattr(factory, "ensure_smollm2", fake_ensure)
    backend = make_backend({"kind": "smollm2", "path": "somewhere/smol"})
    assert converted == ["somewhere/smol"]
    assert isinstance(backend, TransformersBackend) and backend.path == tmp_path
    assert not backend.loaded
    make_backend({"kind": "smollm2"})
    assert str(converted[1]) == "data/06_models/smollm2-135m-instruct"
