"""Server-side caches: the ``ServerCache`` contract and its backends.

``InMemoryServerCache`` (one process; development and tests) and ``RedisCache``
(shared by processes). ``ResponseCache`` stores model responses in any of them.
``RedisCache`` is imported on first access, so importing this package never imports
``redis``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from procflow.cache.base import ServerCache
from procflow.cache.memory import InMemoryServerCache

if TYPE_CHECKING:
    from procflow.cache.redis import RedisCache

__all__ = ["InMemoryServerCache", "RedisCache", "ServerCache"]


def __getattr__(name: str) -> Any:
    if name == "RedisCache":
        from procflow.cache.redis import RedisCache

        return RedisCache
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), "RedisCache"])
