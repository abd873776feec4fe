"""``Toolset``: tools a model may call that are listed while the agent runs (an MCP
server's), beside the ``Tool`` objects given up front."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Protocol, runtime_checkable

from procflow.tools.tool import Tool

__all__ = ["Toolset", "toolset_sessions"]


@runtime_checkable
class Toolset(Protocol):
    """Tools listed asynchronously. An ``Agent(tools=[...])`` takes toolsets beside
    tools; it lists them at the start of each model step (so a toolset may change its
    tools between steps) and runs their ``Tool`` objects like any other.

    Attributes:
        id: Names the toolset in errors and traces.
    """

    id: str

    async def list_tools(self) -> Sequence[Tool]:
        """The tools the model may call now (cheap when nothing changed: it is called
        at every model step)."""
        ...

    def session(self) -> AbstractAsyncContextManager[None]:
        """The scope of one agent call: resources the toolset opens inside (a
        connection) are shared by the call and released at its end."""
        ...


@asynccontextmanager
async def toolset_sessions(toolsets: Sequence[Toolset]) -> AsyncIterator[None]:
    """Enter the ``session()`` of every toolset for the length of an agent call."""
    async with AsyncExitStack() as stack:
        for toolset in toolsets:
            await stack.enter_async_context(toolset.session())
        yield
