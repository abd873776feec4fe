"""What ``mypy --strict`` infers for typed chunks and tripwires (checked by ``.ci/run``
with the rest of ``tests/typing``; executed by ``tests/test_chunks.py``). Each
``assert_type`` pins one inference; the ``type: ignore[...]`` lines must stay errors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, assert_type

from procflow import (
    Chunk,
    DataChunk,
    Finish,
    TextDelta,
    ToolCallChunk,
    Tripwire,
    TripwireChunk,
    Usage,
    WorkflowResult,
)


def attributes() -> str:
    delta = TextDelta("hi")
    assert_type(delta.text, str)
    assert_type(delta.payload.text, str)
    assert_type(delta.type, Literal["text-delta"])
    finish = Chunk.finish("stop", {"input_tokens": 3})
    assert_type(finish, Finish)
    assert_type(finish.usage, Usage | None)
    assert_type(finish.finish_reason, str | None)
    trip = Chunk.tripwire("no", "guard")
    assert_type(trip, TripwireChunk)
    assert_type(trip.payload.processor_id, str | None)
    assert_type(trip.metadata, Mapping[str, Any])
    assert_type(Chunk.custom("progress", 50), DataChunk)
    return delta.text


def mutate(delta: TextDelta) -> None:
    """Chunks are frozen: an assignment is a type error (and FrozenInstanceError)."""
    delta.text = "changed"  # type: ignore[misc]


def describe(chunk: Chunk) -> str:
    """Dispatch on the chunk classes; each case narrows ``chunk``."""
    assert_type(chunk.text, str)
    assert_type(chunk.type, str)
    match chunk:
        case TextDelta(text=text):
            assert_type(text, str)
            return text
        case ToolCallChunk(tool_name=name, args=args):
            assert_type(args, Mapping[str, Any])
            return f"{name}({dict(args)})"
        case Finish(usage=Usage(total_tokens=total)):
            assert_type(total, int)
            return f"finish after {total} tokens"
        case TripwireChunk():
            assert_type(chunk, TripwireChunk)
            return f"blocked: {chunk.reason}"
    return chunk.type


def reason(result: WorkflowResult[Any]) -> str | None:
    assert_type(result.tripwire, Tripwire | None)
    return None if result.tripwire is None else result.tripwire.reason
