"""MCP both ways (``procflow[mcp]``, the official ``mcp`` SDK 2.x).

``MCPServerStdio`` / ``MCPServerHTTP`` put an MCP server's tools in
``Agent(tools=[...])``; ``serve(...)`` (and ``procflow mcp serve``) exposes workflows
and agents as MCP tools.
"""

from __future__ import annotations

from procflow._extras import needs

with needs("mcp", feature="procflow.mcp"):
    import mcp as _sdk  # noqa: F401

from procflow.errors import MCPError
from procflow.mcp.client import (
    DEFAULT_MAX_RESULT_CHARS,
    DEFAULT_START_TIMEOUT,
    DEFAULT_TIMEOUT,
    BaseMCPServer,
    MCPServerHTTP,
    MCPServerStdio,
)
from procflow.mcp.server import TOKEN_ENV, build_server, serve

__all__ = ["DEFAULT_MAX_RESULT_CHARS", "DEFAULT_START_TIMEOUT", "DEFAULT_TIMEOUT",
           "TOKEN_ENV", "BaseMCPServer", "MCPError", "MCPServerHTTP", "MCPServerStdio",
           "build_server", "serve"]
