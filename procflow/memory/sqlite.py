"""``SQLiteMemoryStore``: threads, messages and working memory in one SQLite file.

::

    threads(id, resource_id, title, metadata, created_at, updated_at)
    messages(seq, id, thread_id, resource_id, hidden, data)   -- seq: the save order
    working_memory(key, value, updated_at)

WAL mode with a busy timeout, one ``BEGIN IMMEDIATE`` transaction per write; blocking
calls run in a worker thread on one connection guarded by a lock (as ``SQLiteStorage``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, final

from procflow._backends import AsyncResource
from procflow._backends.sqlite import SQLiteFile, transaction
from procflow.memory.base import Thread
from procflow.memory.codec import (
    dump_message,
    is_hidden,
    load_message,
    load_metadata,
    timestamp,
    to_datetime,
)
from procflow.messages import Message

__all__ = ["DEFAULT_MEMORY_PATH", "SQLiteMemoryStore"]

DEFAULT_MEMORY_PATH: Final = ".procflow/memory.db"
"""Where ``Memory()`` keeps its SQLite file when given no store (relative to the cwd)."""


_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS threads (
        id          TEXT PRIMARY KEY,
        resource_id TEXT,
        title       TEXT,
        metadata    TEXT NOT NULL,
        created_at  REAL NOT NULL,
        updated_at  REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS threads_by_resource ON threads (resource_id, updated_at)",
    """CREATE TABLE IF NOT EXISTS messages (
        seq         INTEGER PRIMARY KEY AUTOINCREMENT,
        id          TEXT NOT NULL UNIQUE,
        thread_id   TEXT NOT NULL,
        resource_id TEXT,
        hidden      INTEGER NOT NULL DEFAULT 0,
        data        TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS messages_by_thread ON messages (thread_id, seq)",
    """CREATE TABLE IF NOT EXISTS working_memory (
        key        TEXT PRIMARY KEY,
        value      TEXT NOT NULL,
        updated_at REAL NOT NULL
    )""",
)

_UPSERT_THREAD: Final = """
    INSERT INTO threads (id, resource_id, title, metadata, created_at, updated_at)
    VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (id) DO UPDATE SET resource_id = excluded.resource_id,
        title = excluded.title, metadata = excluded.metadata,
        created_at = excluded.created_at, updated_at = excluded.updated_at
"""
# An upsert, not INSERT OR REPLACE: a known message keeps its seq (its place).
_UPSERT_MESSAGE: Final = """
    INSERT INTO messages (id, thread_id, resource_id, hidden, data) VALUES (?, ?, ?, ?, ?)
    ON CONFLICT (id) DO UPDATE SET thread_id = excluded.thread_id,
        resource_id = excluded.resource_id, hidden = excluded.hidden, data = excluded.data
"""
_NEW_THREAD: Final = """
    INSERT INTO threads (id, resource_id, title, metadata, created_at, updated_at)
    VALUES (?, ?, NULL, '{}', ?, ?)
    ON CONFLICT (id) DO UPDATE SET updated_at = excluded.updated_at,
        resource_id = COALESCE(threads.resource_id, excluded.resource_id)
"""
_THREAD_COLUMNS: Final = "id, resource_id, title, metadata, created_at, updated_at"


