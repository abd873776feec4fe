"""Where workflow runs are persisted: the ``Storage`` contract and its backends.

``InMemoryStorage`` (tests, benchmarks), ``SQLiteStorage`` (the embedded default),
``RedisStorage`` (several processes sharing state) and ``PostgresStorage`` (the durable
system of record). ``RedisStorage`` and ``PostgresStorage`` are imported on first access,
so importing this package never imports ``redis`` or ``psycopg``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from procflow.storage.base import Storage
from procflow.storage.memory import InMemoryStorage
from procflow.storage.null import NullStorage
from procflow.storage.sqlite import SQLiteStorage
from procflow.storage.values import register_type

if TYPE_CHECKING:
    from procflow.storage.postgres import PostgresStorage
    from procflow.storage.redis import RedisStorage

__all__ = ["InMemoryStorage", "NullStorage", "PostgresStorage", "RedisStorage",
           "SQLiteStorage", "Storage", "register_type"]

_LAZY = ("PostgresStorage", "RedisStorage")


def __getattr__(name: str) -> Any:
    if name == "RedisStorage":
        from procflow.storage.redis import RedisStorage

        return RedisStorage
    if name == "PostgresStorage":
        from procflow.storage.postgres import PostgresStorage

        return PostgresStorage
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
