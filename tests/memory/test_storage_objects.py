"""``Memory(storage=...)`` takes the project's own ``Storage``: one database holds an
agent's runs, traces and memory."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from procflow import Agent
from procflow.memory import Memory
from procflow.models import ScriptedModel
from procflow.storage import InMemoryStorage, SQLiteStorage


async def test_one_sqlite_file_holds_runs_traces_and_memory(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    storage = SQLiteStorage(path)
    async with Memory(storage=storage) as memory:
        agent = Agent(id="a", model=ScriptedModel(["hello"]), memory=memory, storage=storage)
        out = await agent.generate("hi", memory={"thread": "t1", "resource": "u1"})
        assert [m.text for m in await memory.get_messages("t1")] == ["hi", "hello"]
    assert await storage.load_trace(out.run_id) is not None
    with sqlite3.connect(path) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
        assert {"runs", "traces", "threads", "messages"} <= tables
        assert db.execute("SELECT count(*) FROM messages").fetchone() == (2,)
    await storage.aclose()
    again = Memory(storage=SQLiteStorage(path))
    assert [t.id for t in await again.list_threads("u1")] == ["t1"]
    await again.aclose()


async def test_memories_on_one_in_memory_storage_share_it() -> None:
    storage = InMemoryStorage()
    first, second = Memory(storage=storage), Memory(storage=storage)
    await first.save_messages(["kept"], thread_id="t1")
    assert [m.text for m in await second.get_messages("t1")] == ["kept"]
    assert await Memory(storage=InMemoryStorage()).get_messages("t1") == []


@pytest.mark.redis
async def test_redis_storage_holds_runs_and_memory(redis_url: str, redis_prefix: str) -> None:
    import redis.asyncio as aioredis

    from procflow.storage import RedisStorage

    storage = RedisStorage(redis_url, prefix=redis_prefix)
    memory = Memory(storage=storage, working_memory=True)
    agent = Agent(id="a", model=ScriptedModel(["hello"]), memory=memory, storage=storage)
    out = await agent.generate("hi", memory={"thread": "t1", "resource": "u1"})
    await memory.update_working_memory("t1", "# notes")
    await memory.aclose()  # leaves the storage's client open
    async with RedisStorage(redis_url, prefix=redis_prefix) as other:
        reopened = Memory(storage=other)
        assert [m.text for m in await reopened.get_messages("t1", "u1")] == ["hi", "hello"]
        assert await reopened.get_working_memory("t1") == "# notes"
    assert await storage.load_trace(out.run_id) is not None
    async with aioredis.Redis.from_url(redis_url) as client:
        keys = {k.decode() async for k in client.scan_iter(match=f"{redis_prefix}:*")}
    assert f"{redis_prefix}:mem:threads" in keys
    assert f"{redis_prefix}:trace:{out.run_id}" in keys
    await storage.aclose()


def test_something_else_is_refused_naming_what_is_accepted() -> None:
    with pytest.raises(TypeError, match=r"takes a Storage \(SQLiteStorage, PostgresStorage, "
                                        r"RedisStorage, InMemoryStorage\).*got int"):
        Memory(storage=3)  # type: ignore[arg-type]
