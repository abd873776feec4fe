"""Fault injection: private servers the tests may freeze (SIGSTOP) or kill.

Never the shared server at 6379: each test that freezes or kills Redis gets its own
``redis-server`` on a free port, stopped (after a SIGCONT) at the end.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

_START_TIMEOUT = 10.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@dataclass
class PrivateRedis:
    """A ``redis-server`` of the test's own, persisting every write (``appendfsync
    always``) so that a killed server restarts with its data."""

    binary: str
    directory: str
    port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes", "--appendfsync", "always", "--dir", self.directory],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + _START_TIMEOUT
        while not _answers(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"a private redis-server on port {self.port} did not start")
            time.sleep(0.05)

    def freeze(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGCONT)

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.thaw()
            self.process.kill()
            self.process.wait()


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    """A private redis-server (fails under ``PROCFLOW_REQUIRE_REDIS=1`` if none can run)."""
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("PROCFLOW_REQUIRE_REDIS") == "1":
            pytest.fail("redis-server is required (PROCFLOW_REQUIRE_REDIS=1)")
        pytest.skip("redis-server is not installed")
    with tempfile.TemporaryDirectory(prefix="procflow-chaos-") as directory:
        server = PrivateRedis(binary, directory, _free_port())
        try:
            server.start()
            yield server
        finally:
            server.stop()
