"""A reader that lost an agent stream picks it up again from the stream log:
``agent.stream(resume_from=run_id, after=n)`` gives each remaining chunk once, then the
call's final values, on every storage that keeps stream logs."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.text import TextReceiveStream
from pydantic import BaseModel

from procflow import Agent, RunNotFoundError, RunStateError, SnapshotCorruptedError
from procflow.agent import tool
from procflow.errors import WorkflowRunError
from procflow.messages import Chunk
from procflow.models import FunctionModel, ModelRequest, ScriptedModel, ToolCall
from procflow.records import RunSnapshot
from procflow.storage import (
    InMemoryStorage,
    NullStorage,
    PostgresStorage,
    RedisStorage,
    SQLiteStorage,
    Storage,
)

ANSWER = "the parcel left the depot this morning and arrives on friday"


@pytest.fixture(params=["memory", "sqlite", pytest.param("redis", marks=pytest.mark.redis),
                        pytest.param("postgres", marks=pytest.mark.postgres)])
async def storage(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Storage]:
    made: Storage
    if request.param == "memory":
        made = InMemoryStorage()
    elif request.param == "sqlite":
        made = SQLiteStorage(tmp_path / "runs.db")
    elif request.param == "redis":
        made = RedisStorage(request.getfixturevalue("redis_url"),
                            prefix=request.getfixturevalue("redis_prefix"))
    else:
        made = PostgresStorage(request.getfixturevalue("postgres_dsn"),
                               schema=request.getfixturevalue("postgres_schema"))
    try:
        yield made
    finally:
        await made.aclose()


def _agent(storage: Storage, answer: Any = ANSWER, **options: Any) -> Agent:
    return Agent(id="support", model=ScriptedModel([answer]), storage=storage, **options)


async def _read(out: Any, limit: int | None = None) -> list[Chunk]:
    got: list[Chunk] = []
    async for chunk in out.full_stream:
        got.append(chunk)
        if limit is not None and len(got) == limit:
            break
    return got


def _dicts(chunks: list[Chunk]) -> list[dict[str, Any]]:
    return [c.to_dict() for c in chunks]


@pytest.mark.parametrize("dropped_after", [1, 4, 9])
async def test_a_dropped_reader_gets_the_remaining_chunks_once(
        storage: Storage, dropped_after: int) -> None:
    agent = _agent(storage)
    whole = _dicts(await _read(await _agent(InMemoryStorage()).stream("where is it?")))

    out = await agent.stream("where is it?")
    first = await _read(out, dropped_after)
    run_id = first[0].run_id
    assert isinstance(run_id, str)
    again = await agent.stream(resume_from=run_id, after=len(first))
    rest = await _read(again)

    seen = _dicts(first + rest)
    assert [c["type"] for c in seen] == [c["type"] for c in whole]
    assert [c.get("text") for c in seen] == [c.get("text") for c in whole]
    assert "".join(c.text for c in rest if c.type == "text-delta") == \
        ANSWER[len("".join(c.text for c in first if c.type == "text-delta")):]
    original, resumed = await out.output, await again.output
    assert resumed.text == original.text == ANSWER
    assert (resumed.usage, resumed.finish_reason, resumed.run_id) == (
        original.usage, original.finish_reason, original.run_id)
    assert resumed.messages == original.messages
    assert resumed.steps == original.steps
    assert resumed.response == original.response


async def test_a_reader_follows_a_stream_still_being_produced(storage: Storage) -> None:
    gate = anyio.Event()

    @tool
    async def track(order: str) -> str:
        """Track an order."""
        await gate.wait()
        return f"{order} is on its way"

    def answer(request: ModelRequest) -> str | list[ToolCall]:
        if not any(m["role"] == "tool" for m in request.prompt):
            return [ToolCall("track", {"order": "A-7"})]
        return "A-7 is on its way."

    agent = Agent(id="support", model=FunctionModel(answer), tools=[track], storage=storage)
    out = await agent.stream("where is A-7?")
    first = await _read(out, 3)  # start, step-start, tool-call: the tool now waits
    assert first[-1].type == "tool-call"

    async with anyio.create_task_group() as tg:
        again = await agent.stream(resume_from=str(first[0].run_id), after=3)
        rest: list[Chunk] = []

        async def follow() -> None:
            rest.extend(await _read(again))

        tg.start_soon(follow)
        await anyio.sleep(0.2)
        assert rest == []  # nothing past the tool call is produced yet
        gate.set()

    assert [c.type for c in rest] == ["step-finish", "tool-result", "step-start",
                                      *["text-delta"] * 5, "step-finish", "finish"]
    assert rest[-1].type == "finish"
    assert await again.text == "A-7 is on its way." == await out.text


async def test_a_structured_answer_is_validated_for_the_follower(storage: Storage) -> None:
    class Parcel(BaseModel):
        city: str
        days: int

    agent = _agent(storage, '{"city": "Lyon", "days": 2}', output_type=Parcel)
    out = await agent.stream("where?")
    first = await _read(out, 2)
    again = await agent.stream(resume_from=str(first[0].run_id), after=2)

    assert await again.final_output == Parcel(city="Lyon", days=2) == await out.final_output


async def test_a_failed_call_ends_the_followed_stream_with_its_error(
        storage: Storage) -> None:
    def broken(request: ModelRequest) -> str:
        raise RuntimeError("the provider is down")

    agent = Agent(id="support", model=FunctionModel(broken), storage=storage)
    out = await agent.stream("hi")
    first = await _read(out, 1)
    again = await agent.stream(resume_from=str(first[0].run_id), after=1)

    rest = await _read(again)
    assert [c.type for c in rest][-1] == "error"
    with pytest.raises(WorkflowRunError, match=r"failed: .*the provider is down"):
        await again.text


async def test_a_suspended_stream_then_its_resumed_stream_are_followed(
        storage: Storage) -> None:
    @tool(requires_approval=True)
    async def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    model = ScriptedModel([[ToolCall("refund", {"order": "A-1"})], "A-1 is refunded."])
    agent = Agent(id="support", model=model, tools=[refund], storage=storage)
    out = await agent.stream("refund A-1")
    first = await _read(out, 1)
    run_id = str(first[0].run_id)

    waiting = await agent.stream(resume_from=run_id, after=1)
    assert (await _read(waiting))[-1].type == "suspended"
    held = await waiting.output
    assert held.finish_reason == "suspended"
    assert [c.tool_name for c in held.suspended] == ["refund"]

    resumed = await agent.resume_stream(run_id, approve=[held.suspended[0].tool_call_id])
    start = await _read(resumed, 1)
    assert (start[0].resumed, start[0].run_id) == (run_id, run_id)
    again = await agent.stream(resume_from=run_id, after=1)  # the resumed stream's log
    assert (await _read(again))[-1].type == "finish"
    assert await again.text == "A-1 is refunded." == await resumed.text


async def test_a_stream_read_to_its_end_is_replayed_whole(storage: Storage) -> None:
    agent = _agent(storage)
    out = await agent.stream("hi")
    whole = await _read(out)

    replay = await agent.stream(resume_from=str(whole[0].run_id))

    assert _dicts(await _read(replay)) == _dicts(whole)
    assert await replay.text == ANSWER


PRODUCER = """
import sys

