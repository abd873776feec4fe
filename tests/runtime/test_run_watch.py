"""``run.watch()``: a run followed from what its storage holds, by a ``Run`` of its own
(as another process would get one with ``wf.get_run``), to its end."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from procflow import RunChange, RunNotFoundError, RunStateError, create_step, create_workflow
from procflow.records import RunSnapshot
from procflow.steps import StepContext
from procflow.storage import InMemoryStorage, SQLiteStorage, Storage


def _step(name: str, gate: anyio.Event | None = None, fail: bool = False) -> Any:
    async def execute(ctx: StepContext[Any, Any]) -> Any:
        if gate is not None:
            await gate.wait()
        if fail:
            raise ValueError("no good")
        return ctx.input_data
    return create_step(id=name, execute=execute)


async def _stored(storage: Storage, workflow_id: str, run_id: str) -> None:
    """Wait until the run is stored (a run just started in another task)."""
    for _ in range(1000):
        if await storage.load_snapshot(workflow_id, run_id) is not None:
            return
        await anyio.sleep(0.01)
    raise AssertionError(f"run {run_id!r} was never stored")


@pytest.fixture(params=["memory", "sqlite"])
async def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    made: Storage = InMemoryStorage() if request.param == "memory" else SQLiteStorage(
        tmp_path / "runs.db")
    yield made
    await made.aclose()


async def test_a_run_is_followed_step_by_step_to_its_end(storage: Storage) -> None:
    gate = anyio.Event()
    wf = create_workflow(id="orders", storage=storage).then(_step("fetch")).then(
        _step("store", gate)).commit()
    changes: list[RunChange] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(wf.create_run("r1").start, 1)
        await _stored(storage, "orders", "r1")
        watched = await wf.get_run("r1")

        async def watch() -> None:
            async for change in watched.watch(interval=0.01):
                changes.append(change)

        tg.start_soon(watch)
        for _ in range(1000):
            if changes:
                break
            await anyio.sleep(0.01)
        await anyio.sleep(0.1)
        assert changes[-1].status == "running" and not changes[-1].ended
        gate.set()

    # a step's result is stored when it ends (each step on a durable storage, all of
    # them at the run's end in memory)
    steps = [(c.step, c.step_status) for c in changes if c.step is not None]
    assert steps == [("fetch", "success"), ("store", "success")]
    assert [c.status for c in changes if c.step is None] == ["running", "success"]
    assert changes[-1].ended and changes[-1].error is None
    assert all(c.duration is not None for c in changes if c.step_status == "success")


async def test_a_failed_run_ends_the_watch_with_its_error(storage: Storage) -> None:
    wf = create_workflow(id="broken", storage=storage).then(_step("parse", fail=True)).commit()
    run = wf.create_run("r1")
    await run.start(1)

    changes = [c async for c in (await wf.get_run("r1")).watch()]

    assert (changes[-1].status, changes[-1].step) == ("failed", None)
    assert "no good" in str(changes[-1].error)
    assert ("parse", "failed") in [(c.step, c.step_status) for c in changes]


async def test_a_suspended_run_ends_the_watch(storage: Storage) -> None:
    async def ask(ctx: StepContext[Any, Any]) -> Any:
        if ctx.resume_data is None:
            return await ctx.suspend({"question": "ok?"})
        return ctx.resume_data

    wf = create_workflow(id="ask", storage=storage).then(
        create_step(id="ask", execute=ask)).commit()
    await wf.create_run("r1").start(1)

    changes = [c async for c in (await wf.get_run("r1")).watch()]

    assert changes[-1].status == "suspended" and changes[-1].ended


WATCHER = """
import sys

import anyio

from procflow import create_step, create_workflow
from procflow.storage import SQLiteStorage


async def main() -> None:
    wf = create_workflow(id="orders", storage=SQLiteStorage(sys.argv[1])).then(
        create_step(id="fetch", execute=lambda ctx: ctx.input_data)).commit()
    run = await wf.get_run("r1")
    async for change in run.watch(interval=0.02):
        print(change.step, change.step_status, change.status, sep="|", flush=True)

anyio.run(main)
"""


async def test_another_process_watches_a_run_to_its_end(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    gate = anyio.Event()
    storage = SQLiteStorage(db)
    wf = create_workflow(id="orders", storage=storage).then(_step("fetch", gate)).commit()
    (tmp_path / "watcher.py").write_text(textwrap.dedent(WATCHER))
    done: list[subprocess.CompletedProcess[bytes]] = []

    async def watcher() -> None:
        done.append(await anyio.run_process(
            [sys.executable, str(tmp_path / "watcher.py"), str(db)], check=False))

    try:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(wf.create_run("r1").start, 1)
                await _stored(storage, "orders", "r1")
                tg.start_soon(watcher)
                await anyio.sleep(0.5)  # the watcher sees the run under way
                gate.set()
    finally:
        await storage.aclose()
    [watched] = done
    assert watched.returncode == 0, watched.stderr
    lines = watched.stdout.decode().splitlines()
    assert lines[-1] == "None|None|success"
    assert lines[-2].startswith("fetch|success|")  # the run's status when it was read


async def test_a_running_run_nobody_holds_is_called_stalled(tmp_path: Path) -> None:
    storage = SQLiteStorage(tmp_path / "runs.db")
    try:
        wf = create_workflow(id="orders", storage=storage).then(_step("fetch")).commit()
        await storage.save_snapshot(RunSnapshot(workflow_id="orders", run_id="gone",
                                                status="running"), {})
        with anyio.fail_after(10):
            changes = [c async for c in (await wf.get_run("gone")).watch(interval=0.01)]
    finally:
        await storage.aclose()
    assert [c.status for c in changes] == ["running", "stalled"]
    assert "no live process holds it" in str(changes[-1].error) and changes[-1].ended


async def test_what_cannot_be_watched_is_named() -> None:
    wf = create_workflow(id="orders", storage=InMemoryStorage()).then(_step("fetch")).commit()
    with pytest.raises(RunStateError, match="ephemeral: it stores nothing to watch"):
        wf.create_run(ephemeral=True).watch()
    for bad in (0, -1, float("nan"), "1", True):
        with pytest.raises(ValueError, match="interval must be a number of seconds > 0"):
            [c async for c in wf.create_run("r").watch(interval=bad)]
    with pytest.raises(RunNotFoundError, match="run 'nope' of workflow 'orders' is not stored"):
        [c async for c in wf.create_run("nope").watch()]
