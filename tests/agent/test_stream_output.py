"""``agent.stream()`` output: the final values and the chunk stream, in either order."""

from __future__ import annotations

import pytest

from procflow.agent import Agent
from procflow.models import ScriptedModel


def agent() -> Agent:
    return Agent(id="a", model=ScriptedModel(["one two three"] * 3))


async def test_text_first_then_full_stream_replays_the_chunks() -> None:
    expected = [c.type async for c in (await agent().stream("hi")).full_stream]
    out = await agent().stream("hi")
    assert await out.text == "one two three"
    replayed = [c async for c in out.full_stream]
    assert [c.type for c in replayed] == expected
    assert "".join(c.text for c in replayed if c.type == "text-delta") == "one two three"
    assert [t async for t in out.text_stream] == ["one ", "two ", "three"]


async def test_full_stream_read_twice_is_a_clear_error() -> None:
    out = await agent().stream("hi")
    assert len([c async for c in out.full_stream]) > 3
    with pytest.raises(RuntimeError, match="already read to its end"):
        _ = out.full_stream
    assert await out.text == "one two three"
