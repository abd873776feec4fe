"""``procflow mcp serve TARGET... [--http HOST:PORT] [--token T]``: workflows and agents
as the tools of an MCP server (``procflow[mcp]``), over stdio or streamable HTTP.

Runs are stored like those of ``procflow run`` (``--db`` → ``PROCFLOW_DB`` → the
project's database), so ``procflow runs`` lists them. Over stdio nothing but the
protocol goes to stdout; what the command says goes to stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from procflow._extras import MissingExtraError, needs
from procflow.studio.commands import UsageError
from procflow.studio.store import find_store
from procflow.studio.targets import load_target

__all__ = ["add_mcp_parser", "mcp_main"]


def add_mcp_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``mcp serve`` to the ``procflow`` parser (``sub``: its subparsers)."""
    mcp = sub.add_parser("mcp", help="serve workflows and agents over MCP (procflow[mcp])",
                         description="Model Context Protocol commands.")
    mcp_sub = mcp.add_subparsers(dest="mcp_command", metavar="COMMAND",
                                 parser_class=type(mcp))
    serve = mcp_sub.add_parser(
        "serve", parents=[common], help="serve workflows and agents as MCP tools",
        description="Serve each workflow as an MCP tool taking its input schema, and each "
        "agent as a tool taking a prompt, over stdio (default) or streamable HTTP.")
    serve.add_argument("targets", metavar="TARGET", nargs="+",
                       help="path/to/file.py:name or package.module:name (a Workflow or "
                       "an Agent)")
    serve.add_argument("--http", metavar="HOST:PORT",
                       help="serve streamable HTTP at http://HOST:PORT/mcp (':PORT' binds "
                       "127.0.0.1; any other address needs a token)")
    serve.add_argument("--token", metavar="T",
                       help="bearer token HTTP requests must carry, else 401 (default: "
                       "PROCFLOW_MCP_TOKEN)")


def mcp_main(args: argparse.Namespace) -> int:
    """Run ``procflow mcp serve`` until interrupted (or stdin closes)."""
    import anyio

    if args.mcp_command != "serve":
        raise UsageError("say 'procflow mcp serve TARGET...' (see 'procflow mcp --help')")
    try:
        with needs("mcp", feature="procflow mcp serve"):
            from procflow.mcp.server import TOKEN_ENV, parse_address, serve
    except MissingExtraError as exc:
        raise UsageError(str(exc)) from None
    targets = [load_target(spec) for spec in args.targets]
    if args.http is not None:
        parse_address(args.http)
    token = args.token or os.environ.get(TOKEN_ENV) or None
    store = find_store(args.db, create=True)

    def ready(where: str) -> None:
        print(f"procflow: serving {len(targets)} tool(s) over MCP at {where}; runs stored "
              f"in {store.location}", file=sys.stderr, flush=True)

    async def main() -> None:
        try:
            await serve(*targets, http=args.http, token=token, storage=store.storage,
                        ready=ready)
        finally:
            if store.owned:
                await store.storage.aclose()

    anyio.run(main)
    return 0
