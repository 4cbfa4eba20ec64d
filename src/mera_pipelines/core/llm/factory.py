"""Build a backend from a parameters dict (``conf/*/parameters_*.yml``) and Kedro credentials.

    {"kind": "none"}                                   -> None: the roles use their heuristics
    {"kind": "openai", "model": "gpt-4o-mini", "base_url": ..., "api_key_env": ..., ...}
    {"kind": "transformers", "path": "data/06_models/planner", "torch_threads": 1}
    {"kind": "smollm2", "path": "data/06_models/smollm2-135m-instruct"}

API keys never go in parameters (they are logged to MLflow): they come from credentials.yml
(``credentials`` names the entry) or from the environment variable ``api_key_env``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.llm.base import LLMBackend
from mera_pipelines.core.llm.cache import ResponseCache
from mera_pipelines.core.llm.smollm2 import DEFAULT_TARGET, ensure_smollm2

CACHE_FILE_NAME = "llm_responses.sqlite"

_COMMON_KEYS = {"kind", "cache", "concurrency", "failure_budget"}
_ALLOWED_KEYS = {
    "none": {"kind"},
    "openai": _COMMON_KEYS
    | {
        "model",
        "base_url",
        "api_key_env",
        "credentials",
        "timeout",
        "max_retries",
        "backoff_base",
        "backoff_max",
        "json_mode",
        "extra_body",
    },
    "transformers": _COMMON_KEYS
    | {"path", "device", "torch_threads", "max_new_tokens", "model_name"},
    "smollm2": _COMMON_KEYS | {"path", "device", "torch_threads", "max_new_tokens"},
}


def make_backend(
    config: Mapping[str, Any] | None,
    *,
    cache_dir: str | Path | None = None,
    credentials: Mapping[str, Any] | None = None,
    setting: str | None = None,
) -> LLMBackend | None:
    """The backend ``config`` describes, or None for ``kind: none`` (heuristic roles).

    ``cache_dir`` enables the on-disk response cache unless the config says ``cache: false``.
    ``setting`` names where ``config`` came from (``llm.teacher_planner``); a configuration
    error then starts with it, so the message says which setting to mend.
    """
    try:
        return _backend_from_config(config, cache_dir, credentials)
    except ConfigError as error:
        if setting is None:
            raise
        raise ConfigError(f"{setting}: {error}") from error


def _backend_from_config(
    config: Mapping[str, Any] | None,
    cache_dir: str | Path | None,
    credentials: Mapping[str, Any] | None,
) -> LLMBackend | None:
    if config is None:
        return None
    if not isinstance(config, Mapping):
        raise ConfigError(f"LLM backend config must be a mapping, got {type(config).__name__}")
    kind = config.get("kind")
    if kind not in _ALLOWED_KEYS:
        raise ConfigError(
            f"Unknown LLM backend kind {kind!r}: use one of {', '.join(sorted(_ALLOWED_KEYS))}"
        )
    if "api_key" in config:
        raise ConfigError(
            "Do not put 'api_key' in parameters (they are logged): put it in "
            "conf/local/credentials.yml and name that entry with 'credentials', or set the "
            "environment variable named by 'api_key_env'"
        )
    unknown = sorted(set(config) - _ALLOWED_KEYS[kind])
    if unknown:
        raise ConfigError(
            f"Unknown key(s) {', '.join(unknown)} for LLM backend kind '{kind}': allowed are "
            f"{', '.join(sorted(_ALLOWED_KEYS[kind]))}"
        )
    if kind == "none":
        return None
    cache = _make_cache(config, cache_dir)
    concurrency = _positive_int(config, "concurrency", 1)
    if kind == "openai":
        backend: Any = _make_openai(config, cache, credentials)
    else:
        backend = _make_local(kind, config, cache)
        concurrency = 1  # one local model generates one reply at a time (see its lock)
    backend.concurrency = concurrency
    if config.get("failure_budget") is not None:  # calls that may finally fail per run
        backend.failure_budget = _non_negative_int(config, "failure_budget", 0)
    return backend


def _make_openai(
    config: Mapping[str, Any], cache: ResponseCache | None, credentials: Mapping[str, Any] | None
) -> LLMBackend:
    from mera_pipelines.core.llm.openai_backend import OpenAIBackend

    model = _required_str(config, "model", "openai")
    api_key_env = str(config.get("api_key_env") or "OPENAI_API_KEY")
    api_key = _api_key_from_credentials(config, credentials) or os.environ.get(api_key_env)
    extra_body = config.get("extra_body")
    if extra_body is not None and not isinstance(extra_body, Mapping):
        raise ConfigError(f"LLM backend 'extra_body' must be a mapping, got {extra_body!r}")
    return OpenAIBackend(
        model,
        base_url=config.get("base_url") or None,
        api_key=api_key,
        api_key_env=api_key_env,
        timeout=_positive_float(config, "timeout", 60.0),
        max_retries=_non_negative_int(config, "max_retries", 4),
        backoff_base=_positive_float(config, "backoff_base", 0.5),
        backoff_max=_positive_float(config, "backoff_max", 20.0),
        cache=cache,
        json_mode=bool(config.get("json_mode", True)),
        extra_body=dict(extra_body) if extra_body else None,
    )


def _make_local(kind: str, config: Mapping[str, Any], cache: ResponseCache | None) -> LLMBackend:
    from mera_pipelines.core.llm.transformers_backend import TransformersBackend

    if kind == "smollm2":
        path = ensure_smollm2(config.get("path") or DEFAULT_TARGET)
    else:
        path = Path(_required_str(config, "path", kind))
        if not (path / "config.json").is_file():
            raise ConfigError(
                f"LLM backend 'transformers': no model folder at '{path}' (config.json missing)"
            )
    threads = config.get("torch_threads")
    return TransformersBackend(
        path,
        device=str(config.get("device", "cpu")),
        torch_threads=None if threads is None else _positive_int(config, "torch_threads", 1),
        max_new_tokens=_positive_int(config, "max_new_tokens", 512),
        cache=cache,
        model_name=config.get("model_name"),
    )


def _api_key_from_credentials(
    config: Mapping[str, Any], credentials: Mapping[str, Any] | None
) -> str | None:
    """The key from Kedro credentials: the entry named by ``credentials``, or a flat dict."""
    if not credentials:
        return None
    entry_name = config.get("credentials")
    if entry_name is not None:
        entry = credentials.get(entry_name)
        if not isinstance(entry, Mapping) or not entry.get("api_key"):
            raise ConfigError(
                f"Credentials entry '{entry_name}' named by the LLM backend config is missing "
                "or has no 'api_key'"
            )
        return str(entry["api_key"])
    key = credentials.get("api_key")
    return str(key) if key else None


def _make_cache(config: Mapping[str, Any], cache_dir: str | Path | None) -> ResponseCache | None:
    if cache_dir is None or not config.get("cache", True):
        return None
    return ResponseCache(Path(cache_dir) / CACHE_FILE_NAME)


def _required_str(config: Mapping[str, Any], key: str, kind: str) -> str:
    value = config.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"LLM backend kind '{kind}' needs '{key}' (a non-empty string)")
    return value


def _number(config: Mapping[str, Any], key: str, default: float) -> float:
    value = config.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"LLM backend '{key}' must be a number, got {value!r}")
    return value


def _positive_float(config: Mapping[str, Any], key: str, default: float) -> float:
    value = float(_number(config, key, default))
    if value <= 0:
        raise ConfigError(f"LLM backend '{key}' must be > 0, got {value}")
    return value


def _positive_int(config: Mapping[str, Any], key: str, default: int) -> int:
    value = _number(config, key, default)
    if int(value) != value or value < 1:
        raise ConfigError(f"LLM backend '{key}' must be a whole number >= 1, got {value!r}")
    return int(value)


def _non_negative_int(config: Mapping[str, Any], key: str, default: int) -> int:
    value = _number(config, key, default)
    if int(value) != value or value < 0:
        raise ConfigError(f"LLM backend '{key}' must be a whole number >= 0, got {value!r}")
    return int(value)
