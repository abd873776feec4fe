"""MCP servers as agent toolsets: real SDK servers on stdio, a ScriptedModel agent."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from procflow import Agent, load_trace, tool
from procflow.mcp import MCPServerStdio
from procflow.models import ScriptedModel, ToolCall
from procflow.storage import SQLiteStorage
from procflow.studio.cli import main as cli

SERVERS = Path(__file__).parent / "servers"


def basic(**kwargs: object) -> MCPServerStdio:
    return MCPServerStdio(sys.executable, args=[str(SERVERS / "basic.py")], **kwargs)  # type: ignore[arg-type]


def tool_results(prompt: list[dict[str, object]]) -> list[dict[str, object]]:
    return [part for m in prompt if isinstance(m["content"], list)
            for part in m["content"] if part["type"] == "tool-result"]


async def test_an_agent_calls_a_server_tool_and_the_model_sees_its_result() -> None:
    model = ScriptedModel([[ToolCall("add", {"a": 2, "b": 3})], "five"])
    agent = Agent(id="calc", model=model, tools=[basic()])
    out = await agent.generate("2+3?")
    assert out.text == "five"
    assert out.tool_results[0].result == {"result": 5}
    assert tool_results(model.requests[1].prompt)[0]["result"] == {"result": 5}


async def test_server_tools_are_listed_beside_ordinary_tools_with_a_prefix() -> None:
    @tool
    def local(x: int) -> int:
        """A local tool."""
        return x

    model = ScriptedModel(["hi"])
    await Agent(id="a", model=model, tools=[local, basic(prefix="srv")]).generate("hi")
    specs = {t.name: t for t in model.requests[0].tools or []}
    assert {"local", "srv_add", "srv_echo", "srv_fail"} <= set(specs)
    assert specs["srv_add"].description == "Add two numbers."
    assert specs["srv_add"].parameters["required"] == ["a", "b"]


async def test_a_server_error_result_is_an_error_tool_result() -> None:
    model = ScriptedModel([[ToolCall("fail", {"reason": "disk full"})], "sorry"])
    out = await Agent(id="a", model=model, tools=[basic()]).generate("go")
    result = out.tool_results[0]
    assert result.is_error
    assert "MCP server 'basic', tool 'fail'" in str(result.result)
    assert "disk full" in str(result.result)


async def test_images_come_back_as_image_parts() -> None:
    model = ScriptedModel([[ToolCall("pixel", {})], "nice"])
    out = await Agent(id="a", model=model, tools=[basic()]).generate("go")
    text, image = out.tool_results[0].result
    assert text == "a pixel"
    assert image["type"] == "image" and image["media_type"] == "image/png"


async def test_one_connection_serves_a_scope_and_the_list_refreshes_on_change() -> None:
    server = basic()
    model = ScriptedModel([[ToolCall("grow", {})], [ToolCall("extra", {})], "done"])
    async with server:
        out = await Agent(id="a", model=model, tools=[server]).generate("go")
        # the tool added by 'grow' lives in that one server process
        assert [r.result for r in out.tool_results] == [{"result": "grown"},
                                                        {"result": "extra!"}]
    assert "extra" in {t.name for t in model.requests[1].tools or []}


async def test_requires_approval_suspends_the_named_tools(tmp_path: Path) -> None:
    def agent() -> Agent:  # built anew for the resume, as in another process
        script = [[ToolCall("echo", {"text": "hi"})], "done"]
        return Agent(id="a", model=ScriptedModel(script),
                     storage=SQLiteStorage(str(tmp_path / "runs.db")),
                     tools=[basic(requires_approval={"echo"})])

    out = await agent().generate("go")
    assert [c.tool_name for c in out.suspended] == ["echo"]
    # the restarted run lists the tools again and connects to a new server process
    done = await agent().resume(out.run_id, approve=[out.suspended[0].tool_call_id])
    assert done.text == "done"
    assert done.tool_results[-1].result == {"result": "hi"}


async def test_the_stdio_process_ends_with_its_scope() -> None:
    server = basic()
    async with server:
        model = ScriptedModel([[ToolCall("pid", {})], "done"])
        out = await Agent(id="a", model=model, tools=[server]).generate("go")
        pid = out.tool_results[0].result["result"]
        os.kill(pid, 0)  # alive while the scope is open
    with pytest.raises(ProcessLookupError):  # ended and reaped: no zombie
        os.kill(pid, 0)


async def test_each_mcp_call_is_a_tool_span_of_the_stored_trace(tmp_path: Path) -> None:
    storage = SQLiteStorage(str(tmp_path / "runs.db"))
    model = ScriptedModel([[ToolCall("add", {"a": 1, "b": 1}),
                            ToolCall("fail", {"reason": "no"})], "done"])
    out = await Agent(id="a", model=model, tools=[basic()], storage=storage).generate("go")
    trace = await load_trace(out.run_id, storage=storage)
    assert trace is not None
    spans = {s.name: s for s in trace.spans if s.kind == "tool"}
    add, fail = spans["tool call: add"], spans["tool call: fail"]
    assert add.attributes["mcp.server"] == "basic" and add.attributes["mcp.tool"] == "add"
    assert add.status == "success" and add.end is not None and add.end >= add.start
    assert fail.status == "failed" and "no" in (fail.error or "")
    assert fail.attributes["mcp.tool"] == "fail"
    await storage.aclose()


def test_procflow_graph_lists_an_agents_mcp_servers_under_its_tool_step(capsys: Any) -> None:
    flows = Path(__file__).parent / "targets" / "flows.py"
    assert cli(["graph", f"{flows}:with_mcp", "--plain", "--depth", "3"]) == 0
    assert "□ toolset:basic" in capsys.readouterr().out
