"""Checks of large texts run in a worker thread, so they never stall the event loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio.to_thread

__all__ = ["OFF_LOOP_CHARS", "off_loop"]

_T = TypeVar("_T")

OFF_LOOP_CHARS = 4_000
"""Texts longer than this are checked in a worker thread (see ``off_loop``)."""


async def off_loop(fn: Callable[..., _T], text: str, *args: object,
                   limit: int = OFF_LOOP_CHARS) -> _T:
    """``fn(text, *args)``, in a worker thread when ``text`` is longer than ``limit``
    characters (where a check takes more than a few milliseconds), so a large input
    never stalls the event loop; short texts run inline (a thread hop costs more)."""
    if len(text) <= limit:
        return fn(text, *args)
    return await anyio.to_thread.run_sync(fn, text, *args)
