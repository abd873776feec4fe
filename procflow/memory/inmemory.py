"""``InMemoryMemoryStore``: a ``MemoryStore`` in process memory, for tests and scripts."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import final

from procflow.memory.base import Thread
from procflow.memory.codec import dump_message, is_hidden, load_message, to_datetime
from procflow.messages import Message

__all__ = ["InMemoryMemoryStore"]


@final
class InMemoryMemoryStore:
    """A ``MemoryStore`` kept in dicts; messages are stored as JSON, as on disk, so a
    stored message is a copy and never changes under the caller."""

    def __init__(self) -> None:
        self._threads: dict[str, Thread] = {}
        self._rows: dict[str, tuple[str, str]] = {}  # message id -> (thread id, JSON)
        self._order: dict[str, list[str]] = {}  # thread id -> message ids in save order
        self._working: dict[str, str] = {}

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

    def corrupt(self, message_id: str, data: str) -> None:
        """Overwrite a stored message's JSON (to test how corrupted rows are reported)."""
        thread_id, _ = self._rows[message_id]
        self._rows[message_id] = (thread_id, data)

    async def aclose(self) -> None:
        """Nothing to release."""
