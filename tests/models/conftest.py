"""A real HTTP server on 127.0.0.1 that plays scripted provider replies (SSE included).

Each test queues replies with ``server.reply(...)``; the server answers requests in
order and records what it received in ``server.requests``.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import pytest

End = Literal["done", "close", "reset"]


@dataclass
class Reply:
    """One scripted answer.

    Attributes:
        status: The HTTP status.
        json: A JSON body (sent with Content-Length).
        body: A raw text body, when ``json`` is None and ``events`` is None.
        events: SSE text pieces, each written and flushed as one HTTP chunk.
        headers: Extra response headers.
        wait: Seconds to wait before answering at all.
        delay: Seconds to wait before each event.
        end: How an event stream ends: "done" (properly), "close" (the connection is
            closed mid-body) or "reset" (closed with SO_LINGER 0, so the client gets RST).
    """

    status: int = 200
    json: Any = None
    body: str = ""
    events: Sequence[str] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    wait: float = 0.0
    delay: float = 0.0
    end: End = "done"


@dataclass(frozen=True)
class Received:
    """A request the server got."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any


class ProviderServer:
    """The scripted server; ``url`` is its root (``http://127.0.0.1:<port>``)."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self.stopping = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.01}, daemon=True)

    def reply(self, **fields: Any) -> None:
        """Queue a reply (the fields of ``Reply``)."""
        with self._lock:
            self._replies.append(Reply(**fields))

    def sse(self, events: Sequence[str], **fields: Any) -> None:
        """Queue an event-stream reply."""
        self.reply(events=list(events), **fields)

    @property
    def last(self) -> Received:
        """The last request received."""
        return self.requests[-1]

    def _take(self, received: Received) -> Reply:
        with self._lock:
            self.requests.append(received)
            if self._replies:
                return self._replies.popleft()
        return Reply(status=500, body="the test server has no scripted reply left")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: ProviderServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # The client hanging up (timeouts, resets) is part of the scripts: stay quiet.
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", errors="replace")
        owner = self.server.owner
        headers = {name.lower(): value for name, value in self.headers.items()}
        reply = owner._take(Received("POST", self.path, headers, body))
        self.close_connection = True
        if reply.wait and owner.stopping.wait(reply.wait):
            return
        if reply.events is None:
            self._send_body(reply)
        else:
            self._send_events(reply, owner.stopping)

    def _send_body(self, reply: Reply) -> None:
        is_json = reply.json is not None
        data = (json.dumps(reply.json) if is_json else reply.body).encode()
        self.send_response(reply.status)
        self.send_header("content-type", "application/json" if is_json else "text/plain")
        self.send_header("content-length", str(len(data)))
        self.send_header("connection", "close")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_events(self, reply: Reply, stopping: threading.Event) -> None:
        self.send_response(reply.status)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        for piece in reply.events or []:
            if reply.delay and stopping.wait(reply.delay):
                return
            data = piece.encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        if reply.end == "done":
            self.wfile.write(b"0\r\n\r\n")
        elif reply.end == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.rfile.close()
            self.connection.close()
        # "close": return without the last chunk; the server closes the socket.


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    """A scripted provider server on 127.0.0.1, stopped after the test."""
    provider = ProviderServer()
    provider.start()
    try:
        yield provider
    finally:
        provider.stop()


@pytest.fixture(autouse=True)
def _no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep real keys and base URLs of the environment out of the tests."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY",
                 "ANTHROPIC_BASE_URL", "GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_BASE_URL",
                 "OLLAMA_BASE_URL", "OLLAMA_API_KEY", "GROQ_API_KEY", "GROQ_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
