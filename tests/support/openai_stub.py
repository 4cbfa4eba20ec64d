"""A real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions protocol.

Tests point the real ``openai`` client at it and script what it answers: replies, rate limits,
server errors, slow replies, cut connections. It records every request it received.

    from tests.support.openai_stub import Reply, stub_server  # noqa: F401  (pytest fixture)

    def test_x(stub_server):
        stub_server.enqueue(Reply.rate_limited(retry_after=0.2), Reply('{"a": 1}'))
        backend = OpenAIBackend("stub-model", base_url=stub_server.base_url, api_key="k")
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

CHAT_PATH = "/v1/chat/completions"


@dataclass
class Reply:
    """What the stub does for one request. ``fault`` selects a broken transport instead."""

    content: str | None = "ok"
    prompt_tokens: int = 11
    completion_tokens: int = 7
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering
    fault: str | None = None  # None | "drop_connection" | "truncated_body" | "garbage_body"
    refusal: str | None = None
    include_usage: bool = True
    finish_reason: str = "stop"
    error_message: str | None = None  # the error body's message for a non-200 status

    @classmethod
    def rate_limited(cls, retry_after: float | str | None = 1) -> Reply:
        headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
        return cls(status=429, headers=headers)

    @classmethod
    def server_error(cls, status: int = 500) -> Reply:
        return cls(status=status)

    @classmethod
    def unavailable(cls) -> Reply:
        return cls(status=503)

    @classmethod
    def bad_request(cls, status: int = 400) -> Reply:
        return cls(status=status)

    @classmethod
    def slow(cls, delay: float, content: str = "ok") -> Reply:
        return cls(content=content, delay=delay)

    @classmethod
    def malformed_json(cls) -> Reply:
        """A 200 whose message content is not JSON, however leniently read."""
        return cls(content="Sure! The facts are: Alice likes tea, Bob went to Paris.")

    @classmethod
    def truncated_body(cls) -> Reply:
        return cls(fault="truncated_body")

    @classmethod
    def dropped_connection(cls) -> Reply:
        return cls(fault="drop_connection")

    @classmethod
    def empty(cls) -> Reply:
        return cls(content="")

    @classmethod
    def refused(cls, text: str = "I'm sorry, but I can't help with that.") -> Reply:
        return cls(content=None, refusal=text)


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: Any  # the decoded JSON body, or the raw text when it was not JSON

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", []) if isinstance(self.body, dict) else []


Handler = Callable[[dict[str, Any]], Reply]


class StubServer:
    """Answers from a script of replies (in order), else from ``handler``, else with a 400."""

    def __init__(self, script: list[Reply] | None = None, handler: Handler | None = None) -> None:
        self._script: deque[Reply] = deque(script or [])
        self.handler = handler
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting -----------------------------------------------------------------------------

    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    def set_handler(self, handler: Handler | None) -> None:
        self.handler = handler

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._script)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [request for request in self.requests if request.path == CHAT_PATH]

    def _next_reply(self, body: Any) -> Reply | None:
        with self._lock:
            if self._script:
                return self._script.popleft()
        if self.handler is not None:
            return self.handler(body)
        return None

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the stub server is not running")
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> StubServer:
        server = _QuietServer(("127.0.0.1", 0), _make_handler_class(self))
        server.daemon_threads = True  # a handler stuck in a delay never blocks shutdown
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.02},  # shutdown() waits up to one poll interval
            name="openai-stub",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping in a scripted delay
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def wait(self, seconds: float) -> None:
        self._stopping.wait(seconds)


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client killed or timed out mid-request (the point of several tests): not an error.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def _completion_body(reply: Reply, model: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": reply.content,
                    "refusal": reply.refusal,
                },
                "finish_reason": reply.finish_reason,
            }
        ],
    }
    if reply.include_usage:
        body["usage"] = {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        }
    return body


def _error_body(status: int, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "stub_error", "code": str(status)}}


def _make_handler_class(stub: StubServer) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, like real servers; the client pools connections

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # keep test output clean

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length).decode("utf-8", errors="replace")
            try:
                body: Any = json.loads(raw)
            except json.JSONDecodeError:
                body = raw
            stub._record(RecordedRequest(self.path, dict(self.headers.items()), body))
            if self.path != CHAT_PATH:
                self._send_json(404, _error_body(404, f"no route {self.path}"))
                return
            reply = stub._next_reply(body)
            if reply is None:
                self._send_json(400, _error_body(400, "stub script exhausted: unexpected request"))
                return
            if reply.delay:
                stub.wait(reply.delay)
            # A client that gave up (timeout) before we answered: that was the point.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._answer(reply, body)

        def _answer(self, reply: Reply, body: Any) -> None:
            if reply.fault == "drop_connection":
                self.close_connection = True
                self.connection.shutdown(2)  # close without sending a status line
                return
            if reply.fault == "truncated_body":
                payload = json.dumps(_completion_body(reply, "stub")).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload[: len(payload) // 2])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(2)
                return
            if reply.fault == "garbage_body":
                self._send_raw(200, b"<html>502 Bad Gateway</html>", "application/json")
                return
            if reply.fault is not None:
                raise ValueError(f"unknown stub fault {reply.fault!r}")
            if reply.status != 200:
                message = reply.error_message or f"stub status {reply.status}"
                self._send_json(reply.status, _error_body(reply.status, message), reply.headers)
                return
            model = body.get("model", "stub") if isinstance(body, dict) else "stub"
            self._send_json(200, _completion_body(reply, model), reply.headers)

        def _send_json(
            self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
        ) -> None:
            self._send_raw(status, json.dumps(payload).encode(), "application/json", headers)

        def _send_raw(
            self,
            status: int,
            payload: bytes,
            content_type: str,
            headers: dict[str, str] | None = None,
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()

    return _Handler


@pytest.fixture
def stub_server() -> Iterator[StubServer]:
    """A running StubServer with an empty script; stopped after the test whatever happens."""
    with StubServer() as server:
        yield server
