"""MCP servers as toolsets of an agent: ``MCPServerStdio`` and ``MCPServerHTTP``.

A server object goes in ``Agent(tools=[...])``. Its connection opens on first use;
``async with server:`` keeps one connection for the whole block, otherwise each agent
call opens one that its tool calls share (and a run continued without a call, on a
worker, connects for each use). Closing a stdio connection ends the subprocess.

Fault rule: an ``MCPError`` while the tools are listed (the server does not start,
crashes or hangs before answering) ends the agent call; during a tool call the same
error becomes that call's error result, which the model sees, and the run goes on.
"""

from __future__ import annotations

import math
import re
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from contextvars import ContextVar
from pathlib import PurePath
from types import MappingProxyType, TracebackType
from typing import Any

import anyio
import httpx2
from anyio.abc import TaskGroup, TaskStatus
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp import types as mt
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError as SDKError

from procflow.errors import MCPError
from procflow.mcp.results import to_value
from procflow.tools import Tool, ToolContext

__all__ = ["DEFAULT_MAX_RESULT_CHARS", "DEFAULT_START_TIMEOUT", "DEFAULT_TIMEOUT",
           "BaseMCPServer", "MCPServerHTTP", "MCPServerStdio"]

DEFAULT_TIMEOUT = 30.0
"""Seconds a server may take to list its tools or to answer one call."""

DEFAULT_START_TIMEOUT = 30.0
"""Seconds a server may take to start and answer the handshake."""

DEFAULT_MAX_RESULT_CHARS = 200_000
"""A tool result longer than this (text and JSON) is refused as an error."""

_links: ContextVar[Mapping[int, _Link]] = ContextVar(
    "procflow_mcp_links", default=MappingProxyType({}))
"""The connections of the current agent call, by ``id(server)``."""


class _Link:
    """One server's connections inside one scope: opened on first use by a task of the
    scope's task group (so any task of the scope may use them), closed with the scope."""

    def __init__(self, server: BaseMCPServer, tg: TaskGroup) -> None:
        self.server = server
        self.tg = tg
        self.lock = anyio.Lock()
        self.session: ClientSession | None = None
        self.scope: anyio.CancelScope | None = None

    async def get(self) -> ClientSession:
        async with self.lock:
            if self.session is None:
                self.session = await self.tg.start(self._run)
            return self.session

    def drop(self, session: ClientSession) -> None:
        """Forget a connection that failed (the next use opens a new one)."""
        if self.session is session and self.scope is not None:
            self.scope.cancel()
            self.session = None

    async def _run(self, *, task_status: TaskStatus[ClientSession]) -> None:
        server, started = self.server, False
        with anyio.CancelScope() as scope:
            self.scope = scope
            try:
                async with server.transport() as (read, write), ClientSession(
                        read, write, message_handler=server.on_message) as session:
                    with anyio.fail_after(server.start_timeout):
                        await session.initialize()
                    started = True
                    task_status.started(session)
                    await anyio.sleep_forever()
            except Exception as exc:
                if not started:
                    raise server.error(f"{server.failed_start}: {_describe(exc)}") from exc
                # A connection that broke after starting: its calls fail on their own.
            finally:
                if self.scope is scope:
                    self.session = None


