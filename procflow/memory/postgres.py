"""``PostgresMemoryStore``: threads, messages, working memory and message vectors on
PostgreSQL, in the same database (and pool) as ``PostgresStorage``'s runs::

    procflow_threads(id, resource_id, title, metadata, created_at, updated_at)
    procflow_messages(seq, id, thread_id, resource_id, hidden, data)  -- seq: save order
    procflow_working_memory(key, value, updated_at)
    procflow_embeddings(space, message_id, thread_id, resource_id, seq, vector)
    procflow_embedding_scopes(space, scope, version)
    procflow_embedding_cache(model, hash, vector)

A vector write first locks its scopes' version rows (in a fixed order), then takes its
sequence numbers: writes to one scope are numbered in commit order, so a reader that
saw version ``v`` and read every row up to ``seq`` misses nothing when it later reads
the rows after ``seq``.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Final, final

from procflow._backends import AsyncResource
from procflow._backends.postgres import PostgresPool
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
from procflow.storage.postgres import PostgresStorage

__all__ = ["PostgresMemoryStore"]

_BATCH: Final = 10_000
_THREAD_COLUMNS: Final = "id, resource_id, title, metadata, created_at, updated_at"
_UPSERT_THREAD: Final = """
    INSERT INTO procflow_threads (id, resource_id, title, metadata, created_at, updated_at)
    VALUES (%s, %s, %s, %s, %s, %s)
    ON CONFLICT (id) DO UPDATE SET resource_id = excluded.resource_id,
        title = excluded.title, metadata = excluded.metadata,
        created_at = excluded.created_at, updated_at = excluded.updated_at
"""
_UPSERT_MESSAGE: Final = """
    INSERT INTO procflow_messages (id, thread_id, resource_id, hidden, data)
    VALUES (%s, %s, %s, %s, %s)
    ON CONFLICT (id) DO UPDATE SET thread_id = excluded.thread_id,
        resource_id = excluded.resource_id, hidden = excluded.hidden, data = excluded.data
"""
_NEW_THREAD: Final = """
    INSERT INTO procflow_threads (id, resource_id, title, metadata, created_at, updated_at)
    VALUES (%s, %s, NULL, '{}', %s, %s)
    ON CONFLICT (id) DO UPDATE SET updated_at = excluded.updated_at,
        resource_id = COALESCE(procflow_threads.resource_id, excluded.resource_id)
"""
_BUMP_SCOPE: Final = """
    INSERT INTO procflow_embedding_scopes (space, scope, version) VALUES (%s, %s, 1)
    ON CONFLICT (space, scope) DO UPDATE SET version = procflow_embedding_scopes.version + 1
"""
# A replaced vector takes a new seq, so readers of the scope see it as written after.
_UPSERT_VECTOR: Final = """
    INSERT INTO procflow_embeddings (space, message_id, thread_id, resource_id, vector)
    VALUES (%s, %s, %s, %s, %s)
    ON CONFLICT (space, message_id) DO UPDATE SET thread_id = excluded.thread_id,
        resource_id = excluded.resource_id, vector = excluded.vector,
        seq = nextval('procflow_embedding_seq')
