"""A scriptable stand-in for an OpenAI-compatible chat-completions server, on 127.0.0.1.

Tests (the LLM client's, and the fault tests of the flows) point a real ``openai`` client at
it, so the whole HTTP path runs and no test needs the internet.

API
---
``StubOpenAIServer(script=(), *, default=None, model="stub-model")``
    A threaded HTTP server on 127.0.0.1, random free port. Use as a context manager
    (``with StubOpenAIServer([...]) as srv:``) or call ``start()`` / ``stop()``; or use the
    pytest fixture ``stub_server`` defined at the bottom of this file
    (``from stub_openai_server import stub_server`` in a test module or conftest).

    Endpoints: ``POST /v1/chat/completions`` answers with the next scripted response;
    ``GET /v1/models`` lists ``model``. Any other path is a 404.

Attributes and methods
    ``base_url``           "http://127.0.0.1:<port>/v1" — give it to the client.
    ``push(*responses)``   append responses to the script (a FIFO queue, one per request).
    ``default``            answer used when the script is empty: a response, or a callable
                           ``(request_body: dict) -> response``; ``None`` means HTTP 500
                           "stub script exhausted" (so a test that sends too many calls fails).
    ``requests``           list of the JSON bodies of every chat-completions request received.
    ``n_requests``         ``len(requests)``.
    ``last_request``       ``requests[-1]``.

A *response* is a :class:`StubResponse` or a callable ``(request_body) -> StubResponse``;
build them with the helpers:

    ``reply(content, *, tool_calls=None, finish_reason=None, tokens_in=11, tokens_out=7)``
        a normal completion; ``tool_calls`` is a list of ``(name, arguments)`` pairs
        (``arguments``: dict, or a raw string to send malformed arguments).
    ``json_reply(obj, **kw)``     ``reply(json.dumps(obj))``: a structured-output answer.
    ``tool_reply(calls, content="", **kw)``  tool calls, finish_reason "tool_calls".
    ``error(status, message="stub error", *, headers=None)``  an HTTP error with an
        OpenAI-style error body (500, 429, 400 ...).
    ``slow(response, seconds)``   wait ``seconds`` before answering (exceed the client timeout).
    ``malformed(body=b'{"choices": [ not json')``  HTTP 200 with a body that is not JSON.
    ``drop()``                    close the connection without answering (connection error).

Example::

    with StubOpenAIServer([error(500), json_reply({"x": 1})]) as srv:
        client = OpenAIClient(srv.base_url, "k", "stub-model", ...)
        ...
        assert srv.n_requests == 2
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Union


@dataclass
class StubResponse:
    status: int = 200
    body: Any = None  # dict -> JSON; bytes -> sent as is
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    close: bool = False  # drop the connection without answering


ResponseSpec = Union[StubResponse, Callable[[dict], StubResponse]]


# --------------------------------------------------------------------------- response helpers


def reply(
    content: str | None,
    *,
    tool_calls: list[tuple[str, Any]] | None = None,
    finish_reason: str | None = None,
    tokens_in: int = 11,
    tokens_out: int = 7,
    model: str = "stub-model",
    extra_message: dict | None = None,
) -> StubResponse:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
            for i, (name, args) in enumerate(tool_calls)
        ]
    if extra_message:
        message.update(extra_message)
    body = {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
        "usage": {
            "prompt_tokens": tokens_in,
            "completion_tokens": tokens_out,
            "total_tokens": tokens_in + tokens_out,
        },
    }
    return StubResponse(body=body)


def json_reply(obj: Any, **kw) -> StubResponse:
    return reply(json.dumps(obj), **kw)


def tool_reply(calls: list[tuple[str, Any]], content: str | None = "", **kw) -> StubResponse:
    return reply(content, tool_calls=calls, **kw)


def error(status: int, message: str = "stub error", *, headers: dict[str, str] | None = None) -> StubResponse:
    body = {"error": {"message": message, "type": "stub_error", "code": status}}
    return StubResponse(status=status, body=body, headers=dict(headers or {}))


def slow(response: StubResponse, seconds: float) -> StubResponse:
    return StubResponse(response.status, response.body, dict(response.headers), seconds, response.close)


def malformed(body: bytes = b'{"choices": [ not json') -> StubResponse:
    return StubResponse(status=200, body=body)


def drop() -> StubResponse:
    return StubResponse(close=True)


# --------------------------------------------------------------------------- server


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: avoid a 40 ms delayed-ACK stall
    server: "_Server"

    def log_message(self, format, *args):  # noqa: A002 - silence the default stderr log
        pass

    def _send(self, resp: StubResponse) -> None:
        stub = self.server.stub
        if resp.delay_s:
            # An Event wait, not time.sleep: stop() wakes sleeping handlers at once.
            stub._stopping.wait(resp.delay_s)
        if resp.close:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        body = resp.body
        data = body if isinstance(body, (bytes, bytearray)) else json.dumps(body).encode()
        try:
            self.send_response(resp.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in resp.headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client gave up (timeout) and closed the socket
            self.close_connection = True

    def do_GET(self):  # noqa: N802
        if self.path.rstrip("/").endswith("/models"):
            model = self.server.stub.model
            self._send(StubResponse(body={"object": "list", "data": [{"id": model, "object": "model", "owned_by": "stub"}]}))
        else:
            self._send(error(404, f"no route {self.path}"))

    def do_POST(self):  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(error(404, f"no route {self.path}"))
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send(error(400, "request body is not JSON"))
            return
        self._send(self.server.stub._next(body))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    stub: "StubOpenAIServer"


class StubOpenAIServer:
    """See the module docstring."""

    def __init__(self, script: list[ResponseSpec] | tuple = (), *, default: ResponseSpec | None = None, model: str = "stub-model"):
        self.model = model
        self.default = default
        self.requests: list[dict] = []
        self._script: deque[ResponseSpec] = deque(script)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- scripting
    def push(self, *responses: ResponseSpec) -> "StubOpenAIServer":
        with self._lock:
            self._script.extend(responses)
        return self

    @property
    def n_requests(self) -> int:
        with self._lock:
            return len(self.requests)

    @property
    def last_request(self) -> dict:
        with self._lock:
            return self.requests[-1]

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._script)

    def _next(self, body: dict) -> StubResponse:
        with self._lock:
            self.requests.append(body)
            spec = self._script.popleft() if self._script else self.default
        if spec is None:
            return error(500, "stub script exhausted: the test sent more requests than it scripted")
        return spec(body) if callable(spec) else spec

    # -- lifecycle
    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "StubOpenAIServer":
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.stub = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "StubOpenAIServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# --------------------------------------------------------------------------- pytest fixture

try:
    import pytest

    @pytest.fixture
    def stub_server():
        """``from stub_openai_server import stub_server`` in a test module (or a conftest)
        gives each test a fresh, empty-scripted server; ``stub_server.push(...)`` scripts it."""
        with StubOpenAIServer() as server:
            yield server

except ImportError:  # pragma: no cover - the stub is usable without pytest too
    pass
