"""A trace is drawn with the statuses its spans ended with: one real run per final
status, local and distributed, and no failure mark on a run that did not fail."""

from __future__ import annotations

import io
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import pytest
from rich.console import Console

from procflow import StepContext, Workflow, create_step, create_workflow
from procflow.errors import TripwireError
from procflow.runtime.distributed import Job
from procflow.storage import InMemoryStorage
from procflow.studio import TraceView


def render(trace: Any) -> str:
    console = Console(width=120, color_system=None, record=True, file=io.StringIO())
    console.print(TraceView(trace))
    return console.export_text()


def step(fn: Callable[[StepContext], Any]) -> Workflow:
    return create_workflow(id="w", storage=InMemoryStorage()).then(
        create_step(id="s", execute=fn)).commit()


async def ok(ctx: StepContext) -> int:
    return 1


async def boom(ctx: StepContext) -> int:
    raise ValueError("bad")


async def trip(ctx: StepContext) -> int:
    raise TripwireError("blocked")


async def pause(ctx: StepContext) -> int:
    await ctx.suspend({"ask": "ok?"})


async def finish(wf: Workflow) -> str:
    run = wf.create_run()
    await run.start(input_data=1)
    return run.run_id


started = anyio.Event()


async def cancel(wf: Workflow) -> str:
    global started
    started = anyio.Event()
    run = wf.create_run()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run.start, 1)
        await started.wait()
        await run.cancel()
    return run.run_id


async def forever(ctx: StepContext) -> int:
    started.set()
    await anyio.sleep(60)
    return 1


LOCAL = [
    pytest.param(step(ok), finish, "success", "●", id="success"),
    pytest.param(step(boom), finish, "failed", "✖", id="failed"),
    pytest.param(step(trip), finish, "tripwire", "⚡", id="tripwire"),
    pytest.param(step(pause), finish, "suspended", "⏸", id="suspended"),
    pytest.param(step(forever), cancel, "canceled", "■", id="canceled"),
]


@pytest.mark.parametrize(("wf", "drive", "status", "mark"), LOCAL)
async def test_a_local_run_is_drawn_with_its_status(
        wf: Workflow, drive: Callable[[Workflow], Awaitable[str]], status: str,
        mark: str) -> None:
    run_id = await drive(wf)
    trace = await wf.storage.load_trace(run_id)  # type: ignore[union-attr]
    assert trace is not None and trace.status == status
    text = render(trace)
    assert f"{mark} {status}" in text.splitlines()[0]
    assert f"{mark} s" in text and f"{mark} run: w" in text
    if status != "failed":
        assert "✖" not in text


class Pool:
    """A distributor that keeps the jobs; the test plays the workers."""

    def __init__(self) -> None:
        self.jobs: list[Job] = []

    async def dispatch(self, workflow_id: str, run_id: str, join: str, jobs: Sequence[Job],
                       total: int) -> None:
        self.jobs.extend(jobs)


def fan(fail_on: int | None) -> Workflow:
    def square(ctx: StepContext) -> int:
        if ctx.input_data == fail_on:
            raise ValueError("bad item")
        return int(ctx.input_data) ** 2
    return create_workflow(id="fan", storage=InMemoryStorage()).foreach(
        create_step(id="square", execute=square), distribute=True).commit()


async def distributed(wf: Workflow, *, workers_finish: bool) -> str:
    pool = Pool()
    run = wf.create_run()
    run.distributor = pool
    await run.prepare(list(range(10)))
    await run.run_submitted()
    if workers_finish:
        for job in pool.jobs:
            await (await wf.get_run(run.run_id)).run_job(job)
        joined = await wf.get_run(run.run_id)
        joined.distributor = pool
        await joined.run_submitted()
    return run.run_id


@pytest.mark.parametrize(("fail_on", "workers_finish", "status", "mark"), [
    pytest.param(None, True, "success", "●", id="success"),
    pytest.param(3, True, "failed", "✖", id="failed"),
    pytest.param(None, False, "running", "◐", id="stalled"),
])
async def test_a_distributed_run_is_drawn_with_its_status(
        fail_on: int | None, workers_finish: bool, status: str, mark: str) -> None:
    wf = fan(fail_on)
    run_id = await distributed(wf, workers_finish=workers_finish)
    trace = await wf.storage.load_trace(run_id)  # type: ignore[union-attr]
    assert trace is not None and trace.status == status
    text = render(trace)
    assert f"{mark} {status}" in text.splitlines()[0]
    squares = [line for line in text.splitlines() if "square [foreach]" in line]
    assert squares and all(f"{mark} square" in line for line in squares)
    if status != "failed":
        assert "✖" not in text and "Parked" not in text
