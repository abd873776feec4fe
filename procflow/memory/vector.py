"""``InMemoryVectorIndex``: cosine search over vectors kept in process memory."""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from typing import Any, final

from procflow.memory.base import VectorMatch

__all__ = ["InMemoryVectorIndex", "cosine"]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine similarity of two vectors (0.0 when either is all zeros).

    Raises:
        ValueError: The vectors differ in size.
    """
    if len(a) != len(b):
        raise ValueError(f"cannot compare vectors of sizes {len(a)} and {len(b)}; use one "
                         "embedder for a whole index")
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    return dot / norm if norm else 0.0


@final
class InMemoryVectorIndex:
    """A ``VectorIndex`` in process memory: exact cosine search, plain Python.

    Fine for thousands of vectors; it does not outlive the process (messages stored
    before a restart are not recalled until indexed again).
    """

    def __init__(self) -> None:
        self._items: dict[str, tuple[tuple[float, ...], dict[str, Any]]] = {}

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"InMemoryVectorIndex(vectors={len(self._items)})"

    async def upsert(self, items: Sequence[tuple[str, Sequence[float], Mapping[str, Any]]],
                     ) -> None:
        """Insert or replace ``(id, vector, metadata)`` items."""
        for item_id, vector, metadata in items:
            self._items[item_id] = (tuple(float(x) for x in vector), dict(metadata))

    async def query(self, vector: Sequence[float], *, top_k: int,
                    where: Mapping[str, Any] | None = None) -> list[VectorMatch]:
        """The ``top_k`` most similar vectors matching ``where``, best first (ties by id)."""
        conditions = dict(where or {})
        scored = ((cosine(vector, v), item_id, meta) for item_id, (v, meta) in self._items.items()
                  if all(meta.get(k) == want for k, want in conditions.items()))
        best = heapq.nsmallest(max(top_k, 0), scored, key=lambda s: (-s[0], s[1]))
        return [VectorMatch(id=item_id, score=score, metadata=meta)
                for score, item_id, meta in best]
