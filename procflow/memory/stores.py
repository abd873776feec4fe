"""Which ``MemoryStore`` a ``storage=`` argument means (for ``Memory`` and for the memory
processors built by hand, so both accept the same values)."""

from __future__ import annotations

import os
import sys
import weakref

from procflow.memory.base import MemoryStore
from procflow.memory.inmemory import InMemoryMemoryStore
from procflow.memory.postgres import PostgresMemoryStore
from procflow.memory.sqlite import DEFAULT_MEMORY_PATH, SQLiteMemoryStore
from procflow.storage.base import Storage
from procflow.storage.memory import InMemoryStorage
from procflow.storage.postgres import PostgresStorage
from procflow.storage.sqlite import SQLiteStorage

__all__ = ["StorageArg", "memory_store"]

StorageArg = Storage | MemoryStore | str | os.PathLike[str] | None
"""What ``storage=`` takes: a project ``Storage``, a ``MemoryStore``, a SQLite file path,
or ``None`` for the default file."""

_SHARED: weakref.WeakKeyDictionary[InMemoryStorage, InMemoryMemoryStore] = (
    weakref.WeakKeyDictionary())
"""The memory kept with each ``InMemoryStorage`` (it lives as long as the storage)."""


def memory_store(storage: StorageArg, where: str = "Memory") -> MemoryStore:
    """The ``MemoryStore`` for ``storage``: ``None`` -> ``SQLiteMemoryStore`` on
    ``DEFAULT_MEMORY_PATH``; a path -> ``SQLiteMemoryStore``; ``SQLiteStorage`` -> its
    file; ``PostgresStorage`` / ``RedisStorage`` -> the same database or server;
    ``InMemoryStorage`` -> the memory kept with it; a ``MemoryStore`` as it is.

    Args:
        storage: What the caller gave.
        where: The class the argument was given to, for the error message.

    Raises:
        TypeError: Anything else (naming what was given).
    """
    if storage is None:
        return SQLiteMemoryStore(DEFAULT_MEMORY_PATH)
    if isinstance(storage, str | os.PathLike):
        return SQLiteMemoryStore(storage)
    if isinstance(storage, SQLiteStorage):
        return SQLiteMemoryStore(storage.path)  # its own tables in the runs' file
    if isinstance(storage, PostgresStorage):
        return PostgresMemoryStore(storage)
    if isinstance(storage, InMemoryStorage):
        shared = _SHARED.get(storage)
        if shared is None:
            shared = _SHARED[storage] = InMemoryMemoryStore()
        return shared
    # A RedisStorage instance means its module (and redis) is already imported; checking
    # through sys.modules keeps ``import procflow.memory`` from importing redis.
    redis_storage = sys.modules.get("procflow.storage.redis")
    if redis_storage is not None and isinstance(storage, redis_storage.RedisStorage):
        from procflow.memory.redis import RedisMemoryStore

        return RedisMemoryStore(storage)
    if isinstance(storage, MemoryStore):
        return storage
    raise TypeError(f"{where}(storage=...) takes a Storage (SQLiteStorage, PostgresStorage, "
                    f"RedisStorage, InMemoryStorage), a MemoryStore or a file path, got "
                    f"{type(storage).__name__}")
