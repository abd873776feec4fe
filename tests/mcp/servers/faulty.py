"""An MCP server whose tools misbehave on purpose: crash, hang, protocol error, huge."""

from __future__ import annotations

import os

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

server = MCPServer("faulty", log_level="ERROR")


@server.tool()
def ok() -> str:
    """Answers."""
    return "fine"


@server.tool()
def crash() -> str:
    """The server process dies mid-call."""
    os._exit(3)


@server.tool()
async def hang() -> str:
    """Never answers."""
    await anyio.sleep_forever()
    return "never"


@server.tool()
def protocol_error() -> str:
    """Answers with a JSON-RPC error instead of a result."""
    raise MCPError(-32603, "internal failure on purpose")


@server.tool()
def huge(chars: int) -> str:
    """A result of ``chars`` characters."""
    return "x" * chars


if __name__ == "__main__":
    server.run()