import anyio

from procflow import Agent
from procflow.agent import tool
from procflow.models import FunctionModel, ToolCall
from procflow.storage import SQLiteStorage


@tool
async def track(order: str) -> str:
    \"\"\"Track an order.\"\"\"
    await anyio.sleep(0.5)
    return order + " is on its way"


def answer(request):
    if not any(m["role"] == "tool" for m in request.prompt):
        return [ToolCall("track", {"order": "A-7"})]
    return "A-7 is on its way."


async def main() -> None:
    agent = Agent(id="support", model=FunctionModel(answer), tools=[track],
                  storage=SQLiteStorage(sys.argv[1]))
    out = await agent.stream("where is A-7?")
    async for chunk in out.full_stream:
        if chunk.type == "start":
            print(chunk.run_id, flush=True)
    print(await out.text, flush=True)

anyio.run(main)
"""


async def test_another_process_follows_a_stream_to_its_end(tmp_path: Path) -> None:
    script = tmp_path / "producer.py"
    script.write_text(textwrap.dedent(PRODUCER))
    db = tmp_path / "runs.db"
    async with await anyio.open_process([sys.executable, str(script), str(db)]) as producer:
        assert producer.stdout is not None
        lines = TextReceiveStream(producer.stdout)
        printed = ""
        with anyio.fail_after(60):
            while "\n" not in printed:
                printed += await lines.receive()
        run_id = printed.split("\n", 1)[0].strip()
        storage = SQLiteStorage(db)
        try:
            agent = Agent(id="support", model=ScriptedModel([]), storage=storage)
            again = await agent.stream(resume_from=run_id, after=1)
            rest = await _read(again)
            text = await again.text
        finally:
            await storage.aclose()
        printed += "".join([part async for part in lines])
        await producer.wait()
    assert producer.returncode == 0
    assert [c.type for c in rest] == ["step-start", "tool-call", "step-finish",
                                      "tool-result", "step-start", *["text-delta"] * 5,
                                      "step-finish", "finish"]
    assert printed.split() == [run_id, "A-7", "is", "on", "its", "way."]
    assert text == "A-7 is on its way."


# -- what cannot be followed -----------------------------------------------------------


async def test_resume_from_takes_no_messages_or_options() -> None:
    agent = _agent(InMemoryStorage())
    with pytest.raises(TypeError, match="takes no messages"):
        await agent.stream("hi", resume_from="run")
    with pytest.raises(TypeError, match="takes no max_steps"):
        await agent.stream(resume_from="run", max_steps=2)
    with pytest.raises(TypeError, match="needs messages"):
        await agent.stream()


@pytest.mark.parametrize("after", [-1, 1.5, True, "3"])
async def test_after_must_count_chunks(after: Any) -> None:
    with pytest.raises(ValueError, match="after must be the number of chunks received"):
        await _agent(InMemoryStorage()).stream(resume_from="run", after=after)


async def test_an_unknown_run_or_one_without_a_log_is_named(storage: Storage) -> None:
    agent = _agent(storage)
    with pytest.raises(RunNotFoundError, match="no stream of run 'nope'"):
        await (await agent.stream(resume_from="nope")).text

    done = await agent.generate("hi")  # generate keeps no stream log
    with pytest.raises(RunNotFoundError, match="has no stream log"):
        await (await agent.stream(resume_from=done.run_id)).text


async def test_a_storage_without_stream_logs_is_refused() -> None:
    with pytest.raises(RunStateError, match="keeps no stream logs"):
        await _agent(NullStorage()).stream(resume_from="run")


async def test_a_damaged_log_entry_is_named_and_left_as_it_is(tmp_path: Path) -> None:
    storage = SQLiteStorage(tmp_path / "runs.db")
    try:
        agent = _agent(storage)
        run_id = (await _read(await agent.stream("hi")))[0].run_id
        assert run_id is not None
        await storage.append_stream(agent.workflow.id, run_id, ["{not json", "[1]"], start=0)

        with pytest.raises(SnapshotCorruptedError, match="entry 0: not JSON"):
            await (await agent.stream(resume_from=run_id)).text
        with pytest.raises(SnapshotCorruptedError, match="entry 1: a JSON list"):
            await (await agent.stream(resume_from=run_id, after=1)).text
        assert await storage.read_stream(agent.workflow.id, run_id) == ["{not json", "[1]"]
    finally:
        await storage.aclose()


async def test_a_stream_whose_process_stopped_is_called_stalled(tmp_path: Path) -> None:
    storage = SQLiteStorage(tmp_path / "runs.db")
    try:
        # what a process killed mid-stream leaves: a running run, no lease, a partial log
        agent = _agent(storage)
        await storage.save_snapshot(RunSnapshot(workflow_id=agent.workflow.id, run_id="gone",
                                                status="running"), {})
        await storage.append_stream(agent.workflow.id, "gone", [json.dumps(
            {"type": "start", "agent_id": "support", "run_id": "gone"})], start=0)
        out = await agent.stream(resume_from="gone")

        with anyio.fail_after(10):
            assert [c.type for c in await _read(out)] == ["start"]
            with pytest.raises(RunStateError, match="stopped at chunk 1: no live process "
                                                    "holds the run"):
                await out.text
    finally:
        await storage.aclose()
