"""Agent memory: conversation history, semantic recall and working memory.

``Memory`` holds the configuration and the stores; the processors it adds to an
agent (``MessageHistory``, ``SemanticRecall``, ``WorkingMemory``) do the work.
"""

from __future__ import annotations

from procflow.memory.base import (
    Embedder,
    MemoryScope,
    MemoryStore,
    Thread,
    VectorIndex,
    VectorMatch,
)
from procflow.memory.embedders import HashEmbedder, OpenAIEmbedder
from procflow.memory.inmemory import InMemoryMemoryStore
from procflow.memory.memory import Memory
from procflow.memory.options import (
    DEFAULT_WORKING_MEMORY_TEMPLATE,
    SemanticRecallOptions,
    WorkingMemoryOptions,
)
from procflow.memory.processors import MessageHistory, SemanticRecall, WorkingMemory
from procflow.memory.sqlite import DEFAULT_MEMORY_PATH, SQLiteMemoryStore
from procflow.memory.vector import InMemoryVectorIndex

__all__ = [
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
    "OpenAIEmbedder",
    "SQLiteMemoryStore",
    "SemanticRecall",
    "SemanticRecallOptions",
    "Thread",
    "VectorIndex",
    "VectorMatch",
    "WorkingMemory",
    "WorkingMemoryOptions",
]
