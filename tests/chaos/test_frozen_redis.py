"""A frozen Redis (SIGSTOP) never hangs a run (issue 42): the run returns "failed" with
a ``StorageError`` within the caller's ``fail_after``, and restarts to success once the
server is back; no step that completed before the freeze runs again."""

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

_STEPS = 10


def _workflow(ran: Counter[str], storage: RedisStorage, third: anyio.Event) -> Any:
    wf = create_workflow(id="frozen", storage=storage)
    for i in range(_STEPS):
        async def step(ctx: Any, name: str = f"s{i}") -> int:
            ran[name] += 1
            if sum(ran.values()) == 3:
                third.set()
            await anyio.sleep(0.05)
            return int(ctx.input_data or 0) + 1
        wf = wf.then(create_step(id=f"s{i}", execute=step))
    return wf.commit()


async def test_a_run_on_a_frozen_redis_fails_in_time_and_restarts(
        private_redis: PrivateRedis) -> None:
    ran: Counter[str] = Counter()
    async with RedisStorage(private_redis.url, prefix="chaos") as storage:
        third = anyio.Event()
        wf = _workflow(ran, storage, third)
        run = wf.create_run("r1")

        async def freeze_soon() -> None:
            await third.wait()  # a few steps in
            private_redis.freeze()

        with anyio.fail_after(10):  # the caller's own deadline
            async with anyio.create_task_group() as tg:
                tg.start_soon(freeze_soon)
                result = await run.start(input_data=0)
        completed_before = {name for name, count in ran.items() if count}

        assert result.status == "failed"
        assert isinstance(result.error, StorageError)

        private_redis.thaw()
        await anyio.sleep(QUIET)  # the server counts as unresponsive that long
        with anyio.fail_after(10):
            again = await run.restart()

    assert again.status == "success" and again.result == _STEPS
    assert set(ran) == {f"s{i}" for i in range(_STEPS)}
    # a step runs again only if its result had not reached the server: at most the one
    # in flight when the server froze
    assert sum(ran.values()) <= _STEPS + 1
    assert len(completed_before) < _STEPS
