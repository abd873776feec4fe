"""Which ``MemoryStore`` a ``storage=`` argument means (for ``Memory`` and for the memory
processors built by hand, so both accept the same values).

Without one, memory is found as runs are (``procflow.storage.locate``): the process
default (``set_default_storage``), ``PROCFLOW_DB``, the project's
``.procflow/procflow.db`` (or a ``.procflow/memory.db`` beside it, where ``Memory()``
kept memory before), else ``.procflow/memory.db`` in the working directory.
"""

from __future__ import annotations

import os
import sys
import weakref
from pathlib import Path

from procflow.memory.base import MemoryStore
from procflow.memory.inmemory import InMemoryMemoryStore
from procflow.memory.postgres import PostgresMemoryStore
from procflow.memory.sqlite import DEFAULT_MEMORY_PATH, SQLiteMemoryStore
from procflow.storage.base import Storage
from procflow.storage.locate import (
    MEMORY_DB,
    current_location,
    get_default_storage,
    located_storage,
)
from procflow.storage.memory import InMemoryStorage
from procflow.storage.postgres import PostgresStorage
from procflow.storage.sqlite import SQLiteStorage

__all__ = ["StorageArg", "located_memory_store", "memory_store"]

StorageArg = Storage | MemoryStore | str | os.PathLike[str] | None
"""What ``storage=`` takes: a project ``Storage``, a ``MemoryStore``, a SQLite file path,
or ``None`` to find it as runs do (see the module docstring)."""

_SHARED: weakref.WeakKeyDictionary[InMemoryStorage, InMemoryMemoryStore] = (
    weakref.WeakKeyDictionary())
"""The memory kept with each ``InMemoryStorage`` (it lives as long as the storage)."""


def memory_store(storage: StorageArg, where: str = "Memory") -> MemoryStore:
    """The ``MemoryStore`` for ``storage``: ``None`` -> the one ``located_memory_store``
    finds; a path -> ``SQLiteMemoryStore``; ``SQLiteStorage`` -> its
    file; ``PostgresStorage`` / ``RedisStorage`` -> the same database or server;
    ``InMemoryStorage`` -> the memory kept with it; a ``MemoryStore`` as it is.

    Args:
        storage: What the caller gave.
        where: The class the argument was given to, for the error message.

    Raises:
        TypeError: Anything else (naming what was given).
    """
    if storage is None:
        return located_memory_store()
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


def located_memory_store() -> MemoryStore:
    """The memory of the storage runs would use (``set_default_storage``,
    ``PROCFLOW_DB``, the project's database: ``located_storage``), sharing its
    connection; in a project whose ``.procflow/`` holds a ``memory.db`` (kept there by
    ``Memory()`` before it followed runs), that file; with nothing found,
    ``DEFAULT_MEMORY_PATH`` in the working directory.

    Raises:
        TypeError: The process default storage is one memory cannot be kept in.
    """
    if get_default_storage() is None:
        found = current_location()
        if found is not None and found.source == "project":
            kept = Path(found.where).parent.parent / MEMORY_DB
            if kept.is_file():
                return SQLiteMemoryStore(kept)
    located = located_storage()
    if located is None:
        return SQLiteMemoryStore(DEFAULT_MEMORY_PATH)
    try:
        return memory_store(located)
    except TypeError as exc:
        raise TypeError(f"memory cannot be kept in the default storage {located!r} "
                        "(set_default_storage): give Memory(storage=...) a SQLiteStorage, "
                        "PostgresStorage, RedisStorage, InMemoryStorage, a MemoryStore or "
                        "a file path") from exc
