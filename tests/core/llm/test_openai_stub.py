"""The stub server itself: it must really fail the way it claims, and always stop."""

import socket
import time
import urllib.error
import urllib.request

import pytest

from tests.support.openai_stub import CHAT_PATH, Reply, StubServer


def post(server: StubServer, timeout: float = 2.0):
    request = urllib.request.Request(
        server.base_url + "/chat/completions",
        data=b'{"model": "m", "messages": []}',
        headers={"Content-Type": "application/json"},
    )
    return urllib.request.urlopen(request, timeout=timeout)


def test_replies_in_order_then_from_the_handler_then_refuses():
    with StubServer([Reply("one")], handler=None) as server:
        with post(server) as response:
            body = response.read()
        assert b'"content": "one"' in body and b'"total_tokens": 18' in body
        with pytest.raises(urllib.error.HTTPError) as raised:
            post(server)
        assert raised.value.code == 400 and b"stub script exhausted" in raised.value.read()
        server.set_handler(lambda request: Reply.rate_limited(retry_after=7))
        with pytest.raises(urllib.error.HTTPError) as raised:
            post(server)
        assert raised.value.code == 429 and raised.value.headers["Retry-After"] == "7"
        assert [request.path for request in server.requests] == [CHAT_PATH] * 3
        assert server.chat_requests[0].body == {"model": "m", "messages": []}


def test_stop_is_prompt_even_while_a_reply_is_delayed_and_frees_the_port():
    server = StubServer(handler=lambda request: Reply.slow(30.0)).start()
    port = server.port
    with pytest.raises(TimeoutError):
        post(server, timeout=0.2)
    started = time.perf_counter()
    server.stop()
    assert time.perf_counter() - started < 1.0
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), 1):
        pass
