"""Where workflow runs are persisted: the ``Storage`` contract and its backends.

``InMemoryStorage`` (tests, benchmarks), ``SQLiteStorage`` (the embedded default) and
``RedisStorage`` (several processes sharing state). ``RedisStorage`` is imported on first
access, so importing this package never imports ``redis``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from procflow.storage.base import Storage
from procflow.storage.memory import InMemoryStorage
from procflow.storage.null import NullStorage
from procflow.storage.sqlite import SQLiteStorage

if TYPE_CHECKING:
    from procflow.storage.redis import RedisStorage

__all__ = ["InMemoryStorage", "NullStorage", "RedisStorage", "SQLiteStorage", "Storage"]


def __getattr__(name: str) -> Any:
    if name == "RedisStorage":
        from procflow.storage.redis import RedisStorage

        return RedisStorage
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), "RedisStorage"])
