"""A small MCP server (the official SDK): the tools ``examples/mcp_agent.py`` calls.

Run by the agent as a subprocess over stdio; on its own: ``python examples/mcp_server.py``.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("orders", log_level="ERROR")


@server.tool()
def order_status(order_id: str) -> dict[str, str]:
    """The shipping status of an order."""
    return {"order_id": order_id, "status": "shipped", "eta": "Thursday"}


if __name__ == "__main__":
    server.run()
