"""What the guards read of a tool's result, and how they rewrite it (``process_tool_result``).

A tool returns any JSON-like value: the guards read its strings (a string result is
itself; a dict or list, each string in it, keys left alone) and rewrite the same
strings, keeping the value's shape.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["map_strings", "strings", "withheld"]


def strings(value: Any) -> list[str]:
    """The strings of a tool result, in order (nested in dicts, lists and tuples)."""
    out: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list | tuple):
            stack.extend(reversed(item))
    return out


async def map_strings(value: Any, fn: Callable[[str], Awaitable[str]]) -> Any:
    """``value`` with each of its strings replaced by ``await fn(s)`` (same shape)."""
    if isinstance(value, str):
        return await fn(value)
    if isinstance(value, dict):
        return {k: await map_strings(v, fn) for k, v in value.items()}
    if isinstance(value, list | tuple):
        items = [await map_strings(v, fn) for v in value]
        return items if isinstance(value, list) else tuple(items)
    return value


def withheld(processor_id: str, tool_name: str, reason: str) -> str:
    """What the model reads in place of a filtered tool result."""
    return (f"[the result of tool '{tool_name}' was withheld by processor "
            f"'{processor_id}': {reason}]")
