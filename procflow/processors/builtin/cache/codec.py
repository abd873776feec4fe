"""How ``ResponseCache`` turns key inputs and chunks into JSON, and chunks back.

Key inputs become canonical JSON data (so equal inputs hash equally in every process);
a finished call's chunks become a versioned entry, and an entry read back is checked
before it is replayed: anything this module did not write is treated as corrupted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pydantic import BaseModel

from procflow.messages import Chunk, ErrorChunk, Finish, TripwireChunk

__all__ = ["CACHEABLE_FINISH_REASONS", "canonical", "decode_chunks", "encode_chunks",
           "not_cacheable"]

CACHEABLE_FINISH_REASONS: Final = frozenset({"stop", "length", "tool-calls"})
"""The finish reasons of responses worth replaying."""

_FORMAT: Final = 2  # version of the stored entry's layout: chunks as ``Chunk.to_dict()``
_READABLE: Final = frozenset({1, 2})  # 1: the untyped {"type", "payload", "data", "metadata"}


def canonical(value: Any) -> Any:
    """``value`` as plain JSON data that stays the same for equal inputs."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        return {"$bytes": hashlib.sha256(data).hexdigest(), "size": len(data)}
    if isinstance(value, Mapping):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    if isinstance(value, set | frozenset):
        items = [canonical(v) for v in value]
        return {"$set": sorted(items, key=lambda v: json.dumps(v, sort_keys=True))}
    if isinstance(value, BaseModel):
        return canonical(value.model_dump())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return canonical(dataclasses.asdict(value))
    return {"$" + type(value).__qualname__: str(value)}


def not_cacheable(chunks: Sequence[Chunk]) -> str | None:
    """Why these chunks must not be cached, or ``None`` when they may be."""
    finish_reason = None
    for chunk in chunks:
        if isinstance(chunk, ErrorChunk | TripwireChunk):
            return f"the response has a {chunk.type!r} chunk"
        if isinstance(chunk, Finish):
            finish_reason = chunk.finish_reason
    if finish_reason not in CACHEABLE_FINISH_REASONS:
        return (f"the finish reason is {finish_reason!r}, not one of "
                f"{sorted(CACHEABLE_FINISH_REASONS)}")
    return None


def encode_chunks(chunks: Sequence[Chunk]) -> dict[str, Any] | None:
    """The cache entry of ``chunks``, or ``None`` when they are not JSON-serialisable."""
    value = {"format": _FORMAT, "chunks": [c.to_dict() for c in chunks]}
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None
    return value


def decode_chunks(value: Any) -> list[Chunk] | None:
    """The chunks of a stored entry, or ``None`` when it is not one this module wrote."""
    if not isinstance(value, dict) or value.get("format") not in _READABLE:
        return None
    items = value.get("chunks")
    if not isinstance(items, list):
        return None
    chunks: list[Chunk] = []
    for item in items:
        if not isinstance(item, dict):
            return None
        try:
            chunks.append(Chunk.from_dict(item))
        except (ValueError, TypeError):
            return None
    return None if not_cacheable(chunks) is not None else chunks
