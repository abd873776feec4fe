"""``agent.stream()`` output: the final values and the chunk stream, in either order."""

from __future__ import annotations

import contextvars
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from procflow.agent import Agent
from procflow.models import ScriptedModel
from procflow.processors import Processor


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


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_breaking_out_of_full_stream_leaves_the_task_usable() -> None:
    # An async generator holding a task group across ``yield`` broke this: the
    # abandoned stream's cancel scope cancelled the reader's next call.
    source = agent()
    out = await source.stream("hi")
    async for chunk in out.full_stream:
        if chunk.type == "text-delta":
            break
    again = await source.generate("again")
    assert again.text == "one two three"
    for _ in range(3):  # the task stays usable across checkpoints
        await anyio.lowlevel.checkpoint()
    with anyio.fail_after(5):  # the abandoned call finishes on its own
        assert await out.finish_reason == "stop"


_SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_a_stream_read_without_async_with_runs_in_the_callers_context() -> None:
    seen: list[str] = []

    class Spy(Processor):
        id = "spy"

        def process_output_stream(self, args: Any) -> Any:
            seen.append(_SEEN.get())
            return args.part

    _SEEN.set("caller")
    out = await Agent(id="c", model=ScriptedModel(["one two three"]),
                      output_processors=[Spy()]).stream("hi")
    assert [c.text async for c in out.full_stream if c.type == "text-delta"] == [
        "one ", "two ", "three"]
    assert seen and set(seen) == {"caller"}
