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
    """A ``redis-server`` of the test's own."""

    process: subprocess.Popen[bytes]
    port: int

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def freeze(self) -> None:
        os.kill(self.process.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    """A private redis-server (fails under ``PROCFLOW_REQUIRE_REDIS=1`` if none can run)."""
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("PROCFLOW_REQUIRE_REDIS") == "1":
            pytest.fail("redis-server is required (PROCFLOW_REQUIRE_REDIS=1)")
        pytest.skip("redis-server is not installed")
    with tempfile.TemporaryDirectory(prefix="procflow-chaos-") as directory:
        port = _free_port()
        process = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", directory],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        server = PrivateRedis(process, port)
        try:
            deadline = time.monotonic() + _START_TIMEOUT
            while not _answers(port):
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"a private redis-server on port {port} did not start")
                time.sleep(0.05)
            yield server
        finally:
            if process.poll() is None:
                server.thaw()
                process.kill()
            process.wait()