class BaseMCPServer:
    """What ``MCPServerStdio`` and ``MCPServerHTTP`` share: the connection, the tool
    list and the calls. A subclass gives ``transport()``.

    It is a ``Toolset``: ``Agent(tools=[server])`` lists its tools at each model step.
    """

    failed_start = "did not start"
    """How an error says the connection could not be made."""

    def __init__(self, id: str, *, prefix: str | None, timeout: float, start_timeout: float,
                 requires_approval: bool | Collection[str], max_result_chars: int) -> None:
        for name, value in (("timeout", timeout), ("start_timeout", start_timeout)):
            if not (isinstance(value, int | float) and value > 0 and math.isfinite(value)):
                raise ValueError(f"MCP server '{id}': {name} must be a number of seconds > 0, "
                                 f"got {value!r}")
        if prefix is not None and not re.fullmatch(r"[A-Za-z0-9_-]+", prefix):
            raise ValueError(f"MCP server '{id}': prefix must be letters, digits, '_' or "
                             f"'-', got {prefix!r}")
        self.id = id
        self.prefix = prefix
        self.timeout = float(timeout)
        self.start_timeout = float(start_timeout)
        self.requires_approval = (requires_approval if isinstance(requires_approval, bool)
                                  else frozenset(requires_approval))
        self.max_result_chars = max_result_chars
        self._tools: list[Tool] | None = None
        self._shared: _Link | None = None
        self._depth = 0

    # -- what a subclass gives -----------------------------------------------------------

    def transport(self) -> AbstractAsyncContextManager[Any]:
        """Open the transport: an async context manager of ``(read, write)`` streams."""
        raise NotImplementedError

    # -- scopes --------------------------------------------------------------------------

    async def __aenter__(self) -> BaseMCPServer:
        """Keep one connection for the whole block (opened on first use, closed — and a
        stdio server's process ended — when the block ends)."""
        self._depth += 1
        if self._depth == 1:
            tg = anyio.create_task_group()
            await tg.__aenter__()
            self._shared = _Link(self, tg)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        self._depth -= 1
        if self._depth == 0 and self._shared is not None:
            link, self._shared = self._shared, None
            link.tg.cancel_scope.cancel()
            await link.tg.__aexit__(None, None, None)

    async def aclose(self) -> None:
        """End the ``async with`` scope's connection now, if one is open."""
        if self._depth > 0:
            self._depth = 1
            await self.__aexit__(None, None, None)

    @asynccontextmanager
    async def session(self) -> AsyncIterator[None]:
        """The scope of one agent call (``Toolset.session``): its tool calls share one
        connection, unless ``async with server:`` already holds one."""
        if self._shared is not None or id(self) in _links.get():
            yield
            return
        async with _task_group() as tg:
            token = _links.set({**_links.get(), id(self): _Link(self, tg)})
            try:
                yield
            finally:
                _links.reset(token)
                tg.cancel_scope.cancel()

    @asynccontextmanager
    async def _connected(self) -> AsyncIterator[tuple[_Link, ClientSession]]:
        link = self._shared or _links.get().get(id(self))
        if link is not None:
            yield link, await link.get()
            return
        async with _task_group() as tg:  # no scope: a connection for this use
            link = _Link(self, tg)
            try:
                yield link, await link.get()
            finally:
                tg.cancel_scope.cancel()

    # -- the toolset ---------------------------------------------------------------------

    async def list_tools(self) -> Sequence[Tool]:
        """The server's tools as procflow ``Tool`` objects (asked again after the server
        says its list changed).

        Raises:
            MCPError: The server did not start or answer within ``timeout``.
        """
        tools = self._tools
        if tools is not None:
            return tools
        async with self._connected() as (link, session):
            try:
                with anyio.fail_after(self.timeout):
                    listed: list[mt.Tool] = []
                    cursor: str | None = None
                    while True:
                        page = await session.list_tools(
                            params=None if cursor is None else mt.PaginatedRequestParams(
                                cursor=cursor))
                        listed += page.tools
                        cursor = page.next_cursor
                        if cursor is None:
                            break
            except Exception as exc:
                link.drop(session)
                raise self.error(f"could not list its tools: {_describe(exc)}") from exc
        tools = self._tools = [self._tool(t) for t in listed]
        return tools

    async def on_message(self, message: Any) -> None:
        """The SDK's message handler: a changed tool list is listed again."""
        if isinstance(message, mt.ToolListChangedNotification):
            self._tools = None

    async def call(self, name: str, args: dict[str, Any]) -> Any:
        """Call the server's tool ``name`` (its own name, without the prefix).

        Returns:
            The result as procflow values (see ``procflow.mcp.results.to_value``).

        Raises:
            MCPError: The server answered with an error, crashed, hung past ``timeout``
                or sent a result over ``max_result_chars``.
        """
        async with self._connected() as (link, session):
            try:
                with anyio.fail_after(self.timeout):
                    result = await session.call_tool(name, args)
            except TimeoutError as exc:
                link.drop(session)
                raise self.error(f"did not answer within {self.timeout:g}s", name) from exc
            except SDKError as exc:
                if exc.code != mt.CONNECTION_CLOSED:
                    raise self.error(f"answered with an error: {exc.message}", name) from exc
                link.drop(session)
                raise self.error("failed: the connection closed (the server exited or "
                                 "crashed)", name) from exc
            except Exception as exc:
                link.drop(session)
                raise self.error(f"failed: {_describe(exc)}", name) from exc
        value, text, size = to_value(result)
        if size > self.max_result_chars:
            raise self.error(f"sent a result of {size} characters, over max_result_chars="
                             f"{self.max_result_chars}", name)
        if result.is_error:
            raise self.error(f"reported an error: {text}", name)
        return value

    def error(self, what: str, tool: str | None = None) -> MCPError:
        """An ``MCPError`` naming this server (and the tool)."""
        where = f"MCP server '{self.id}'" + ("" if tool is None else f", tool '{tool}'")
        return MCPError(f"{where}: {what}", server=self.id, tool=tool)

    def _tool(self, spec: mt.Tool) -> Tool:
        remote = spec.name
        local = re.sub(r"[^A-Za-z0-9_-]", "_", remote)
        if self.prefix:
            local = f"{self.prefix}_{local}"
        approval = self.requires_approval
        needs = approval if isinstance(approval, bool) else (remote in approval
                                                             or local in approval)

        async def execute(args: dict[str, Any], ctx: ToolContext) -> Any:
            return await self.call(remote, args)

        return Tool(local, spec.description or spec.title or "", dict(spec.input_schema),
                    execute, requires_approval=needs,
                    attributes={"mcp.server": self.id, "mcp.tool": remote})

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r})"


