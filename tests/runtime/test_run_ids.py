"""A run id the caller chose never replaces a run already stored under it."""

from __future__ import annotations

from pathlib import Path

import pytest

from procflow import RunStateError, StepContext, create_step, create_workflow
from procflow.runtime.executors import LocalExecutor
from procflow.storage import InMemoryStorage, SQLiteStorage, Storage


def double_wf(storage: Storage):  # type: ignore[no-untyped-def]
    return (create_workflow(id="double", storage=storage)
            .then(create_step(id="double", execute=lambda ctx: ctx.input_data * 2))
            .commit())


@pytest.fixture(params=["memory", "sqlite"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    if request.param == "memory":
        return InMemoryStorage()
    return SQLiteStorage(tmp_path / "runs.db")


async def test_starting_a_stored_run_id_again_is_refused(storage: Storage) -> None:
    wf = double_wf(storage)
    first = await wf.create_run("order-7").start(input_data=2)
    assert first.result == 4

    with pytest.raises(RunStateError, match=r"cannot start run 'order-7' of workflow "
                       r"'double': a run with that id is already stored \(status 'success'\)"):
        await wf.create_run("order-7").start(input_data=50)

    kept = (await wf.get_run("order-7")).last_result
    assert kept is not None and kept.status == "success" and kept.result == 4
    # another workflow may use the same id; a random id is never looked up
    other = create_workflow(id="other", storage=storage).then(
        create_step(id="s", execute=lambda ctx: 1)).commit()
    assert (await other.create_run("order-7").start()).status == "success"
    assert (await wf.create_run().start(input_data=1)).result == 2


async def test_a_suspended_run_cannot_be_started_over_either(storage: Storage) -> None:
    async def wait(ctx: StepContext) -> str:
        if ctx.resume_data is None:
            await ctx.suspend({"ask": "ok?"})
        return "approved"

    wf = create_workflow(id="approve", storage=storage).then(
        create_step(id="wait", execute=wait)).commit()
    await wf.create_run("a1").start()
    with pytest.raises(RunStateError, match="status 'suspended'"):
        await wf.create_run("a1").start()
    resumed = await (await wf.get_run("a1")).resume(resume_data=True)
    assert resumed.status == "success" and resumed.result == "approved"


async def test_replay_and_submit_into_a_stored_id_are_refused(storage: Storage) -> None:
    wf = double_wf(storage)
    await wf.create_run("r1").start(input_data=3)
    await wf.create_run("r2").start(input_data=4)
    stored = await wf.get_run("r1")

    with pytest.raises(RunStateError, match="cannot replay into run 'r2'"):
        await stored.replay_from("double", run_id="r2")
    kept = (await wf.get_run("r2")).last_result
    assert kept is not None and kept.result == 8
    again = await stored.replay_from("double", run_id="r3")
    assert again.status == "success"

    async with LocalExecutor() as executor:
        with pytest.raises(RunStateError, match="cannot start run 'r1'"):
            await wf.create_run("r1").submit(5, executor=executor)
