"""``Memory``: conversation history, semantic recall and working memory for an agent."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from procflow._backends import AsyncResource
from procflow.memory.base import Embedder, MemoryStore, Thread, VectorIndex
from procflow.memory.embedders import HashEmbedder
from procflow.memory.options import SemanticRecallOptions, WorkingMemoryOptions
from procflow.memory.processors import MessageHistory, SemanticRecall, WorkingMemory
from procflow.memory.stores import memory_store
from procflow.memory.working import WorkingMemoryStore
from procflow.messages import Message, MessageInput, new_id
from procflow.processors.base import Processor
from procflow.storage.base import Storage

__all__ = ["Memory"]


class Memory(AsyncResource):
    """What an agent remembers: give it to ``Agent(memory=...)`` and call the agent with
    ``memory={"thread": ..., "resource": ...}``.

    Each enabled option adds its processor to the agent (unless the agent's own list
    already has one with that id): input = [WorkingMemory, MessageHistory,
    SemanticRecall] + yours; output = yours + [SemanticRecall, MessageHistory].

    A thread belongs to the resource it was created with (or to none). A call naming
    a stored thread with any other resource - or with none, for an owned thread - is
    refused with a ``ProcessorError`` by every memory processor before anything is
    read or saved; it is not silently treated as a new thread.

    Args:
        storage: The project's own ``Storage`` - ``SQLiteStorage`` (memory in the same
            file as the runs and traces), ``PostgresStorage`` (the same database),
            ``RedisStorage`` (the same server and key prefix) or ``InMemoryStorage``
            (memory kept with that object: every ``Memory`` on it shares it) - or a
            ``MemoryStore``, or a path for a SQLite file. Default: found as runs are
            (``procflow.storage.locate``): ``set_default_storage``, ``PROCFLOW_DB``, the
            project's ``.procflow/procflow.db`` walking up from the working directory
            (or a ``.procflow/memory.db`` beside it), else ``.procflow/memory.db`` in
            the working directory.
        last_messages: How many recent messages of the thread the model sees (0 or
            ``False``: none; messages are still saved).
        semantic_recall: ``True`` or ``SemanticRecallOptions`` to recall similar old
            messages.
        working_memory: ``True`` or ``WorkingMemoryOptions`` to keep a working memory
            the model updates with the ``update_working_memory`` tool.
        vector: A vector index for semantic recall instead of the default: vectors kept
            in ``storage`` beside their messages (they survive restarts), searched with
            numpy (``procflow[vector]``).
        embedder: The embedder for semantic recall (default ``HashEmbedder``, local).
            Vectors are stored per embedder name and size; after a change of embedder,
            each scope's messages are embedded again at its first recall (or with
            ``reindex()``), never compared with the old vectors.

    Example:
        ```python
        storage = SQLiteStorage("app.db")      # runs, traces and memory in one file
        memory = Memory(storage=storage, last_messages=20, semantic_recall=True)
        agent = Agent(id="support", model=model, memory=memory)
        await agent.generate("hi", memory={"thread": "t1", "resource": "user-1"})
        ```
    """

    def __init__(self, *,
                 storage: Storage | MemoryStore | str | os.PathLike[str] | None = None,
                 last_messages: int | Literal[False] = 10,
                 semantic_recall: bool | SemanticRecallOptions = False,
                 working_memory: bool | WorkingMemoryOptions = False,
                 vector: VectorIndex | None = None, embedder: Embedder | None = None) -> None:
        self.storage = memory_store(storage)
        if last_messages is False:
            last_messages = 0
        self.last_messages = last_messages
        self.semantic_recall = _option(semantic_recall, SemanticRecallOptions,
                                       "semantic_recall")
        self.working_memory = _option(working_memory, WorkingMemoryOptions, "working_memory")
        self.embedder = embedder if embedder is not None else HashEmbedder()
        self._history = MessageHistory(storage=self.storage, last_messages=last_messages)
        self._recall = None if self.semantic_recall is None else SemanticRecall(
            storage=self.storage, vector=vector, embedder=self.embedder,
            options=self.semantic_recall)
        self.vector = None if self._recall is None or self._recall.index is not None \
            else self._recall.vector
        self._working = None if self.working_memory is None else WorkingMemory(
            storage=self.storage, options=self.working_memory)

    def __repr__(self) -> str:
        return (f"Memory(storage={self.storage!r}, last_messages={self.last_messages}, "
                f"semantic_recall={self.semantic_recall is not None}, "
                f"working_memory={self.working_memory is not None})")


    # -- the agent's side ----------------------------------------------------------

    def input_processors(self) -> list[Processor]:
        """The processors to run before the model: working memory, history, recall."""
        return [p for p in (self._working, self._history, self._recall) if p is not None]

    def output_processors(self) -> list[Processor]:
        """The processors to run after the model: recall (indexing), history (saving)."""
        return [p for p in (self._recall, self._history) if p is not None]

    # -- threads and messages --------------------------------------------------------

    async def create_thread(self, *, thread_id: str | None = None,
                            resource_id: str | None = None, title: str | None = None,
                            metadata: Mapping[str, Any] | None = None) -> Thread:
        """Create (or replace) a thread and return it.

        Args:
            thread_id: Its id (default: a fresh random one).
            resource_id: Its owner (a user or tenant).
            title: A display title.
            metadata: Free-form JSON-able data.
        """
        now = datetime.now(UTC)
        thread = Thread(id=thread_id or new_id(), resource_id=resource_id, title=title,
                        metadata=dict(metadata or {}), created_at=now, updated_at=now)
        await self.storage.save_thread(thread)
        return thread

    async def get_thread(self, thread_id: str) -> Thread | None:
        """The thread, or ``None``."""
        return await self.storage.get_thread(thread_id)

    async def list_threads(self, resource_id: str | None = None) -> list[Thread]:
        """The threads of a resource (all threads without one), most recent first."""
        return await self.storage.list_threads(resource_id)

    async def get_messages(self, thread_id: str, resource_id: str | None = None, *,
                           last: int | None = None) -> list[Message]:
        """The thread's stored messages, oldest first (hidden signals included).

        Args:
            thread_id: The thread.
            resource_id: When given, a thread that does not belong to exactly this
                resource (another one's, or one created without a resource) reads as
                empty. Without it nothing is checked: this is the application's own
                view; requests through an agent are always checked.
            last: Only the last this many.

        Raises:
            MemoryCorruptedError: A stored message cannot be decoded (naming it).
        """
        if resource_id is not None:
            thread = await self.storage.get_thread(thread_id)
            if thread is not None and thread.resource_id != resource_id:
                return []
        return await self.storage.get_messages(thread_id, last=last)

    async def save_messages(self, messages: Sequence[MessageInput], *, thread_id: str,
                            resource_id: str | None = None) -> list[Message]:
        """Store messages in a thread (and index them when semantic recall is on).

        Returns:
            The stored messages (carrying the thread and resource ids).
        """
        stamped = [Message.from_input(m).model_copy(
            update={"thread_id": thread_id, "resource_id": resource_id}) for m in messages]
        await self.storage.save_messages(stamped)
        if self._recall is not None:
            await self._recall.index_messages(stamped)
        return stamped

    async def reindex(self, *, thread_id: str | None = None,
                      resource_id: str | None = None) -> int:
        """Embed every message of a thread or resource that has no vector from the
        current embedder (after a change of embedder, or failed indexing).

        Returns:
            How many messages were indexed.

        Raises:
            ValueError: Semantic recall is off, its vectors are not kept in the store,
                or neither (or both) of ``thread_id`` and ``resource_id`` is given.
            APICallError: The embedder failed (what was indexed before stays).
        """
        index = None if self._recall is None else self._recall.index
        if index is None:
            raise ValueError("reindex() needs semantic recall with vectors kept in the "
                             "store (Memory(semantic_recall=True) without vector=)")
        if (thread_id is None) == (resource_id is None):
            raise ValueError("reindex() takes thread_id= or resource_id= (one of them)")
        scope = f"thread:{thread_id}" if thread_id is not None else f"resource:{resource_id}"
        return await index.catch_up(await index.current_space(), scope)

    # -- working memory ------------------------------------------------------------

    def _working_store(self) -> WorkingMemoryStore:
        return WorkingMemoryStore(self.storage, self.working_memory or WorkingMemoryOptions())

    async def _resource(self, thread_id: str, resource_id: str | None) -> str | None:
        if resource_id is not None:
            return resource_id
        thread = await self.storage.get_thread(thread_id)
        return None if thread is None else thread.resource_id

    async def get_working_memory(self, thread_id: str, *,
                                 resource_id: str | None = None) -> str | None:
        """The working memory the thread sees (per its resource under resource scope), or
        ``None`` before any update. A JSON text when the options have a schema."""
        store = self._working_store()
        return await store.get(thread_id, await self._resource(thread_id, resource_id))

    async def update_working_memory(self, thread_id: str, content: Any, *,
                                    resource_id: str | None = None) -> str:
        """Replace (Markdown) or merge into (schema) the working memory; returns it.

        Raises:
            ValueError: The content does not fit the template kind or the schema.
        """
        store = self._working_store()
        return await store.update(thread_id, await self._resource(thread_id, resource_id),
                                  content)

    async def aclose(self) -> None:
        """Close the storage."""
        await self.storage.aclose()


def _option(value: Any, kind: type[Any], name: str) -> Any:
    if value is True:
        return kind()
    if value is False or value is None:
        return None
    if isinstance(value, kind):
        return value
    raise TypeError(f"Memory({name}=...) takes True, False or a {kind.__name__}, got "
                    f"{type(value).__name__}")


