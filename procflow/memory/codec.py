"""Stored memory rows to and from JSON; a row that cannot be read is a clear error."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, NamedTuple

from pydantic import ValidationError

from procflow.errors import MemoryCorruptedError
from procflow.memory.base import StoredVector, Thread, VectorBatch
from procflow.messages import Message

__all__ = [
    "MessageRow",
    "dump_message",
    "grouped_messages",
    "is_hidden",
    "load_message",
    "load_metadata",
    "message_rows",
    "scope_column",
    "thread_from_row",
    "timestamp",
    "to_datetime",
    "vector_scopes",
]

_SCOPE_COLUMNS: Final = {"thread": "thread_id", "resource": "resource_id"}


def dump_message(message: Message) -> str:
    """A message as the JSON stored for it."""
    return message.model_dump_json()


class MessageRow(NamedTuple):
    """One message as a store writes it."""

    id: str
    thread_id: str
    resource_id: str | None
    hidden: bool
    json: str


def message_rows(messages: Sequence[Message]) -> list[MessageRow]:
    """The rows to store for ``messages``, in order.

    Raises:
        ValueError: A message has no ``thread_id`` (naming it).
    """
    rows = []
    for msg in messages:
        if msg.thread_id is None:
            raise ValueError(f"message {msg.id!r} has no thread_id; memory stores "
                             "messages by thread")
        rows.append(MessageRow(msg.id, msg.thread_id, msg.resource_id, is_hidden(msg),
                               dump_message(msg)))
    return rows


def load_message(data: object, *, thread_id: str | None, row_id: str) -> Message:
    """The message stored as ``data``.

    Raises:
        MemoryCorruptedError: Naming the thread and the message id; the row is untouched.
    """
    try:
        if not isinstance(data, str | bytes):
            raise TypeError(f"expected JSON text, found {type(data).__name__}")
        return Message.model_validate_json(data)
    except (ValidationError, ValueError, TypeError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise MemoryCorruptedError(
            f"stored message {row_id!r} of thread {thread_id!r} is corrupted and cannot be "
            f"loaded ({detail}). It was left as it is; delete or repair that row (other "
            "messages are intact).", thread_id=thread_id, row_id=row_id) from None


def load_metadata(data: object, *, thread_id: str) -> dict[str, Any]:
    """A thread's stored metadata.

    Raises:
        MemoryCorruptedError: The metadata is not a JSON object.
    """
    try:
        value = json.loads(data) if isinstance(data, str | bytes) else None
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise MemoryCorruptedError(f"stored metadata of thread {thread_id!r} is corrupted "
                                   "(expected a JSON object); it was left as it is.",
                                   thread_id=thread_id, row_id=thread_id)
    return value


def is_hidden(message: Message) -> bool:
    """Whether a message is a hidden signal (kept in memory, left out of default recall)."""
    signal = message.content.metadata.get("signal")
    return isinstance(signal, Mapping) and bool(signal.get("hidden"))


def timestamp(moment: datetime) -> float:
    """Seconds since the epoch."""
    return moment.timestamp()


def to_datetime(seconds: float) -> datetime:
    """An aware UTC datetime from seconds since the epoch."""
    return datetime.fromtimestamp(seconds, UTC)


def vector_scopes(vector: StoredVector) -> list[str]:
    """The scopes a stored vector belongs to: its thread's, and its resource's if any."""
    scopes = [f"thread:{vector.thread_id}"]
    if vector.resource_id is not None:
        scopes.append(f"resource:{vector.resource_id}")
    return scopes


def scope_column(scope: str) -> tuple[str, str]:
    """The column and value a scope (``"thread:<id>"``, ``"resource:<id>"``) selects on.

    Raises:
        ValueError: Another kind of scope.
    """
    kind, _, key = scope.partition(":")
    column = _SCOPE_COLUMNS.get(kind)
    if column is None:
        raise ValueError(f"a vector scope is 'thread:<id>' or 'resource:<id>', got {scope!r}")
    return column, key


def thread_from_row(row: Sequence[Any]) -> Thread:
    """A thread from its SQL row ``(id, resource_id, title, metadata, created, updated)``.

    Raises:
        MemoryCorruptedError: The stored metadata is not a JSON object.
    """
    thread_id, resource_id, title, metadata, created, updated = row
    return Thread(id=str(thread_id), resource_id=resource_id, title=title,
                  metadata=load_metadata(metadata, thread_id=str(thread_id)),
                  created_at=to_datetime(float(created)), updated_at=to_datetime(float(updated)))


def grouped_messages(rows: Sequence[Sequence[Any]]) -> list[Message]:
    """Messages from ``(seq, thread_id, id, data)`` rows in save order, grouped by thread
    in order of first appearance.

    Raises:
        MemoryCorruptedError: A stored message cannot be decoded (naming it).
    """
    first: dict[Any, int] = {}
    for row in rows:
        first.setdefault(row[1], len(first))
    ordered = sorted(rows, key=lambda row: first[row[1]])  # stable: save order kept
    return [load_message(data, thread_id=thread, row_id=str(row_id))
            for _, thread, row_id, data in ordered]


async def vector_batches(fetch: Callable[[int], Awaitable[Sequence[Sequence[Any]]]], *,
                         after: int, size: int) -> AsyncIterator[VectorBatch]:
    """Page through stored vectors: ``fetch(last_seq)`` returns up to ``size``
    ``(seq, message_id, thread_id, vector bytes or None)`` rows after ``last_seq``."""
    last = after
    while rows := await fetch(last):
        yield VectorBatch(ids=[r[1] for r in rows], threads=[r[2] for r in rows],
                          seqs=[r[0] for r in rows],
                          vectors=[None if r[3] is None else bytes(r[3]) for r in rows])
        if len(rows) < size:
            return
        last = rows[-1][0]
