"""``agent.stream()`` output: the final values and the chunk stream, in either order."""

from __future__ import annotations

import contextvars
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from pydantic import BaseModel

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


async def test_full_stream_read_twice_replays_the_chunks() -> None:
    out = await agent().stream("hi")
    first = [c async for c in out.full_stream]
    assert len(first) > 3
    assert [c async for c in out.full_stream] == first
    assert await out.text == "one two three"


class City(BaseModel):
    name: str
    country: str


CITY = '{"name": "Paris", "country": "France"}'


async def _use(out: Any, how: str) -> Any:
    """One way of touching a stream's output; returns what it gives."""
    if how == "full_stream":
        return "".join([c.text async for c in out.full_stream if c.type == "text-delta"])
    if how == "text_stream":
        return "".join([t async for t in out.text_stream])
    if how == "text":
        return await out.text
    if how == "object":
        return await out.object
    if how == "touch full_stream":
        _ = out.full_stream
        return None
    assert how == "touch text_stream"
    _ = out.text_stream
    return None


_WAYS = ["full_stream", "text_stream", "text", "object", "touch full_stream",
         "touch text_stream"]


@pytest.mark.parametrize("first", _WAYS)
@pytest.mark.parametrize("second", _WAYS)
async def test_any_order_of_touching_the_stream_works(first: str, second: str) -> None:
    out = await Agent(id="geo", model=ScriptedModel([CITY]), output_type=City).stream("?")
    expected = {"full_stream": CITY, "text_stream": CITY, "text": CITY,
                "object": City(name="Paris", country="France")}
    with anyio.fail_after(10):
        for how in (first, second):
            got = await _use(out, how)
            assert got == expected.get(how), (first, second, how)
        # and everything still works after both
        assert await out.text == CITY and await out.object == expected["object"]
        assert "".join([t async for t in out.text_stream]) == CITY


@pytest.mark.parametrize("then", _WAYS)
async def test_a_reader_that_left_early_leaves_a_clear_error_or_the_values(then: str) -> None:
    out = await Agent(id="geo", model=ScriptedModel(["one two three four five"]),
                      output_type=None).stream("?")
    async for chunk in out.full_stream:
        if chunk.type == "text-delta":
            break
    with anyio.fail_after(10):
        try:
            got = await _use(out, then)
        except RuntimeError as err:  # never a bare anyio.ClosedResourceError
            assert "await out.text" in str(err)
            assert then in ("full_stream", "text_stream")
        else:
            assert got in (None, "one two three four five")
        assert await out.text == "one two three four five"


async def test_two_readers_side_by_side_each_get_every_chunk() -> None:
    out = await agent().stream("hi")
    got: dict[str, list[str]] = {}

    async def read(name: str, stream: Any) -> None:
        got[name] = [t async for t in stream]

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(read, "a", out.text_stream)
            tg.start_soon(read, "b", out.text_stream)
    assert got["a"] == got["b"] == ["one ", "two ", "three"]


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
