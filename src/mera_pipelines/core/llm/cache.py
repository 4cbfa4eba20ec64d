"""An on-disk cache of model replies, so re-running a pipeline costs no second call.

SQLite in WAL mode with one connection per thread: readers never block the writer, and each
``put`` is one transaction, so a killed run leaves either the whole row or nothing.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mera_pipelines.core.llm.base import ChatMessage

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    tag TEXT,
    text TEXT NOT NULL,
    tokens_in INTEGER NOT NULL,
    tokens_out INTEGER NOT NULL,
    repaired INTEGER NOT NULL DEFAULT 0,
    json_mode INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_tag ON responses(tag);
CREATE INDEX IF NOT EXISTS responses_model ON responses(model);
"""


@dataclass(frozen=True)
class CachedResponse:
    text: str
    tokens_in: int
    tokens_out: int
    model: str
    tag: str | None = None
    repaired: bool = False
    json_mode: bool = False


def cache_key(
    model: str,
    messages: list[ChatMessage],
    max_tokens: int,
    temperature: float,
    json_mode: bool,
    *,
    extra: dict[str, Any] | None = None,
) -> str:
    """sha256 of everything that changes the reply. ``extra`` (e.g. server options) only when set."""
    payload: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "max_tokens": int(max_tokens),
        "temperature": float(temperature),
        "json": bool(json_mode),
    }
    if extra:
        payload["extra"] = extra
    encoded = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()


class ResponseCache:
    """Replies keyed by :func:`cache_key`, each with a free-form ``tag`` (e.g. a memory id)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        with self._connection() as connection:
            connection.executescript(_SCHEMA)

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r})"

    def _connection(self) -> sqlite3.Connection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            # check_same_thread=False only so that close() may close every thread's connection;
            # each connection is otherwise used by the thread that opened it.
            connection = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False)
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")
            self._local.connection = connection
            with self._connections_lock:
                self._connections.append(connection)
        return connection

    def get(self, key: str) -> CachedResponse | None:
        row = (
            self._connection()
            .execute(
                "SELECT text, tokens_in, tokens_out, model, tag, repaired, json_mode "
                "FROM responses WHERE key = ?",
                (key,),
            )
            .fetchone()
        )
        if row is None:
            return None
        text, tokens_in, tokens_out, model, tag, repaired, json_mode = row
        return CachedResponse(
            text, tokens_in, tokens_out, model, tag, bool(repaired), bool(json_mode)
        )

    def put(self, key: str, response: CachedResponse) -> None:
        with self._connection() as connection:  # one transaction: committed whole or not at all
            connection.execute(
                "INSERT OR REPLACE INTO responses "
                "(key, model, tag, text, tokens_in, tokens_out, repaired, json_mode, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    response.model,
                    response.tag,
                    response.text,
                    int(response.tokens_in),
                    int(response.tokens_out),
                    int(response.repaired),
                    int(response.json_mode),
                    time.time(),
                ),
            )

    def delete(self, key: str) -> bool:
        with self._connection() as connection:
            return connection.execute("DELETE FROM responses WHERE key = ?", (key,)).rowcount > 0

    def delete_tag(self, tag: str) -> int:
        """Forget every reply stored under ``tag``; returns how many were deleted."""
        return self.delete_where(tag=tag)

    def delete_where(self, *, model: str | None = None, tag: str | None = None) -> int:
        """Delete the replies matching every given filter. At least one filter is required."""
        conditions = {"model": model, "tag": tag}
        given = {column: value for column, value in conditions.items() if value is not None}
        if not given:
            raise ValueError("delete_where needs a model or a tag; use clear() to empty the cache")
        where = " AND ".join(f"{column} = ?" for column in given)
        with self._connection() as connection:
            return connection.execute(
                f"DELETE FROM responses WHERE {where}", tuple(given.values())
            ).rowcount

    def clear(self) -> int:
        with self._connection() as connection:
            return connection.execute("DELETE FROM responses").rowcount

    def __len__(self) -> int:
        return self._connection().execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        with self._connections_lock:
            for connection in self._connections:
                connection.close()
            self._connections.clear()
        self._local = threading.local()

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
