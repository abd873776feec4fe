"""The executor seam: LocalExecutor, run.submit/wait, and distributed fan-out's protocol
with an in-process distributor."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from procflow import (
    LocalExecutor,
    RunNotSuspendedError,
    RunStateError,
    StepContext,
    WorkflowDefinitionError,
    create_step,
    create_workflow,
)
from procflow.runtime.distributed import Job
from procflow.storage import InMemoryStorage


async def _double(ctx: StepContext) -> int:
    return int(ctx.input_data) * 2


double = create_step(id="double", execute=_double)


async def test_submit_outside_a_task_group_runs_to_the_end() -> None:
    wf = create_workflow(id="w", storage=InMemoryStorage()).then(double).commit()
    run = wf.create_run()

    run_id = await run.submit(4)

    assert run_id == run.run_id and run.status == "success"
    assert (await run.result(timeout=5)).result == 8


async def test_submit_inside_a_local_executor_returns_at_once() -> None:
    gate = anyio.Event()

    async def wait_for_gate(ctx: StepContext) -> int:
        await gate.wait()
        return int(ctx.input_data)

    wf = create_workflow(id="w", storage=InMemoryStorage()).then(
        create_step(id="gate", execute=wait_for_gate)).commit()
    async with LocalExecutor() as executor:
        run = wf.create_run()
        assert await run.submit(3, executor=executor) == run.run_id
        with pytest.raises(TimeoutError):
            await run.result(timeout=0.05)
        gate.set()
        result = await run.result(timeout=5)
    assert (result.status, result.result) == ("success", 3)


async def test_a_submitted_run_cannot_be_submitted_again() -> None:
    wf = create_workflow(id="w", storage=InMemoryStorage()).then(double).commit()
    run = wf.create_run()
    await run.submit(1)
    with pytest.raises(RunStateError, match="cannot be submitted"):
        await run.submit(1)


async def test_resume_submit_on_a_local_executor_resumes_in_the_background() -> None:
    async def ask(ctx: StepContext) -> str:
        if ctx.resume_data is None:
            await ctx.suspend({"question": "ok?"})
        return str(ctx.resume_data).upper()

    wf = create_workflow(id="ask", storage=InMemoryStorage()).then(
        create_step(id="ask", execute=ask)).commit()
    run = wf.create_run()
    await run.submit(None)
    assert run.status == "suspended"

    async with LocalExecutor() as executor:
        assert await run.resume_submit(resume_data="yes", executor=executor) == run.run_id
        result = await run.result(timeout=5)

    assert (result.status, result.result) == ("success", "YES")
    with pytest.raises(RunNotSuspendedError, match="not suspended"):
        await run.resume_submit(resume_data="again")


async def test_distribute_without_workers_runs_in_process() -> None:
    wf = (create_workflow(id="w", storage=InMemoryStorage())
          .foreach(double, distribute=True)
          .map(lambda ctx: {"a": ctx.input_data[0]})
          .parallel([create_step(id="p", execute=lambda ctx: ctx.input_data["a"])],
                    distribute=True)
          .commit())
    result = await wf.create_run().start([1, 2, 3])
    assert (result.status, result.result) == ("success", {"p": 2})


def test_distribute_takes_a_bool() -> None:
    with pytest.raises(WorkflowDefinitionError, match=r"foreach\(distribute=...\)"):
        create_workflow(id="w").foreach(double, distribute="yes")  # type: ignore[arg-type]


class InProcessPool:
    """A ``Distributor`` that keeps the jobs; the test plays the workers."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int, list[Job]]] = []

    async def dispatch(self, workflow_id: str, run_id: str, join: str, jobs: Sequence[Job],
                       total: int) -> None:
        self.sent.append((join, total, list(jobs)))


async def test_a_distributed_foreach_parks_then_joins_in_order() -> None:
    storage = InMemoryStorage()
    ran: list[Any] = []

    async def item(ctx: StepContext) -> int:
        ran.append(ctx.input_data)
        return int(ctx.input_data) * 10

    wf = create_workflow(id="fan", storage=storage).foreach(
        create_step(id="item", execute=item), distribute=True).commit()
    pool = InProcessPool()
    run = wf.create_run("r1")
    run.distributor = pool
    await run.prepare([3, 1, 2])

    parked = await run.run_submitted()

    assert parked.status == "running" and ran == []
    ((join, total, jobs),) = pool.sent
    assert (join, total) == ("item", 3)
    assert [(j.path, j.data) for j in jobs] == [("item[0]", 3), ("item[1]", 1), ("item[2]", 2)]
    for job in reversed(jobs):  # finish out of order, one job twice
        worker_side = await wf.get_run("r1")
        await worker_side.run_job(job)
    await (await wf.get_run("r1")).run_job(jobs[0])
    assert sorted(ran) == [1, 2, 3]

    continued = await wf.get_run("r1")
    continued.distributor = pool
    result = await continued.run_submitted()

    assert (result.status, result.result) == ("success", [30, 10, 20])
    assert len(pool.sent) == 1


async def test_a_failed_distributed_item_fails_the_run() -> None:
    async def item(ctx: StepContext) -> int:
        if ctx.input_data == 2:
            raise ValueError("bad item")
        return int(ctx.input_data)

    wf = create_workflow(id="fan", storage=InMemoryStorage()).foreach(
        create_step(id="item", execute=item), distribute=True).commit()
    pool = InProcessPool()
    run = wf.create_run("r1")
    run.distributor = pool
    await run.prepare([1, 2])
    await run.run_submitted()
    for job in pool.sent[0][2]:
        await (await wf.get_run("r1")).run_job(job)
    continued = await wf.get_run("r1")
    continued.distributor = pool

    result = await continued.run_submitted()

    assert result.status == "failed" and "bad item" in str(result.error)
