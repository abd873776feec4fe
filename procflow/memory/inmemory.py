"""``InMemoryMemoryStore``: a ``MemoryStore`` (and ``VectorStore``) in process memory, for
tests and scripts."""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from typing import Final, final

from procflow.memory.base import StoredVector, Thread, VectorBatch
from procflow.memory.codec import (
    dump_message,
    is_hidden,
    load_message,
    scope_column,
    to_datetime,
    vector_scopes,
)
from procflow.messages import Message

__all__ = ["InMemoryMemoryStore"]

_BATCH: Final = 10_000


@final
class InMemoryMemoryStore:
    """A ``MemoryStore`` and ``VectorStore`` kept in dicts; messages are stored as JSON,
    as on disk, so a stored message is a copy and never changes under the caller."""

    def __init__(self) -> None:
        self._threads: dict[str, Thread] = {}
        self._rows: dict[str, tuple[str, str]] = {}  # message id -> (thread id, JSON)
        self._resources: dict[str, str | None] = {}  # message id -> resource id
        self._order: dict[str, list[str]] = {}  # thread id -> message ids in save order
        self._working: dict[str, str] = {}
        # (space, scope) -> message id -> (seq, thread id, vector)
        self._vectors: dict[tuple[str, str], dict[str, tuple[int, str, bytes | None]]] = {}
        self._versions: dict[tuple[str, str], int] = {}
        self._scopes: dict[tuple[str, str], list[str]] = {}  # (space, message id) -> scopes
        self._seq = itertools.count(1)
        self._embedding_cache: dict[tuple[str, str], bytes] = {}

    def __repr__(self) -> str:
        return f"InMemoryMemoryStore(threads={len(self._threads)}, messages={len(self._rows)})"

    async def save_thread(self, thread: Thread) -> None:
        """Insert or replace a thread."""
        self._threads[thread.id] = thread

    async def get_thread(self, thread_id: str) -> Thread | None:
        """The thread, or ``None`` if unknown."""
        return self._threads.get(thread_id)

    async def list_threads(self, resource_id: str | None = None) -> list[Thread]:
        """Threads (of one resource when given), most recently updated first."""
        found = [t for t in self._threads.values()
                 if resource_id is None or t.resource_id == resource_id]
        return sorted(found, key=lambda t: (-t.updated_at.timestamp(), t.id))

    async def save_messages(self, messages: Sequence[Message]) -> None:
        """Upsert messages by id and bump (or create) their threads.

        Raises:
            ValueError: A message has no ``thread_id``.
        """
        pairs: list[tuple[str, Message]] = []
        for msg in messages:
            if msg.thread_id is None:
                raise ValueError(f"message {msg.id!r} has no thread_id; memory stores "
                                 "messages by thread")
            pairs.append((msg.thread_id, msg))
        now = to_datetime(time.time())
        for thread_id, msg in pairs:
            previous = self._rows.get(msg.id)
            if previous is not None and previous[0] != thread_id:
                self._order[previous[0]].remove(msg.id)
                previous = None
            if previous is None:
                self._order.setdefault(thread_id, []).append(msg.id)
            self._rows[msg.id] = (thread_id, dump_message(msg))
            self._resources[msg.id] = msg.resource_id
            thread = self._threads.get(thread_id)
            self._threads[thread_id] = (
                Thread(id=thread_id, resource_id=msg.resource_id, created_at=now,
                       updated_at=now) if thread is None
                else replace(thread, updated_at=now,
                             resource_id=thread.resource_id or msg.resource_id))

    async def get_messages(self, thread_id: str, *, last: int | None = None,
                           include_hidden: bool = True) -> list[Message]:
        """The thread's messages in save order (only the last ``last`` when given)."""
        if last is not None and last <= 0:
            return []
        loaded = [load_message(self._rows[i][1], thread_id=thread_id, row_id=i)
                  for i in self._order.get(thread_id, [])]
        if not include_hidden:
            loaded = [m for m in loaded if not is_hidden(m)]
        return loaded if last is None else loaded[-last:]

    async def get_messages_by_id(self, ids: Sequence[str], *, before: int = 0,
                                 after: int = 0) -> list[Message]:
        """The messages with these ids and ``before``/``after`` neighbours, grouped by
        thread, each thread in save order."""
        picked: dict[str, set[int]] = {}
        for message_id in dict.fromkeys(ids):
            row = self._rows.get(message_id)
            if row is None:
                continue
            order = self._order[row[0]]
            at = order.index(message_id)
            picked.setdefault(row[0], set()).update(
                range(max(0, at - before), min(len(order), at + after + 1)))
        out: list[Message] = []
        for thread_id, positions in picked.items():
            order = self._order[thread_id]
            out += [load_message(self._rows[order[p]][1], thread_id=thread_id,
                                 row_id=order[p]) for p in sorted(positions)]
        return out

    async def get_working_memory(self, key: str) -> str | None:
        """The working memory stored under ``key``, or ``None``."""
        return self._working.get(key)

    async def set_working_memory(self, key: str, value: str) -> None:
        """Replace the working memory stored under ``key``."""
        self._working[key] = value

    # -- vectors ----------------------------------------------------------------------

    async def save_vectors(self, space: str, vectors: Sequence[StoredVector]) -> None:
        """Upsert vectors by message id and bump their scopes' versions."""
        for item in vectors:
            scopes = vector_scopes(item)
            for old in self._scopes.pop((space, item.message_id), ()):  # a moved message
                self._vectors[(space, old)].pop(item.message_id, None)
            self._scopes[(space, item.message_id)] = scopes
            seq = next(self._seq)
            for scope in scopes:
                key = (space, scope)
                self._vectors.setdefault(key, {})[item.message_id] = (
                    seq, item.thread_id, item.vector)
                self._versions[key] = self._versions.get(key, 0) + 1

    async def vector_version(self, space: str, scope: str) -> int:
        """The scope's version in the space (0 before any write)."""
        return self._versions.get((space, scope), 0)

    async def load_vectors(self, space: str, scope: str, *, after: int = 0,
                           ) -> AsyncIterator[VectorBatch]:
        """The scope's vectors written after ``after``, in write order, in batches."""
        table = self._vectors.get((space, scope), {})
        # A table's order is its write order: a rewritten vector is popped and re-added.
        batch = VectorBatch(ids=[], threads=[], seqs=[], vectors=[])
        for message_id, (seq, thread, vector) in table.items():
            if seq <= after:
                continue
            batch.ids.append(message_id)
            batch.threads.append(thread)
            batch.seqs.append(seq)
            batch.vectors.append(vector)
            if len(batch.ids) == _BATCH:
                yield batch
                batch = VectorBatch(ids=[], threads=[], seqs=[], vectors=[])
        if batch.ids:
            yield batch

    async def unindexed_messages(self, space: str, scope: str, *,
                                 limit: int) -> list[Message]:
        """Messages of the scope without a vector in the space, oldest first."""
        column, key = scope_column(scope)
        indexed = self._vectors.get((space, scope), {})
        if column == "thread_id":
            ids = self._order.get(key, [])
        else:
            ids = [i for order in self._order.values() for i in order
                   if self._resources.get(i) == key]
        missing = [i for i in ids if i not in indexed][:max(limit, 0)]
        return [load_message(self._rows[i][1], thread_id=self._rows[i][0], row_id=i)
                for i in missing]

    async def get_cached_embeddings(self, model: str, hashes: Sequence[str],
                                    ) -> dict[str, bytes]:
        """Cached embeddings of ``model`` by content hash (only those found)."""
        found = ((h, self._embedding_cache.get((model, h))) for h in hashes)
        return {h: v for h, v in found if v is not None}

    async def cache_embeddings(self, model: str, vectors: Mapping[str, bytes]) -> None:
        """Remember embeddings of ``model`` by content hash."""
        for content_hash, vector in vectors.items():
            self._embedding_cache[(model, content_hash)] = vector

    def corrupt(self, message_id: str, data: str) -> None:
        """Overwrite a stored message's JSON (to test how corrupted rows are reported)."""
        thread_id, _ = self._rows[message_id]
        self._rows[message_id] = (thread_id, data)

    async def aclose(self) -> None:
        """Nothing to release."""
