"""An agent using the tools of an MCP server, offline (``pip install 'procflow[mcp]'``).

The server (``examples/mcp_server.py``, written with the official MCP SDK) runs as a
subprocess over stdio; a ``ScriptedModel`` plays the model. Run it::

    python examples/mcp_agent.py

and serve an agent or a workflow to MCP clients the other way round::

    procflow mcp serve examples/mcp_agent.py:support
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from procflow import Agent, load_trace
from procflow.mcp import MCPServerStdio
from procflow.models import ScriptedModel, ToolCall

orders = MCPServerStdio(sys.executable, args=[str(Path(__file__).with_name("mcp_server.py"))],
                        id="orders", prefix="orders", timeout=10)

support = Agent(id="support", instructions="Answer about orders.", tools=[orders],
                model=ScriptedModel([[ToolCall("orders_order_status", {"order_id": "A-1"})],
                                     "Order A-1 has shipped and arrives on Thursday."]))


async def main() -> None:
    async with orders:  # one server process for the whole block
        tools = await orders.list_tools()
        print("tools:", [t.id for t in tools])
        out = await support.generate("Where is my order A-1?")
    print("tool result:", out.tool_results[0].result)
    print("answer:", out.text)
    trace = await load_trace(out.run_id)
    assert trace is not None
    span = next(s for s in trace.spans if s.kind == "tool")
    print("span:", span.name, span.status, dict(span.attributes))


if __name__ == "__main__":
    anyio.run(main)
