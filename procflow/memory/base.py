"""The memory contracts: where threads, messages and working memory live (``MemoryStore``),
how text becomes a vector (``Embedder``), and where vectors are searched (``VectorIndex``).

Backends: ``SQLiteMemoryStore`` (the embedded default), ``PostgresMemoryStore`` and
``InMemoryMemoryStore``; ``InMemoryVectorIndex``; ``HashEmbedder`` (local, deterministic)
and ``OpenAIEmbedder``.

A store that is also a ``VectorStore`` keeps message vectors beside the messages, per
embedding space (the embedder's name and the vectors' size), so a restarted process
recalls what was stored before it and vectors of two embedders are never compared.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from procflow.messages import Message

__all__ = ["Embedder", "MemoryScope", "MemoryStore", "StoredVector", "Thread", "VectorBatch",
           "VectorIndex", "VectorMatch", "VectorStore"]

MemoryScope: TypeAlias = Literal["thread", "resource"]
"""What a recall or a working memory is shared by: one thread, or every thread of a resource."""


@dataclass(frozen=True, slots=True)
class Thread:
    """A conversation: an id, the resource (user or tenant) it belongs to, and metadata.

    Attributes:
        id: The thread id.
        resource_id: Its owner, if any.
        title: A display title.
        metadata: Free-form data.
        created_at: When it was created.
        updated_at: When a message was last saved to it.
    """

    id: str
    resource_id: str | None
    created_at: datetime
    updated_at: datetime
    title: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class MemoryStore(Protocol):
    """Persists threads, their messages (in save order) and working memory."""

    async def save_thread(self, thread: Thread) -> None:
        """Insert or replace a thread."""
        ...

    async def get_thread(self, thread_id: str) -> Thread | None:
        """The thread, or ``None`` if unknown."""
        ...

    async def list_threads(self, resource_id: str | None = None) -> list[Thread]:
        """Threads (of one resource when given), most recently updated first."""
        ...

    async def save_messages(self, messages: Sequence[Message]) -> None:
        """Upsert messages by id (each carries ``thread_id``); a new message goes last in
        its thread, a known one keeps its place. Bumps the threads' ``updated_at``."""
        ...

    async def get_messages(self, thread_id: str, *, last: int | None = None,
                           include_hidden: bool = True) -> list[Message]:
        """The thread's messages in save order (only the last ``last`` when given;
        hidden signals left out, and not counted, when ``include_hidden`` is false).

        Raises:
            MemoryCorruptedError: A stored message cannot be decoded.
        """
        ...

    async def get_messages_by_id(self, ids: Sequence[str], *, before: int = 0,
                                 after: int = 0) -> list[Message]:
        """The messages with these ids plus ``before``/``after`` neighbours in their
        thread, grouped by thread, each thread in save order, without duplicates."""
        ...

    async def get_working_memory(self, key: str) -> str | None:
        """The working memory stored under ``key`` ("thread:<id>" or "resource:<id>")."""
        ...

    async def set_working_memory(self, key: str, value: str) -> None:
        """Replace the working memory stored under ``key``."""
        ...

    async def aclose(self) -> None:
        """Release connections; the store is not used afterwards."""
        ...


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors of a fixed size."""

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order.

        Raises:
            APICallError: A remote embedder failed.
        """
        ...


@dataclass(frozen=True, slots=True)
class VectorMatch:
    """One search hit.

    Attributes:
        id: The vector's id (a message id).
        score: Cosine similarity, -1..1.
        metadata: What was stored with it (``thread_id``, ``resource_id``...).
    """

    id: str
    score: float
    metadata: Mapping[str, Any]


@runtime_checkable
class VectorIndex(Protocol):
    """Stores vectors with metadata and finds the most similar ones."""

    async def upsert(self, items: Sequence[tuple[str, Sequence[float], Mapping[str, Any]]],
                     ) -> None:
        """Insert or replace ``(id, vector, metadata)`` items."""
        ...

    async def query(self, vector: Sequence[float], *, top_k: int,
                    where: Mapping[str, Any] | None = None) -> list[VectorMatch]:
        """The ``top_k`` most similar vectors whose metadata matches every ``where``
        entry, best first."""
        ...


@dataclass(frozen=True, slots=True)
class StoredVector:
    """A message's vector in one embedding space, as a ``VectorStore`` keeps it.

    Attributes:
        message_id: The message.
        thread_id: Its thread.
        resource_id: Its resource, if any.
        vector: Unit-length float32 values, little-endian bytes; ``None`` when the
            message has nothing to embed (so it is not offered for indexing again).
    """

    message_id: str
    thread_id: str
    resource_id: str | None
    vector: bytes | None


@dataclass(frozen=True, slots=True)
class VectorBatch:
    """Consecutive stored vectors of one scope, in write order (parallel lists).

    Attributes:
        ids: Message ids.
        threads: Their thread ids.
        seqs: Their write sequence numbers (increasing).
        vectors: Their float32 bytes (``None``: nothing to embed).
    """

    ids: list[str]
    threads: list[str]
    seqs: list[int]
    vectors: list[bytes | None]


@runtime_checkable
class VectorStore(Protocol):
    """Keeps message vectors beside the messages, and embeddings cached by content hash.

    A scope is ``"thread:<id>"`` or ``"resource:<id>"``; a space names the embedder and
    the vectors' size (``"openai:text-embedding-3-small/1536"``). Each write bumps the
    version of every scope it touches, so a cached copy of a scope knows when to read
    the rows written after it.
    """

    async def save_vectors(self, space: str, vectors: Sequence[StoredVector]) -> None:
        """Upsert vectors by message id and bump their scopes' versions, atomically."""
        ...

    async def vector_version(self, space: str, scope: str) -> int:
        """The scope's version in the space (0 before any write)."""
        ...

    def load_vectors(self, space: str, scope: str, *, after: int = 0,
                     ) -> AsyncIterator[VectorBatch]:
        """The scope's vectors written after sequence number ``after``, in write order."""
        ...

    async def unindexed_messages(self, space: str, scope: str, *,
                                 limit: int) -> list[Message]:
        """Up to ``limit`` messages of the scope that have no vector in the space,
        oldest first."""
        ...

    async def get_cached_embeddings(self, model: str, hashes: Sequence[str],
                                    ) -> dict[str, bytes]:
        """Cached embeddings of ``model`` by content hash (only those found)."""
        ...

    async def cache_embeddings(self, model: str, vectors: Mapping[str, bytes]) -> None:
        """Remember embeddings of ``model`` by content hash."""
        ...
