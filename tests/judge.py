"""A real chat-completions server on 127.0.0.1 that plays the judge, scripted or by default."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = ["Judge", "Received", "Reply", "completion", "judge", "serve_judge"]

PATH = "/v1/chat/completions"


def completion(
    content: Any, finish_reason: str | None = "stop", **message_extra: Any
) -> dict[str, Any]:
    """Return a valid chat completion body whose one choice says ``content``."""
    return {
        "id": "chatcmpl-judge",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "judge",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content, **message_extra},
            "logprobs": None,
            "finish_reason": finish_reason,
        }],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


@dataclass
class Reply:
    """One scripted answer: a status, a JSON or text body, headers and a delay before answering."""

    status: int = 200
    json: Any = None
    text: str | bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    content_type: str | None = None

    def payload(self) -> tuple[bytes, str]:
        """Return the body bytes and their content type."""
        if self.text is not None:
            data = self.text.encode() if isinstance(self.text, str) else self.text
            return data, self.content_type or "text/plain; charset=utf-8"
        return json.dumps(self.json).encode(), self.content_type or "application/json"


@dataclass
class Received:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    at: float


class Judge:
    """The server's state: what it received, what it will answer next, and its defaults."""

    def __init__(self, latency: float = 0.0) -> None:
        self.base_url = ""
        self.requests: list[Received] = []
        self.default_verdict: dict[str, Any] = {
            "verdict": "approve", "text": "", "matched_preferences": []}
        self.latency = latency
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self.stopping = threading.Event()

    def script(self, *responses: Reply | Mapping[str, Any]) -> None:
        """Queue replies, answered in order before the default takes over."""
        with self._lock:
            for response in responses:
                self._queue.append(
                    response if isinstance(response, Reply) else Reply(**response))

    @property
    def bodies(self) -> list[Any]:
        """Return the JSON bodies received so far."""
        with self._lock:
            return [r.body for r in self.requests]

    def _next(self, received: Received) -> Reply:
        with self._lock:
            self.requests.append(received)
            if self._queue:
                return self._queue.popleft()
        return Reply(json=completion(json.dumps(self.default_verdict)), delay=self.latency)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"  # one request per connection: nothing idles at shutdown
    timeout = 10

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:  # noqa: N802
        self._answer(Reply(status=404, json={"error": {"message": "not found"}}))

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        judge = self.server.judge
        headers = {name.lower(): value for name, value in self.headers.items()}
        received = Received(self.command, self.path, headers, body, time.monotonic())
        if self.path != PATH:
            with judge._lock:
                judge.requests.append(received)
            self._answer(Reply(status=404, json={"error": {"message": f"no route {self.path}"}}))
            return
        self._answer(judge._next(received))

    def _answer(self, reply: Reply) -> None:
        if reply.delay > 0 and self.server.judge.stopping.wait(reply.delay):
            return  # shutting down: drop the connection instead of answering
        data, content_type = reply.payload()
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test); nothing to tell it


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins the handlers, so no socket outlives the fixture
    block_on_close = True
    request_queue_size = 128
    judge: Judge

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up mid-answer is expected in timeout tests


@contextlib.contextmanager
def serve_judge(latency: float = 0.0) -> Iterator[Judge]:
    """Run a judge on 127.0.0.1 (a free port) for the duration of the block."""
    state = Judge(latency=latency)
    server = _Server(("127.0.0.1", 0), _Handler)
    server.judge = state
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              name="judge", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def judge() -> Iterator[Judge]:
    """Yield a running loopback judge; it stops at teardown."""
    with serve_judge() as state:
        yield state
