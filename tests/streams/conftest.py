"""Shared helpers of the streaming tests: a model streaming given deltas (fixtures)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from procflow.messages import Chunk
from procflow.models.base import ModelRequest

__all__ = ["ChunkedModel", "chunked", "split_at"]


def split_at(text: str, cuts: Sequence[int]) -> list[str]:
    """``text`` cut at the given offsets (sorted, deduplicated, empty pieces dropped)."""
    points = sorted({c for c in cuts if 0 < c < len(text)})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    return [p for p in pieces if p]


class ChunkedModel:
    """Answers every call with the same text deltas (then "finish", unless told not to)."""

    def __init__(self, deltas: Sequence[str], *, finish: bool = True) -> None:
        self.deltas = list(deltas)
        self.finish = finish

    @property
    def provider(self) -> str:
        return "test"

    @property
    def model_id(self) -> str:
        return "chunked"

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        for delta in self.deltas:
            yield Chunk.text_delta(delta)
        if self.finish:
            yield Chunk.finish("stop", {"input_tokens": 1, "output_tokens": 1})


@pytest.fixture(scope="session")
def chunked() -> Any:
    """``chunked(deltas, finish=True)``: a ``ChunkedModel``; ``chunked.split_at`` too."""
    def make(deltas: Sequence[str], *, finish: bool = True) -> ChunkedModel:
        return ChunkedModel(deltas, finish=finish)
    make.split_at = split_at  # type: ignore[attr-defined]
    return make
