"""Memory test fixtures: stores on a real SQLite file, PostgreSQL and Redis servers (and in
memory), and a real local
HTTP server playing an OpenAI-compatible ``/v1/embeddings`` endpoint."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from procflow.memory import InMemoryMemoryStore, MemoryStore, SQLiteMemoryStore


def make_store(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> MemoryStore:
    """A new store of ``kind`` on the test's file or database (a second call opens the
    same data again, as a restarted process would)."""
    if kind == "sqlite":
        return SQLiteMemoryStore(tmp_path / "memory.db")
    if kind == "postgres":
        from procflow.memory.postgres import PostgresMemoryStore

        return PostgresMemoryStore(request.getfixturevalue("postgres_dsn"),
                                   schema=request.getfixturevalue("postgres_schema"))
    if kind == "redis":
        from procflow.memory.redis import RedisMemoryStore

        return RedisMemoryStore(request.getfixturevalue("redis_url"),
                                prefix=request.getfixturevalue("redis_prefix"))
    return InMemoryMemoryStore()


@pytest.fixture(params=["sqlite", "in-memory",
                        pytest.param("postgres", marks=pytest.mark.postgres),
                        pytest.param("redis", marks=pytest.mark.redis)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MemoryStore]:
    """Each MemoryStore backend (the contract tests run against all of them)."""
    made = make_store(request.param, request, tmp_path)
    try:
        yield made
    finally:
        await made.aclose()


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    json: Any


class EmbeddingServer:
    """Answers POSTs with queued (status, body) replies; records the requests."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self._replies: deque[tuple[int, str, dict[str, str]]] = deque()
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                with owner._lock:
                    owner.requests.append(Received(self.path, headers, json.loads(raw)))
                    status, body, extra = (owner._replies.popleft() if owner._replies
                                           else (500, "no scripted reply left", {}))
                data = body.encode()
                self.send_response(status)
                for name, value in extra.items():
                    self.send_header(name, value)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("connection", "close")
                self.end_headers()
                self.wfile.write(data)
                self.close_connection = True

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.01}, daemon=True)

    def reply(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        with self._lock:
            self._replies.append((status, body if isinstance(body, str) else json.dumps(body),
                                  headers or {}))

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


@pytest.fixture
def embedding_server() -> Iterator[EmbeddingServer]:
    server = EmbeddingServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
