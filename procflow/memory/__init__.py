"""Agent memory: conversation history, semantic recall and working memory.

``Memory`` holds the configuration and the stores; the processors it adds to an
agent (``MessageHistory``, ``SemanticRecall``, ``WorkingMemory``) do the work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from procflow.memory.base import (
    Embedder,
    MemoryScope,
    MemoryStore,
    StoredVector,
    Thread,
    VectorBatch,
    VectorIndex,
    VectorMatch,
    VectorStore,
)
from procflow.memory.embedders import HashEmbedder, OpenAIEmbedder
from procflow.memory.inmemory import InMemoryMemoryStore
from procflow.memory.memory import Memory
from procflow.memory.options import (
    DEFAULT_WORKING_MEMORY_TEMPLATE,
    SemanticRecallOptions,
    WorkingMemoryOptions,
)
from procflow.memory.postgres import PostgresMemoryStore
from procflow.memory.processors import MessageHistory, SemanticRecall, WorkingMemory
from procflow.memory.search import APPROXIMATE_ABOVE, MessageIndex
from procflow.memory.sqlite import DEFAULT_MEMORY_PATH, SQLiteMemoryStore
from procflow.memory.vector import InMemoryVectorIndex

if TYPE_CHECKING:
    from procflow.memory.redis import RedisMemoryStore

__all__ = [
    "APPROXIMATE_ABOVE",
    "DEFAULT_MEMORY_PATH",
    "DEFAULT_WORKING_MEMORY_TEMPLATE",
    "Embedder",
    "HashEmbedder",
    "InMemoryMemoryStore",
    "InMemoryVectorIndex",
    "Memory",
    "MemoryScope",
    "MemoryStore",
    "MessageHistory",
    "MessageIndex",
    "OpenAIEmbedder",
    "PostgresMemoryStore",
    "RedisMemoryStore",
    "SQLiteMemoryStore",
    "SemanticRecall",
    "SemanticRecallOptions",
    "StoredVector",
    "Thread",
    "VectorBatch",
    "VectorIndex",
    "VectorMatch",
    "VectorStore",
    "WorkingMemory",
    "WorkingMemoryOptions",
]


def __getattr__(name: str) -> Any:
    # ``RedisMemoryStore`` imports redis: only on first use.
    if name == "RedisMemoryStore":
        from procflow.memory.redis import RedisMemoryStore

        return RedisMemoryStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