class MCPServerStdio(BaseMCPServer):
    """An MCP server run as a subprocess, spoken to over its stdin and stdout.

    Args:
        command: The program (``sys.executable``, ``"npx"``...).
        args: Its arguments.
        env: Environment variables added to the SDK's safe default environment.
        cwd: Its working directory.
        id: Names the server in errors and traces (default: the file name, without
            its suffix, of the last argument or the command).
        prefix: Tool names are ``{prefix}_{name}`` to the model (to keep two servers'
            tools apart).
        timeout: Seconds to list the tools or to answer one call.
        start_timeout: Seconds to start and answer the handshake.
        requires_approval: ``True``, or the names of the tools whose calls wait for a
            person's approval, like ``@tool(requires_approval=True)``.
        max_result_chars: A longer result is refused as a tool error.

    Example::

        server = MCPServerStdio(sys.executable, args=["server.py"])
        agent = Agent(id="helper", model=model, tools=[server])
    """

    def __init__(self, command: str, args: Sequence[str] = (), *,
                 env: Mapping[str, str] | None = None, cwd: str | None = None,
                 id: str | None = None, prefix: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT,
                 start_timeout: float = DEFAULT_START_TIMEOUT,
                 requires_approval: bool | Collection[str] = False,
                 max_result_chars: int = DEFAULT_MAX_RESULT_CHARS) -> None:
        self.params = StdioServerParameters(command=command, args=list(args),
                                            env=None if env is None else dict(env), cwd=cwd)
        name = PurePath((list(args) or [command])[-1].replace("\\", "/")).stem
        super().__init__(id or name, prefix=prefix, timeout=timeout,
                         start_timeout=start_timeout,
                         requires_approval=requires_approval,
                         max_result_chars=max_result_chars)

    def transport(self) -> AbstractAsyncContextManager[Any]:
        return stdio_client(self.params)


class MCPServerHTTP(BaseMCPServer):
    """An MCP server reached over streamable HTTP.

    Args:
        url: Its endpoint, e.g. ``"http://127.0.0.1:8000/mcp"``.
        headers: Sent with every request (``{"Authorization": "Bearer ..."}``).
        id: Names the server in errors and traces (default: the URL's host and port).
        prefix: Tool names are ``{prefix}_{name}`` to the model.
        timeout: Seconds to list the tools or to answer one call.
        start_timeout: Seconds to connect and answer the handshake.
        requires_approval: ``True``, or the names of the tools needing approval.
        max_result_chars: A longer result is refused as a tool error.
    """

    failed_start = "could not connect"

    def __init__(self, url: str, *, headers: Mapping[str, str] | None = None,
                 id: str | None = None, prefix: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT,
                 start_timeout: float = DEFAULT_START_TIMEOUT,
                 requires_approval: bool | Collection[str] = False,
                 max_result_chars: int = DEFAULT_MAX_RESULT_CHARS) -> None:
        self.url = url
        self.headers = dict(headers or {})
        super().__init__(id or httpx2.URL(url).netloc.decode(), prefix=prefix,
                         timeout=timeout, start_timeout=start_timeout,
                         requires_approval=requires_approval,
                         max_result_chars=max_result_chars)

    @asynccontextmanager
    async def transport(self) -> AsyncIterator[Any]:
        client = httpx2.AsyncClient(headers=self.headers, timeout=httpx2.Timeout(
            self.timeout, read=max(self.timeout, 300.0)))
        async with client, streamable_http_client(self.url, http_client=client) as streams:
            yield streams


@asynccontextmanager
async def _task_group() -> AsyncIterator[TaskGroup]:
    """A task group whose single error is raised as itself (callers catch ``MCPError``,
    not an exception group)."""
    try:
        async with anyio.create_task_group() as tg:
            yield tg
    except BaseExceptionGroup as group:
        while isinstance(group, BaseExceptionGroup) and len(group.exceptions) == 1:
            inner = group.exceptions[0]
            if not isinstance(inner, BaseExceptionGroup):
                raise inner from inner.__cause__
            group = inner
        raise


def _describe(exc: BaseException) -> str:
    """One line for an error that may be an exception group of the SDK's tasks."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    if isinstance(exc, SDKError):
        return exc.message
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if str(exc) else text
