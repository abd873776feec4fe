"""A frozen network to PostgreSQL (a TCP proxy that stops forwarding) never hangs a run
(issue 42): the operation gives up at the storage's ``timeout`` with ``StorageError``,
the run ends "failed" inside the caller's deadline, and it restarts once the network is
back."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from procflow import create_step, create_workflow
from procflow.errors import StorageError
from procflow.storage import PostgresStorage
from tests.chaos.proxy import freezable_proxy

pytestmark = [pytest.mark.chaos, pytest.mark.postgres, pytest.mark.timeout(60)]


async def test_a_run_behind_a_frozen_network_fails_in_time_and_restarts(
        postgres_dsn: str, postgres_schema: str) -> None:
    target = conninfo_to_dict(postgres_dsn)
    reached = anyio.Event()
    ran: list[int] = []

    async def step(ctx: Any) -> int:
        ran.append(ctx.input_data)
        if ctx.input_data == 2:
            reached.set()
            await anyio.sleep(0.2)
        return int(ctx.input_data) + 1

    async with freezable_proxy(str(target.get("host") or "127.0.0.1"),
                               int(target.get("port") or 5432)) as proxy:
        dsn = make_conninfo(postgres_dsn, host="127.0.0.1", port=proxy.port)
        async with PostgresStorage(dsn, schema=postgres_schema, timeout=1.0) as storage:
            wf = create_workflow(id="net", storage=storage)
            for i in range(5):
                wf = wf.then(create_step(id=f"s{i}", execute=step))
            run = wf.commit().create_run("r1")

            async def freeze_soon() -> None:
                await reached.wait()
                proxy.freeze()

            with anyio.fail_after(15):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(freeze_soon)
                    result = await run.start(input_data=0)

            assert result.status == "failed" and isinstance(result.error, StorageError)
            assert "no answer within 1 s" in str(result.error)

            proxy.thaw()
            with anyio.fail_after(15):
                again = await run.restart()

    assert again.status == "success" and again.result == 5
    assert sorted(set(ran)) == [0, 1, 2, 3, 4]
