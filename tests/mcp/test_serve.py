"""``procflow mcp serve``: the SDK's client lists and calls workflows and agents over
stdio and streamable HTTP; runs are stored where ``procflow runs`` finds them."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from procflow.mcp import serve
from procflow.studio.cli import main as cli
from procflow.studio.targets import load_target

FLOWS = str(Path(__file__).parent / "targets" / "flows.py")
TARGETS = [f"{FLOWS}:double", f"{FLOWS}:approve", f"{FLOWS}:helper"]


@asynccontextmanager
async def stdio_session(db: Path) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "procflow", "mcp", "serve", *TARGETS, "--db", str(db)])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def text(result: Any) -> str:
    return "\n".join(c.text for c in result.content)


async def test_a_client_lists_and_calls_a_workflow_over_stdio(tmp_path: Path,
                                                              capsys: Any) -> None:
    db = tmp_path / "runs.db"
    async with stdio_session(db) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == {"double", "approve", "helper"}
        assert tools["double"].input_schema["properties"]["n"]["type"] == "integer"
        result = await session.call_tool("double", {"n": 21})
        assert not result.is_error
        assert result.structured_content == {"doubled": 42}
        assert json.loads(text(result)) == {"doubled": 42}
    capsys.readouterr()
    assert await anyio.to_thread.run_sync(cli, ["runs", "--db", str(db), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert [(r["workflow_id"], r["status"]) for r in runs["runs"]] == [("double", "success")]


async def test_agents_suspended_runs_and_bad_input_over_stdio(tmp_path: Path) -> None:
    async with stdio_session(tmp_path / "runs.db") as session:
        answer = await session.call_tool("helper", {"prompt": "hi"})
        assert text(answer) == "hello from the agent"
        waiting = await session.call_tool("approve", {"input": "order 7"})
        assert waiting.structured_content["status"] == "suspended"
        assert waiting.structured_content["waiting_for"] == {
            "wait": {"question": "ship order 7?"}}
        assert waiting.structured_content["run_id"] in text(waiting)
        bad = await session.call_tool("double", {"n": "many"})
        assert bad.is_error and "double" in text(bad)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    db = tmp_path_factory.mktemp("mcp") / "runs.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "procflow", "mcp", "serve", *TARGETS, "--http",
         f"127.0.0.1:{port}", "--db", str(db)],
        env={**os.environ, "PROCFLOW_MCP_TOKEN": "s3cret"}, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # "procflow: serving ... at URL; ..." once it listens
        assert "serving 3 tool(s) over MCP at http://127.0.0.1:" in line, line
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stderr is not None:
            proc.stderr.close()


async def test_a_client_calls_a_workflow_over_http_with_the_token(http_server: str) -> None:
    client = httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret"})
    async with client, streamable_http_client(http_server, http_client=client) as (r, w), \
            ClientSession(r, w) as session:
        await session.initialize()
        result = await session.call_tool("double", {"n": 4})
        assert result.structured_content == {"doubled": 8}


@pytest.mark.parametrize("headers", [pytest.param({}, id="no-token"),
                                     pytest.param({"Authorization": "Bearer nope"}, id="wrong")])
async def test_http_requests_without_the_token_get_401(http_server: str,
                                                       headers: dict[str, str]) -> None:
    async with httpx2.AsyncClient() as client:
        got = await client.post(http_server, headers=headers, json={})
    assert got.status_code == 401


def test_a_public_address_needs_a_token(capsys: Any) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PROCFLOW_MCP_TOKEN"}
    out = subprocess.run([sys.executable, "-m", "procflow", "mcp", "serve", f"{FLOWS}:double",
                          "--http", "0.0.0.0:0", "--db", os.devnull + ".db"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 2
    assert "needs a bearer token: --token or PROCFLOW_MCP_TOKEN" in out.stderr


async def test_serve_from_python_over_http() -> None:
    double = load_target(f"{FLOWS}:double")
    urls: list[str] = []
    listening = anyio.Event()

    def ready(url: str) -> None:
        urls.append(url)
        listening.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve(double, http=f"127.0.0.1:{free_port()}", ready=ready))
        await listening.wait()
        async with streamable_http_client(urls[0]) as (r, w), ClientSession(r, w) as session:
            await session.initialize()
            result = await session.call_tool("double", {"n": 1})
            assert result.structured_content == {"doubled": 2}
        tg.cancel_scope.cancel()
