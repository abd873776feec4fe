"""``SQLiteMemoryStore``: threads, messages and working memory in one SQLite file.

::

    threads(id, resource_id, title, metadata, created_at, updated_at)
    messages(seq, id, thread_id, resource_id, hidden, data)   -- seq: the save order
    working_memory(key, value, updated_at)
    embeddings(seq, space, message_id, thread_id, resource_id, vector)  -- float32 blobs
    embedding_scopes(space, scope, version)       -- bumped by every write to the scope
    embedding_cache(model, hash, vector)          -- embeddings by content hash

WAL mode with a busy timeout, one ``BEGIN IMMEDIATE`` transaction per write; blocking
calls run in a worker thread on one connection guarded by a lock (as ``SQLiteStorage``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, final

from procflow._backends import AsyncResource
from procflow._backends.sqlite import SQLiteFile, transaction
from procflow.memory.base import StoredVector, Thread, VectorBatch
from procflow.memory.codec import (
    grouped_messages,
    load_message,
    message_rows,
    scope_column,
    thread_from_row,
    timestamp,
    vector_batches,
    vector_scopes,
)
from procflow.messages import Message
from procflow.storage.locate import MEMORY_DB

__all__ = ["DEFAULT_MEMORY_PATH", "SQLiteMemoryStore"]

DEFAULT_MEMORY_PATH: Final = str(MEMORY_DB)
"""Where ``Memory()`` keeps its SQLite file when given no store (relative to the cwd)."""

_BATCH: Final = 10_000


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
    # Vectors (added after the first release: every statement here only adds what is
    # missing, so an older file is upgraded in place when it is opened).
    "CREATE INDEX IF NOT EXISTS messages_by_resource ON messages (resource_id, seq)",
    """CREATE TABLE IF NOT EXISTS embeddings (
        seq         INTEGER PRIMARY KEY AUTOINCREMENT,
        space       TEXT NOT NULL,
        message_id  TEXT NOT NULL,
        thread_id   TEXT NOT NULL,
        resource_id TEXT,
        vector      BLOB,
        UNIQUE (space, message_id)
    )""",
    "CREATE INDEX IF NOT EXISTS embeddings_by_thread ON embeddings (space, thread_id, seq)",
    """CREATE INDEX IF NOT EXISTS embeddings_by_resource
        ON embeddings (space, resource_id, seq)""",
    """CREATE TABLE IF NOT EXISTS embedding_scopes (
        space   TEXT NOT NULL,
        scope   TEXT NOT NULL,
        version INTEGER NOT NULL,
        PRIMARY KEY (space, scope)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS embedding_cache (
        model  TEXT NOT NULL,
        hash   TEXT NOT NULL,
        vector BLOB NOT NULL,
        PRIMARY KEY (model, hash)
    ) WITHOUT ROWID""",
)
# A replaced vector gets a new seq, so readers of the scope see it as written after.
_REPLACE_VECTOR: Final = """
    INSERT OR REPLACE INTO embeddings (space, message_id, thread_id, resource_id, vector)
    VALUES (?, ?, ?, ?, ?)
"""
_BUMP_SCOPE: Final = """
    INSERT INTO embedding_scopes (space, scope, version) VALUES (?, ?, 1)
    ON CONFLICT (space, scope) DO UPDATE SET version = version + 1
"""


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
        return None if row is None else thread_from_row(row)

    async def list_threads(self, resource_id: str | None = None) -> list[Thread]:
        """Threads (of one resource when given), most recently updated first."""
        where, params = ("WHERE resource_id = ?", (resource_id,)) if resource_id is not None \
            else ("", ())
        query = f"SELECT {_THREAD_COLUMNS} FROM threads {where} ORDER BY updated_at DESC, id"

        def select(connection: sqlite3.Connection) -> list[tuple[Any, ...]]:
            return connection.execute(query, params).fetchall()

        return [thread_from_row(row) for row in await self._file.run("listing threads", select)]

    # ------------------------------------------------------------------ messages

    async def save_messages(self, messages: Sequence[Message]) -> None:
        """Upsert messages by id and bump (or create) their threads.

        Raises:
            ValueError: A message has no ``thread_id``.
        """
        rows = message_rows(messages)  # sqlite3 stores the bool as 0/1
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
        return grouped_messages(rows)

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

    # ------------------------------------------------------------------ vectors

    async def save_vectors(self, space: str, vectors: Sequence[StoredVector]) -> None:
        """Upsert vectors by message id and bump their scopes' versions, in one
        transaction."""
        rows = [(space, v.message_id, v.thread_id, v.resource_id, v.vector) for v in vectors]
        scopes = {(space, scope) for v in vectors for scope in vector_scopes(v)}

        def save(connection: sqlite3.Connection) -> None:
            with transaction(connection):
                connection.executemany(_REPLACE_VECTOR, rows)
                connection.executemany(_BUMP_SCOPE, sorted(scopes))

        if rows:
            await self._file.run(f"saving {len(rows)} vector(s)", save)

    async def vector_version(self, space: str, scope: str) -> int:
        """The scope's version in the space (0 before any write)."""
        def select(connection: sqlite3.Connection) -> int:
            row = connection.execute("SELECT version FROM embedding_scopes WHERE space = ? "
                                     "AND scope = ?", (space, scope)).fetchone()
            return 0 if row is None else int(row[0])

        return await self._file.run(f"reading the vector version of {scope!r}", select)

    async def load_vectors(self, space: str, scope: str, *, after: int = 0,
                           ) -> AsyncIterator[VectorBatch]:
        """The scope's vectors written after ``after``, in write order, in batches."""
        column, key = scope_column(scope)
        query = (f"SELECT seq, message_id, thread_id, vector FROM embeddings WHERE space = ? "
                 f"AND {column} = ? AND seq > ? ORDER BY seq LIMIT {_BATCH}")

        async def fetch(last: int) -> list[tuple[Any, ...]]:
            def select(connection: sqlite3.Connection) -> list[tuple[Any, ...]]:
                return connection.execute(query, (space, key, last)).fetchall()

            return await self._file.run(f"loading vectors of {scope!r}", select)

        async for batch in vector_batches(fetch, after=after, size=_BATCH):
            yield batch

    async def unindexed_messages(self, space: str, scope: str, *,
                                 limit: int) -> list[Message]:
        """Messages of the scope without a vector in the space, oldest first."""
        column, key = scope_column(scope)
        query = (f"SELECT m.id, m.thread_id, m.data FROM messages m WHERE m.{column} = ? "
                 "AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.space = ? AND "
                 "e.message_id = m.id) ORDER BY m.seq LIMIT ?")

        def select(connection: sqlite3.Connection) -> list[tuple[Any, Any, Any]]:
            return connection.execute(query, (key, space, max(limit, 0))).fetchall()

        rows = await self._file.run(f"finding unindexed messages of {scope!r}", select)
        return [load_message(data, thread_id=thread, row_id=str(row_id))
                for row_id, thread, data in rows]

    async def get_cached_embeddings(self, model: str, hashes: Sequence[str],
                                    ) -> dict[str, bytes]:
        """Cached embeddings of ``model`` by content hash (only those found)."""
        wanted = list(dict.fromkeys(hashes))

        def select(connection: sqlite3.Connection) -> dict[str, bytes]:
            found: dict[str, bytes] = {}
            for start in range(0, len(wanted), 500):
                chunk = wanted[start:start + 500]
                marks = ", ".join("?" * len(chunk))
                found.update(connection.execute(
                    f"SELECT hash, vector FROM embedding_cache WHERE model = ? AND hash IN "
                    f"({marks})", (model, *chunk)).fetchall())
            return found

        return await self._file.run("reading cached embeddings", select) if wanted else {}

    async def cache_embeddings(self, model: str, vectors: Mapping[str, bytes]) -> None:
        """Remember embeddings of ``model`` by content hash."""
        rows = [(model, h, v) for h, v in vectors.items()]

        def save(connection: sqlite3.Connection) -> None:
            with transaction(connection):
                connection.executemany("INSERT OR REPLACE INTO embedding_cache (model, hash, "
                                       "vector) VALUES (?, ?, ?)", rows)

        if rows:
            await self._file.run(f"caching {len(rows)} embedding(s)", save)

    async def aclose(self) -> None:
        """Close the connection; later calls raise ``StorageError``."""
        await self._file.aclose()
