"""A Redis server killed mid-run (SIGKILL) fails the run quickly with ``StorageError``;
restarted (with its append-only file), the run restarts to success and no step whose
result was stored runs again (issue 42)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import pytest

from procflow import create_step, create_workflow
from procflow._backends.redis import QUIET
from procflow.errors import StorageError
from procflow.storage import RedisStorage
from tests.chaos.conftest import PrivateRedis

pytestmark = [pytest.mark.chaos, pytest.mark.redis, pytest.mark.timeout(60)]


async def test_a_run_on_a_killed_redis_fails_in_time_and_restarts(
        private_redis: PrivateRedis) -> None:
    ran: Counter[str] = Counter()
    third = anyio.Event()

    async def step(ctx: Any) -> int:
        ran[ctx.step_id] += 1
        if sum(ran.values()) == 3:
            third.set()
            await anyio.sleep(0.1)
        return int(ctx.input_data) + 1

    async with RedisStorage(private_redis.url, prefix="chaos") as storage:
        wf = create_workflow(id="killed", storage=storage)
        for i in range(6):
            wf = wf.then(create_step(id=f"s{i}", execute=step))
        run = wf.commit().create_run("r1")

        async def kill_soon() -> None:
            await third.wait()
            private_redis.kill()

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(kill_soon)
                result = await run.start(input_data=0)

        assert result.status == "failed" and isinstance(result.error, StorageError)
        stored_before = dict(ran)

        private_redis.start()
        await anyio.sleep(QUIET)
        with anyio.fail_after(10):
            again = await run.restart()

    assert again.status == "success" and again.result == 6
    # the steps that ran before the kill (the third's result never reached the server)
    # ran once; the third ran twice
    assert stored_before == {"s0": 1, "s1": 1, "s2": 1}
    assert ran == {"s0": 1, "s1": 1, "s2": 2, "s3": 1, "s4": 1, "s5": 1}