@final
class SQLiteMemoryStore(AsyncResource):
    """A ``MemoryStore`` in one SQLite file (created, with its directories, on first use).

    Args:
        path: The database file; default ``.procflow/memory.db``.

    Example:
        ```python
        memory = Memory(storage=SQLiteMemoryStore("chat.db"))
        ```
    """

    def __init__(self, path: str | os.PathLike[str] = DEFAULT_MEMORY_PATH) -> None:
        self._file = SQLiteFile(path, schema=_SCHEMA, name="SQLite memory store",
                                reopen="create a new SQLiteMemoryStore to use the file again")

    @property
    def path(self) -> Path:
        """The database file."""
        return self._file.path

    def __repr__(self) -> str:
        return f"SQLiteMemoryStore({str(self._file.path)!r})"

    # ------------------------------------------------------------------ threads

    async def save_thread(self, thread: Thread) -> None:
        """Insert or replace a thread."""
        row = (thread.id, thread.resource_id, thread.title, json.dumps(dict(thread.metadata)),
               timestamp(thread.created_at), timestamp(thread.updated_at))

        def save(connection: sqlite3.Connection) -> None:
            with transaction(connection):
                connection.execute(_UPSERT_THREAD, row)

        await self._file.run(f"saving thread {thread.id!r}", save)

    async def get_thread(self, thread_id: str) -> Thread | None:
        """The thread, or ``None`` if unknown.

        Raises:
            MemoryCorruptedError: Its stored metadata cannot be decoded.
        """
        def select(connection: sqlite3.Connection) -> tuple[Any, ...] | None:
            row: tuple[Any, ...] | None = connection.execute(
                f"SELECT {_THREAD_COLUMNS} FROM threads WHERE id = ?", (thread_id,)).fetchone()
            return row

        row = await self._file.run(f"loading thread {thread_id!r}", select)
        return None if row is None else _thread(row)

    async def list_threads(self, resource_id: str | None = None) -> list[Thread]:
        """Threads (of one resource when given), most recently updated first."""
        where, params = ("WHERE resource_id = ?", (resource_id,)) if resource_id is not None \
            else ("", ())
        query = f"SELECT {_THREAD_COLUMNS} FROM threads {where} ORDER BY updated_at DESC, id"

        def select(connection: sqlite3.Connection) -> list[tuple[Any, ...]]:
            return connection.execute(query, params).fetchall()

        return [_thread(row) for row in await self._file.run("listing threads", select)]

    # ------------------------------------------------------------------ messages

    async def save_messages(self, messages: Sequence[Message]) -> None:
        """Upsert messages by id and bump (or create) their threads.

        Raises:
            ValueError: A message has no ``thread_id``.
        """
        rows = []
        for msg in messages:
            if msg.thread_id is None:
                raise ValueError(f"message {msg.id!r} has no thread_id; memory stores "
                                 "messages by thread")
            rows.append((msg.id, msg.thread_id, msg.resource_id, int(is_hidden(msg)),
                         dump_message(msg)))
        now = time.time()
        threads = {(m.thread_id, m.resource_id): None for m in messages}

        def save(connection: sqlite3.Connection) -> None:
            with transaction(connection):
                connection.executemany(_UPSERT_MESSAGE, rows)
                connection.executemany(_NEW_THREAD, [(t, r, now, now) for t, r in threads])

        if rows:
            await self._file.run(f"saving {len(rows)} message(s)", save)

    async def get_messages(self, thread_id: str, *, last: int | None = None,
                           include_hidden: bool = True) -> list[Message]:
        """The thread's messages in save order (only the last ``last`` when given).

        Raises:
            MemoryCorruptedError: A stored message cannot be decoded (naming it).
        """
        if last is not None and last <= 0:
            return []
        hidden = "" if include_hidden else "AND hidden = 0"
        query = (f"SELECT id, data FROM messages WHERE thread_id = ? {hidden} "
                 "ORDER BY seq DESC LIMIT ?")
        params = (thread_id, -1 if last is None else last)

        def select(connection: sqlite3.Connection) -> list[tuple[Any, Any]]:
            return connection.execute(query, params).fetchall()

        rows = await self._file.run(f"loading messages of thread {thread_id!r}", select)
        return [load_message(data, thread_id=thread_id, row_id=str(row_id))
                for row_id, data in reversed(rows)]

    async def get_messages_by_id(self, ids: Sequence[str], *, before: int = 0,
                                 after: int = 0) -> list[Message]:
        """The messages with these ids and ``before``/``after`` neighbours, grouped by
        thread (in order of first appearance), each thread in save order."""
        wanted = list(dict.fromkeys(ids))

        def select(connection: sqlite3.Connection) -> list[tuple[Any, Any, Any, Any]]:
            found: dict[int, tuple[Any, Any, Any, Any]] = {}
            for message_id in wanted:
                hit = connection.execute("SELECT seq, thread_id FROM messages WHERE id = ?",
                                         (message_id,)).fetchone()
                if hit is None:
                    continue
                seq, thread = hit
                rows = connection.execute(
                    "SELECT seq, thread_id, id, data FROM messages WHERE thread_id = ? AND "
                    "seq <= ? ORDER BY seq DESC LIMIT ?", (thread, seq, before + 1)).fetchall()
                rows += connection.execute(
                    "SELECT seq, thread_id, id, data FROM messages WHERE thread_id = ? AND "
                    "seq > ? ORDER BY seq LIMIT ?", (thread, seq, after)).fetchall()
                for row in rows:
                    found[row[0]] = row
            return [found[seq] for seq in sorted(found)]

        rows = await self._file.run("loading recalled messages", select)
        order = list(dict.fromkeys(row[1] for row in rows))
        rows.sort(key=lambda row: order.index(row[1]))
        return [load_message(data, thread_id=thread, row_id=str(row_id))
                for _, thread, row_id, data in rows]

    # ------------------------------------------------------------------ working memory

    async def get_working_memory(self, key: str) -> str | None:
        """The working memory stored under ``key``, or ``None``."""
        def select(connection: sqlite3.Connection) -> tuple[Any] | None:
            row: tuple[Any] | None = connection.execute(
                "SELECT value FROM working_memory WHERE key = ?", (key,)).fetchone()
            return row

        row = await self._file.run(f"loading working memory {key!r}", select)
        return None if row is None else str(row[0])

    async def set_working_memory(self, key: str, value: str) -> None:
        """Replace the working memory stored under ``key``."""
        row = (key, value, time.time())

        def save(connection: sqlite3.Connection) -> None:
            with transaction(connection):
                connection.execute(
                    "INSERT INTO working_memory (key, value, updated_at) VALUES (?, ?, ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value, "
                    "updated_at = excluded.updated_at", row)

        await self._file.run(f"saving working memory {key!r}", save)

    async def aclose(self) -> None:
        """Close the connection; later calls raise ``StorageError``."""
        await self._file.aclose()


def _thread(row: tuple[Any, ...]) -> Thread:
    thread_id, resource_id, title, metadata, created, updated = row
    return Thread(id=str(thread_id), resource_id=resource_id, title=title,
                  metadata=load_metadata(metadata, thread_id=str(thread_id)),
                  created_at=to_datetime(float(created)), updated_at=to_datetime(float(updated)))

