"""Blocking entry points for scripts and notebooks: ``run.start_sync``, ``agent.generate_sync``.

They start an event loop of their own (``anyio.run``), so they are refused where one is
already running: there the async method must be awaited instead (blocking the running
loop would deadlock it, and nesting loops is what ``nest_asyncio`` gets wrong).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

__all__ = ["call_sync"]

_T = TypeVar("_T")


def call_sync(fn: Callable[[], Awaitable[_T]], *, method: str, instead: str) -> _T:
    """Run ``fn()`` to completion in a new event loop and return its result.

    Args:
        fn: Makes the awaitable to run.
        method: The sync method being called, for the error (e.g. "Run.start_sync()").
        instead: What to await instead, for the error (e.g. "await run.start(...)").

    Raises:
        RuntimeError: Called while an event loop runs in this thread.
    """
    try:
        anyio.get_current_task()
    except RuntimeError:  # no event loop in this thread (anyio's NoEventLoopError)
        pass
    else:
        raise RuntimeError(
            f"{method} cannot be called inside a running event loop; use '{instead}' "
            "there instead")

    async def main() -> _T:
        return await fn()

    return anyio.run(main)