"""


@final
class PostgresMemoryStore(AsyncResource):
    """A ``MemoryStore`` and ``VectorStore`` on PostgreSQL.

    Args:
        source: A DSN, or a ``PostgresStorage`` whose pool (database and schema) to
            share; a shared pool is left open by ``aclose()``.
        schema: The schema, when ``source`` is a DSN.

    Example:
        ```python
        storage = PostgresStorage("postgresql://127.0.0.1/app")
        memory = Memory(storage=storage, semantic_recall=True)   # runs and memory, one db
        ```
    """

    def __init__(self, source: str | PostgresStorage, *, schema: str = "public") -> None:
        if isinstance(source, PostgresStorage):
            self._pool, self._owns_pool = source.pool, False
        elif isinstance(source, str):
            self._pool, self._owns_pool = PostgresPool(source, schema=schema), True
        else:
            raise TypeError(f"PostgresMemoryStore takes a DSN or a PostgresStorage, got "
                            f"{type(source).__name__}")

    def __repr__(self) -> str:
        return f"PostgresMemoryStore({self._pool.display!r}, schema={self._pool.schema!r})"


    # ------------------------------------------------------------------ threads

    async def save_thread(self, thread: Thread) -> None:
        row = (thread.id, thread.resource_id, thread.title, json.dumps(dict(thread.metadata)),
               timestamp(thread.created_at), timestamp(thread.updated_at))
        async with self._pool.connection(f"saving thread {thread.id!r}") as conn:
            await conn.execute(_UPSERT_THREAD, row)

    async def get_thread(self, thread_id: str) -> Thread | None:
        async with self._pool.connection(f"loading thread {thread_id!r}") as conn:
            cursor = await conn.execute(
                f"SELECT {_THREAD_COLUMNS} FROM procflow_threads WHERE id = %s", (thread_id,))
            row = await cursor.fetchone()
        return None if row is None else thread_from_row(row)

    async def list_threads(self, resource_id: str | None = None) -> list[Thread]:
        where, params = ("WHERE resource_id = %s", (resource_id,)) \
            if resource_id is not None else ("", ())
        async with self._pool.connection("listing threads") as conn:
            cursor = await conn.execute(
                f"SELECT {_THREAD_COLUMNS} FROM procflow_threads {where} "
                "ORDER BY updated_at DESC, id", params)
            rows = await cursor.fetchall()
        return [thread_from_row(row) for row in rows]

    # ------------------------------------------------------------------ messages

    async def save_messages(self, messages: Sequence[Message]) -> None:
        """Upsert messages by id and bump (or create) their threads, in one transaction.

        Raises:
            ValueError: A message has no ``thread_id``.
        """
        rows = message_rows(messages)
        if not rows:
            return
        now = time.time()
        # Threads in a fixed order, so that concurrent saves lock them in the same order.
        threads = sorted(dict.fromkeys((m.thread_id, m.resource_id) for m in messages),
                         key=lambda pair: (pair[0] or "", pair[1] or ""))
        thread_rows = [(t, r, now, now) for t, r in threads]
        async with self._pool.connection(f"saving {len(rows)} message(s)") as conn, \
                conn.transaction(), conn.cursor() as cursor:
            await cursor.executemany(_UPSERT_MESSAGE, rows)
            await cursor.executemany(_NEW_THREAD, thread_rows)

    async def get_messages(self, thread_id: str, *, last: int | None = None,
                           include_hidden: bool = True) -> list[Message]:
        if last is not None and last <= 0:
            return []
        hidden = "" if include_hidden else "AND NOT hidden"
        async with self._pool.connection(f"loading messages of thread {thread_id!r}") as conn:
            cursor = await conn.execute(
                f"SELECT id, data FROM procflow_messages WHERE thread_id = %s {hidden} "
                "ORDER BY seq DESC LIMIT %s", (thread_id, last))
            rows = await cursor.fetchall()
        return [load_message(data, thread_id=thread_id, row_id=str(row_id))
                for row_id, data in reversed(rows)]

    async def get_messages_by_id(self, ids: Sequence[str], *, before: int = 0,
                                 after: int = 0) -> list[Message]:
        found: dict[int, tuple[Any, ...]] = {}
        async with self._pool.connection("loading recalled messages") as conn:
            for message_id in dict.fromkeys(ids):
                cursor = await conn.execute(
                    "SELECT seq, thread_id FROM procflow_messages WHERE id = %s", (message_id,))
                hit = await cursor.fetchone()
                if hit is None:
                    continue
                seq, thread = hit
                cursor = await conn.execute(
                    "(SELECT seq, thread_id, id, data FROM procflow_messages WHERE "
                    "thread_id = %s AND seq <= %s ORDER BY seq DESC LIMIT %s) UNION ALL "
                    "(SELECT seq, thread_id, id, data FROM procflow_messages WHERE "
                    "thread_id = %s AND seq > %s ORDER BY seq LIMIT %s)",
                    (thread, seq, before + 1, thread, seq, after))
                for row in await cursor.fetchall():
                    found[row[0]] = row
        rows = [found[seq] for seq in sorted(found)]
        return grouped_messages(rows)

    # ------------------------------------------------------------------ working memory

    async def get_working_memory(self, key: str) -> str | None:
        async with self._pool.connection(f"loading working memory {key!r}") as conn:
            cursor = await conn.execute(
                "SELECT value FROM procflow_working_memory WHERE key = %s", (key,))
            row = await cursor.fetchone()
        return None if row is None else str(row[0])

    async def set_working_memory(self, key: str, value: str) -> None:
        async with self._pool.connection(f"saving working memory {key!r}") as conn:
            await conn.execute(
                "INSERT INTO procflow_working_memory (key, value, updated_at) VALUES "
                "(%s, %s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value, "
                "updated_at = excluded.updated_at", (key, value, time.time()))

    # ------------------------------------------------------------------ vectors

    async def save_vectors(self, space: str, vectors: Sequence[StoredVector]) -> None:
        """Lock and bump the touched scopes' versions, then upsert the vectors, in one
        transaction."""
        if not vectors:
            return
        scopes = sorted({(space, scope) for v in vectors for scope in vector_scopes(v)})
        rows = [(space, v.message_id, v.thread_id, v.resource_id, v.vector) for v in vectors]
        async with self._pool.connection(f"saving {len(rows)} vector(s)") as conn, \
                conn.transaction(), conn.cursor() as cursor:
            await cursor.executemany(_BUMP_SCOPE, scopes)
            await cursor.executemany(_UPSERT_VECTOR, rows)

    async def vector_version(self, space: str, scope: str) -> int:
        async with self._pool.connection(f"reading the vector version of {scope!r}") as conn:
            cursor = await conn.execute(
                "SELECT version FROM procflow_embedding_scopes WHERE space = %s AND "
                "scope = %s", (space, scope))
            row = await cursor.fetchone()
        return 0 if row is None else int(row[0])

    async def load_vectors(self, space: str, scope: str, *, after: int = 0,
                           ) -> AsyncIterator[VectorBatch]:
        column, key = scope_column(scope)
        query = (f"SELECT seq, message_id, thread_id, vector FROM procflow_embeddings "
                 f"WHERE space = %s AND {column} = %s AND seq > %s ORDER BY seq "
                 f"LIMIT {_BATCH}")

        async def fetch(last: int) -> list[tuple[Any, ...]]:
            async with self._pool.connection(f"loading vectors of {scope!r}") as conn:
                cursor = await conn.execute(query, (space, key, last))
                return await cursor.fetchall()

        async for batch in vector_batches(fetch, after=after, size=_BATCH):
            yield batch

    async def unindexed_messages(self, space: str, scope: str, *,
                                 limit: int) -> list[Message]:
        column, key = scope_column(scope)
        query = (f"SELECT m.id, m.thread_id, m.data FROM procflow_messages m WHERE "
                 f"m.{column} = %s AND NOT EXISTS (SELECT 1 FROM procflow_embeddings e "
                 "WHERE e.space = %s AND e.message_id = m.id) ORDER BY m.seq LIMIT %s")
        async with self._pool.connection(f"finding unindexed messages of {scope!r}") as conn:
            cursor = await conn.execute(query, (key, space, max(limit, 0)))
            rows = await cursor.fetchall()
        return [load_message(data, thread_id=thread, row_id=str(row_id))
                for row_id, thread, data in rows]

    async def get_cached_embeddings(self, model: str, hashes: Sequence[str],
                                    ) -> dict[str, bytes]:
        wanted = list(dict.fromkeys(hashes))
        if not wanted:
            return {}
        async with self._pool.connection("reading cached embeddings") as conn:
            cursor = await conn.execute(
                "SELECT hash, vector FROM procflow_embedding_cache WHERE model = %s AND "
                "hash = ANY(%s)", (model, wanted))
            rows = await cursor.fetchall()
        return {str(h): bytes(v) for h, v in rows}

    async def cache_embeddings(self, model: str, vectors: Mapping[str, bytes]) -> None:
        rows = [(model, h, v) for h, v in vectors.items()]
        if not rows:
            return
        async with self._pool.connection(f"caching {len(rows)} embedding(s)") as conn, \
                conn.cursor() as cursor:
            await cursor.executemany(
                "INSERT INTO procflow_embedding_cache (model, hash, vector) VALUES "
                "(%s, %s, %s) ON CONFLICT (model, hash) DO UPDATE SET vector = "
                "excluded.vector", rows)

    async def aclose(self) -> None:
        """Close the pool (unless it is a ``PostgresStorage``'s)."""
        if self._owns_pool:
            await self._pool.aclose()
