"""What every role shares: building one from configuration, its packaged prompt, rendering the
prompt into chat messages with untrusted text fenced as data, and the options of its LLM call.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from string import Template
from typing import Any

from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.llm.base import ChatMessage, LLMBackend

LLM_KIND = "llm"  # the kind of every role that needs a backend; its class takes ``backend``

# ---- building a role from configuration --------------------------------------------------------


def build_role(
    role: str,
    kind: str,
    implementations: Mapping[str, type | None],
    backend: LLMBackend | None,
    params: Mapping[str, Any],
) -> Any:
    """``implementations[kind](**params)``, with a ConfigError naming ``role`` (e.g. "fact
    extractor") instead of a KeyError or TypeError when the configuration is wrong.

    The ``"llm"`` kind is given ``backend`` and needs one; other kinds never see it. A kind
    mapped to None builds nothing (e.g. a judge of kind "none") and returns None.
    """
    if not isinstance(kind, str) or kind not in implementations:
        raise ConfigError(
            f"Unknown {role} kind {kind!r}; expected one of {', '.join(implementations)}."
        )
    cls = implementations[kind]
    if cls is None:
        return None
    arguments = dict(params)
    if kind == LLM_KIND:
        if backend is None:
            others = " or ".join(repr(k) for k in implementations if k != LLM_KIND)
            alternative = f" or use the {others} {role}" if others else ""
            raise ConfigError(
                f"The 'llm' {role} needs an LLM backend, but none is configured; "
                f"configure one{alternative}."
            )
        arguments["backend"] = backend
    accepted = _keyword_parameters(cls) - {"backend"}
    unknown = sorted(set(params) - accepted)
    if unknown:
        raise ConfigError(
            f"Unknown parameter(s) {', '.join(unknown)} for the {kind!r} {role}; "
            f"accepted: {', '.join(sorted(accepted))}."
        )
    return cls(**arguments)


def _keyword_parameters(func: Callable[..., Any]) -> set[str]:
    """The names ``func`` (a class: its constructor) takes by keyword; ``**kwargs`` left out."""
    by_keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {name for name, p in inspect.signature(func).parameters.items() if p.kind in by_keyword}


def accepts_keyword(func: Callable[..., Any], keyword: str) -> bool:
    """Whether ``func`` can be called with ``keyword=...``."""
    try:
        parameters = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
    return keyword in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


def call_options(method: Callable[..., Any], cache_tag: str, **options: Any) -> dict[str, Any]:
    """The keyword arguments of a backend call: ``options``, plus ``cache_tag`` (the memory a
    call belongs to, for cache bookkeeping) when ``method`` accepts one."""
    if accepts_keyword(method, "cache_tag"):
        options["cache_tag"] = cache_tag
    return options


# ---- prompts ------------------------------------------------------------------------------------


def load_prompt(name: str) -> str:
    """A packaged prompt template, ``mera_pipelines/prompts/<name>``."""
    return (resources.files("mera_pipelines") / "prompts" / name).read_text(encoding="utf-8")


_SECTION_RE = re.compile(r"^###\s*(system|user)\s*$", re.MULTILINE | re.IGNORECASE)


def render_messages(template: str, values: Mapping[str, str]) -> list[ChatMessage]:
    """Fill ``${name}`` placeholders; "### system" / "### user" lines split the messages
    (a template without them is a single user message). Empty messages are left out.

    The template is split before it is filled, so a value holding a "### system" line cannot
    start a message of its own.
    """
    parts = _SECTION_RE.split(template)
    if len(parts) == 1:
        return [{"role": "user", "content": _fill(template, values)}]
    messages: list[ChatMessage] = []
    for role, section in zip(parts[1::2], parts[2::2], strict=True):
        content = _fill(section, values)
        if content:
            messages.append({"role": role.lower(), "content": content})
    return messages


def _fill(template: str, values: Mapping[str, str]) -> str:
    return Template(template).safe_substitute(values).strip()


# Prompts fence untrusted text between markers such as "<<<TURN" and "TURN>>>".
_FENCE_RUN_RE = re.compile(r"<{3,}|>{3,}")


def fence_data(text: str, markers: Sequence[str] = ()) -> str:
    """Untrusted text made safe to put inside a fence: every run of three or more '<' or '>'
    is spaced out (">>>" -> "> > >"), so the text can close no "<<<NAME ... NAME>>>" fence,
    whatever its name; each of ``markers`` (fence strings written otherwise) is spaced out the
    same way. Surrounding white space is stripped."""
    text = _FENCE_RUN_RE.sub(lambda match: " ".join(match.group(0)), text)
    for marker in markers:
        text = text.replace(marker, " ".join(marker))
    return text.strip()


__all__ = [
    "LLM_KIND",
    "accepts_keyword",
    "build_role",
    "call_options",
    "fence_data",
    "load_prompt",
    "render_messages",
]


def spent_tokens(error: BaseException) -> tuple[int, int]:
    """Tokens a failed call still cost (an ``LLMCallError`` carries them; others cost none)."""
    return getattr(error, "tokens_in", 0), getattr(error, "tokens_out", 0)
