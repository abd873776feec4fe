"""RedisStorage specifics: corrupted values, unreachable servers, lazy import."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator

import anyio
import pytest
import redis.asyncio as aioredis

from procflow.errors import SnapshotCorruptedError, StorageError
from procflow.runtime.results import RunSnapshot, StepResult
from procflow.runtime.tracing import TraceRecord
from procflow.storage import RedisStorage


@pytest.fixture
async def storage(redis_url: str, redis_prefix: str) -> AsyncIterator[RedisStorage]:
    async with RedisStorage(redis_url, prefix=redis_prefix) as instance:
        yield instance


def header(run_id: str = "run-1") -> RunSnapshot:
    return RunSnapshot(workflow_id="wf", run_id=run_id, status="suspended", updated_at=1.0)


@pytest.mark.redis
async def test_corrupted_header_raises_and_is_kept(storage: RedisStorage,
                                                   raw: aioredis.Redis) -> None:
    await storage.save_snapshot(header(), {})
    key = f"{storage.prefix}:run:wf:run-1"
    await raw.set(key, "{garbage")

    with pytest.raises(SnapshotCorruptedError, match="run 'run-1' of workflow 'wf'"):
        await storage.load_snapshot("wf", "run-1")
    assert [r.status for r in await storage.list_runs()] == ["corrupted"]
    with pytest.raises(SnapshotCorruptedError):
        await storage.claim_run("wf", "run-1", expected="suspended", new="running")

    assert await raw.get(key) == "{garbage"


@pytest.mark.redis
async def test_corrupted_step_names_the_step(storage: RedisStorage,
                                             raw: aioredis.Redis) -> None:
    await storage.save_snapshot(header(), {"outer.inner": StepResult(status="success")})
    await raw.hset(f"{storage.prefix}:steps:wf:run-1", "outer.inner", '{"status": 1}')

    with pytest.raises(SnapshotCorruptedError, match=r"step 'outer\.inner'"):
        await storage.load_snapshot("wf", "run-1")


@pytest.mark.redis
async def test_concurrent_claims_let_exactly_one_win(storage: RedisStorage) -> None:
    await storage.save_snapshot(header(), {})
    wins: list[bool] = []

    async def claim() -> None:
        wins.append(await storage.claim_run("wf", "run-1", expected="suspended",
                                            new="running"))

    async with anyio.create_task_group() as group:
        for _ in range(10):
            group.start_soon(claim)

    assert sorted(wins) == [False] * 9 + [True]


async def test_an_unreachable_server_is_a_storage_error_without_the_password() -> None:
    async with RedisStorage("redis://:secret@127.0.0.1:1/0", prefix="p") as storage:
        with pytest.raises(StorageError) as info:
            await storage.load_snapshot("wf", "run-1")

    message = str(info.value)
    assert "redis://127.0.0.1:1/0" in message
    assert "secret" not in message
    assert "secret" not in repr(storage)


def test_importing_the_storage_package_does_not_import_redis() -> None:
    code = ("import sys, procflow.storage as s; assert 'redis' not in sys.modules; "
            "s.RedisStorage; assert 'redis' in sys.modules")

    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)


def trace_record(run_id: str = "run-1") -> TraceRecord:
    return TraceRecord(run_id, "wf", "success", 1.0, 2.0, [{"span_id": "1", "name": "run"}])


@pytest.mark.redis
async def test_corrupted_trace_raises_and_is_kept(storage: RedisStorage,
                                                  raw: aioredis.Redis) -> None:
    await storage.save_trace(trace_record())
    key = f"{storage.prefix}:trace:run-1"
    await raw.set(key, "{garbage")

    with pytest.raises(SnapshotCorruptedError, match="trace of run 'run-1'") as info:
        await storage.load_trace("run-1")

    assert info.value.run_id == "run-1"
    assert await raw.get(key) == "{garbage"
    # Listing reads only the header, so it still works.
    assert await storage.list_traces() == [
        TraceRecord("run-1", "wf", "success", 1.0, 2.0, [])]


@pytest.mark.redis
async def test_corrupted_trace_header_raises_when_listed(storage: RedisStorage,
                                                         raw: aioredis.Redis) -> None:
    await storage.save_trace(trace_record())
    key = f"{storage.prefix}:tracehead:run-1"
    await raw.set(key, '{"v": 1, "run_id": "run-1"}')

    with pytest.raises(SnapshotCorruptedError, match=r"run 'run-1'.*workflow_id"):
        await storage.list_traces()

    assert await raw.get(key) == '{"v": 1, "run_id": "run-1"}'
    assert await storage.load_trace("run-1") == trace_record()
    await storage.save_trace(trace_record())  # a new trace replaces the corrupted one
    assert [t.run_id for t in await storage.list_traces()] == ["run-1"]


@pytest.mark.redis
async def test_trace_keys_escape_ids(storage: RedisStorage, raw: aioredis.Redis) -> None:
    await storage.save_trace(TraceRecord("r:1", "w:f", "success", 1.0, None, []))

    keys = {key async for key in raw.scan_iter(match=f"{storage.prefix}:*")}

    p = storage.prefix
    assert keys == {f"{p}:trace:r%3A1", f"{p}:tracehead:r%3A1", f"{p}:traces",
                    f"{p}:wftraces:w%3Af"}
