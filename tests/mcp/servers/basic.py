"""An MCP server for the tests: text, structured, image and failing tools."""

from __future__ import annotations

import base64
import os
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ImageContent, TextContent

server = MCPServer("basic", log_level="ERROR")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool()
def pixel() -> list[TextContent | ImageContent]:
    """A one-pixel image and a caption."""
    data = base64.b64encode(b"\x89PNG-not-really").decode()
    return [TextContent(type="text", text="a pixel"),
            ImageContent(type="image", data=data, mime_type="image/png")]


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def fail(reason: str) -> str:
    """Always fails."""
    raise ToolError(reason)


@server.tool()
async def grow(ctx: Context) -> str:
    """Add a tool named 'extra' and tell the client the list changed."""

    def extra() -> str:
        """A tool added at run time."""
        return "extra!"

    server.add_tool(extra)
    await ctx.request_context.session.send_tool_list_changed()
    return "grown"


if __name__ == "__main__":
    if len(sys.argv) > 1:  # basic.py PORT: streamable HTTP on loopback
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
    else:
        server.run()
