"""Settings dataclasses built from a parameters dict, with a clear error for unknown keys."""

from __future__ import annotations

from typing import Any, TypeVar

from mera_pipelines.core.errors import ConfigError

S = TypeVar("S")


def settings_from_params(cls: type[S], params: dict[str, Any] | None, section: str) -> S:
    """``cls(**params)``; a ConfigError naming ``section`` when a key is not a field of ``cls``."""
    params = dict(params or {})
    known = set(cls.__dataclass_fields__)  # type: ignore[attr-defined]
    unknown = set(params) - known
    if unknown:
        raise ConfigError(f"Unknown {section} settings {sorted(unknown)}; known: {sorted(known)}")
    return cls(**params)
