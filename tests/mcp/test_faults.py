"""Faults of MCP servers give tool errors (or an MCPError before any tool is listed),
never a hang: real servers that crash, hang or misbehave on purpose."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from procflow import Agent
from procflow.errors import MCPError
from procflow.mcp import MCPServerStdio
from procflow.models import ScriptedModel, ToolCall

SERVERS = Path(__file__).parent / "servers"


def server(name: str, **kwargs: object) -> MCPServerStdio:
    return MCPServerStdio(sys.executable, args=[str(SERVERS / name)], **kwargs)  # type: ignore[arg-type]


async def call(srv: MCPServerStdio, *calls: ToolCall) -> list[tuple[bool, str]]:
    model = ScriptedModel([list(calls), "done"])
    out = await Agent(id="a", model=model, tools=[srv]).generate("go")
    assert out.text == "done"
    return [(r.is_error, str(r.result)) for r in out.tool_results]


@pytest.mark.parametrize(("tool", "args", "says"), [
    pytest.param("crash", {}, "MCP server 'faulty', tool 'crash': failed", id="crash"),
    pytest.param("hang", {}, "MCP server 'faulty', tool 'hang': did not answer within 2s",
                 id="hang"),
    pytest.param("protocol_error", {}, "answered with an error: internal failure on purpose",
                 id="protocol-error"),
    pytest.param("huge", {"chars": 5000}, "characters, over max_result_chars=1000",
                 id="oversized"),
])
async def test_a_faulty_tool_is_an_error_result_the_model_sees(
        tool: str, args: dict[str, object], says: str) -> None:
    model = ScriptedModel([[ToolCall(tool, args)], "done"])
    srv = server("faulty.py", timeout=2, max_result_chars=1000)
    out = await Agent(id="a", model=model, tools=[srv]).generate("go")
    assert out.text == "done"
    result = out.tool_results[0]
    assert result.is_error and says in str(result.result)
    seen = [p for m in model.requests[1].prompt if isinstance(m["content"], list)
            for p in m["content"] if p["type"] == "tool-result"]
    assert seen[0]["is_error"] and says in str(seen[0]["result"])


async def test_after_a_crash_the_next_call_reconnects() -> None:
    srv = server("faulty.py", timeout=5)
    async with srv:
        results = await call(srv, ToolCall("crash", {}))
        assert results[0][0]
        assert await call(srv, ToolCall("ok", {})) == [(False, "{'result': 'fine'}")]


@pytest.mark.parametrize("name", [pytest.param("no_start.py", id="exits"),
                                  pytest.param("silent.py", id="never-answers")])
async def test_a_server_that_does_not_start_is_an_mcp_error(name: str) -> None:
    agent = Agent(id="a", model=ScriptedModel(["never"]), tools=[server(name, start_timeout=2)])
    stem = name.removesuffix(".py")
    with pytest.raises(MCPError, match=f"MCP server '{stem}': did not start") as info:
        await agent.generate("go")
    assert info.value.server == stem and info.value.tool is None


async def test_a_missing_command_is_an_mcp_error() -> None:
    srv = MCPServerStdio("/nonexistent/mcp-server", id="ghost")
    with pytest.raises(MCPError, match="MCP server 'ghost': did not start"):
        await srv.list_tools()


async def test_cancelling_the_agent_call_cancels_the_mcp_request() -> None:
    srv = server("faulty.py", timeout=600)
    agent = Agent(id="a", model=ScriptedModel([[ToolCall("hang", {})], "done"]), tools=[srv])
    async with srv:
        await srv.list_tools()  # started: the cancel lands on the hanging call
        with anyio.move_on_after(1) as scope:
            await agent.generate("go")
        assert scope.cancelled_caught
        assert await call(srv, ToolCall("ok", {})) == [(False, "{'result': 'fine'}")]
