"""MCPServerHTTP against real streamable-HTTP servers on loopback: an SDK server, and
procflow's own ``procflow mcp serve --http`` behind a bearer token."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from procflow import Agent
from procflow.errors import MCPError
from procflow.mcp import MCPServerHTTP
from procflow.models import ScriptedModel, ToolCall

HERE = Path(__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_listening(proc: subprocess.Popen[str], url: str) -> None:
    for _ in range(600):  # polls until it answers; a dead process fails at once
        assert proc.poll() is None, "the server exited"
        try:
            httpx2.get(url, timeout=1)
            return
        except httpx2.TransportError:
            time.sleep(0.05)
    raise AssertionError(f"{url} never answered")


@pytest.fixture(scope="module")
def sdk_server() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(HERE / "servers" / "basic.py"), str(port)],
                            stderr=subprocess.DEVNULL, text=True)
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        wait_listening(proc, url)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def procflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    db = tmp_path_factory.mktemp("mcp-http") / "runs.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "procflow", "mcp", "serve",
         f"{HERE / 'targets' / 'flows.py'}:double", "--http", f"127.0.0.1:{port}",
         "--token", "s3cret", "--db", str(db)],
        stderr=subprocess.DEVNULL, text=True, env=os.environ.copy())
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        wait_listening(proc, url)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def test_an_agent_calls_a_tool_of_an_http_server(sdk_server: str) -> None:
    model = ScriptedModel([[ToolCall("add", {"a": 20, "b": 22})], "42"])
    out = await Agent(id="a", model=model, tools=[MCPServerHTTP(sdk_server)]).generate("go")
    assert out.tool_results[0].result == {"result": 42}
    assert not out.tool_results[0].is_error


async def test_headers_carry_the_token_to_procflows_own_server(procflow_server: str) -> None:
    server = MCPServerHTTP(procflow_server, headers={"Authorization": "Bearer s3cret"},
                           id="flows")
    model = ScriptedModel([[ToolCall("double", {"n": 5})], "ten"])
    out = await Agent(id="a", model=model, tools=[server]).generate("go")
    assert out.tool_results[0].result == {"doubled": 10}


async def test_a_refused_token_is_an_mcp_error_naming_the_server(procflow_server: str) -> None:
    server = MCPServerHTTP(procflow_server, id="flows", start_timeout=10)
    with pytest.raises(MCPError, match="MCP server 'flows': could not connect: Server "
                       "returned an error response"):
        await server.list_tools()


def test_importing_procflow_mcp_without_the_sdk_names_the_extra() -> None:
    code = ("import sys; sys.modules['mcp'] = None\n"
            "try:\n    import procflow.mcp\nexcept ImportError as exc:\n    print(exc)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == ("procflow.mcp needs mcp, which is not installed: pip "
                                  "install 'procflow[mcp]'")
