"""Suspend and resume: plain, nested, parallel, foreach; errors for bad resumes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from procflow import (
    RunNotSuspendedError,
    RunStateError,
    StepContext,
    StepValidationError,
    create_step,
    create_workflow,
)
from procflow.storage import InMemoryStorage, SQLiteStorage


class Approval(BaseModel):
    ok: bool


def counted(id: str, calls: dict[str, int], fn: Any = None) -> Any:
    async def run(ctx: StepContext) -> Any:
        calls[id] = calls.get(id, 0) + 1
        return fn(ctx) if fn else ctx.input_data
    return create_step(id=id, execute=run)


def gate(id: str, calls: dict[str, int]) -> Any:
    async def run(ctx: StepContext) -> Any:
        calls[id] = calls.get(id, 0) + 1
        if ctx.resume_data is None:
            await ctx.suspend({"ask": id})
        return f"{id}:{ctx.resume_data.ok}"
    return create_step(id=id, execute=run, resume_schema=Approval)


async def test_suspend_then_resume_continues_after_the_step() -> None:
    calls: dict[str, int] = {}
    wf = (create_workflow(id="w").then(counted("before", calls)).then(gate("gate", calls))
          .then(counted("after", calls)).commit())
    run = wf.create_run()
    first = await run.start(input_data="x")
    assert first.status == "suspended" and first.suspended == [["gate"]]
    assert first.steps["gate"].suspend_payload == {"ask": "gate"}
    assert "after" not in first.steps
    done = await run.resume(step="gate", resume_data={"ok": True})
    assert done.status == "success" and done.result == "gate:True"
    assert calls == {"before": 1, "gate": 2, "after": 1}
    assert done.steps["gate"].resume_data == Approval(ok=True)


async def test_resume_without_step_picks_the_only_suspended_one(tmp_path: Path) -> None:
    calls: dict[str, int] = {}
    async with SQLiteStorage(tmp_path / "runs.db") as storage:
        wf = create_workflow(id="w", storage=storage).then(gate("gate", calls)).commit()
        run = wf.create_run()
        await run.start()
        fresh = await wf.get_run(run.run_id)  # what a new process does
        assert fresh.status == "suspended"
        assert (await fresh.resume(resume_data={"ok": False})).result == "gate:False"


async def test_nested_suspend_resumes_the_inner_step_not_the_outer_start() -> None:
    calls: dict[str, int] = {}
    inner = (create_workflow(id="inner").then(counted("i1", calls)).then(gate("i2", calls))
             .then(counted("i3", calls)).commit())
    wf = create_workflow(id="outer").then(counted("o1", calls)).then(inner).commit()
    run = wf.create_run()
    first = await run.start(input_data=1)
    assert first.suspended == [["inner", "i2"]] and first.suspended_at == ["inner.i2"]
    assert first.steps["inner"].status == "suspended"
    done = await run.resume(step=["inner", "i2"], resume_data={"ok": True})
    assert done.status == "success" and done.result == "i2:True"
    assert calls == {"o1": 1, "i1": 1, "i2": 2, "i3": 1}
    assert done.steps["inner"].status == "success"


async def test_resume_by_short_name_of_nested_step() -> None:
    calls: dict[str, int] = {}
    inner = create_workflow(id="inner").then(gate("deep", calls)).commit()
    wf = create_workflow(id="outer").then(inner).commit()
    run = wf.create_run()
    await run.start()
    assert (await run.resume(step="deep", resume_data={"ok": True})).status == "success"


async def test_parallel_branches_suspend_and_resume_one_by_one() -> None:
    calls: dict[str, int] = {}
    wf = (create_workflow(id="w").parallel([gate("left", calls), gate("right", calls),
                                            counted("plain", calls)]).commit())
    run = wf.create_run()
    first = await run.start(input_data=0)
    assert sorted(first.suspended) == [["left"], ["right"]]
    with pytest.raises(RunStateError, match="2 suspended steps"):
        await run.resume(resume_data={"ok": True})
    half = await run.resume(step="left", resume_data={"ok": True})
    assert half.status == "suspended" and half.suspended == [["right"]]
    done = await run.resume(step="right", resume_data={"ok": False})
    assert done.result == {"left": "left:True", "right": "right:False", "plain": 0}
    assert calls == {"left": 2, "right": 2, "plain": 1}  # right did not re-run for left


async def test_foreach_item_suspends_and_resumes_by_index() -> None:
    ran: list[int] = []

    async def item(ctx: StepContext) -> int:
        ran.append(ctx.input_data)
        if ctx.input_data == 2 and ctx.resume_data is None:
            await ctx.suspend({"item": 2})
        return int(ctx.input_data) * 10

    wf = create_workflow(id="w").foreach(create_step(id="item", execute=item)).commit()
    run = wf.create_run()
    first = await run.start(input_data=[1, 2, 3])
    assert first.status == "suspended" and first.suspended == [["item[1]"]]
    done = await run.resume(step="item", resume_data="go")
    assert done.result == [10, 20, 30]
    assert ran == [1, 2, 2, 3]  # item 1 was not re-run


async def test_resume_of_a_run_that_is_not_suspended() -> None:
    wf = create_workflow(id="w").then(create_step(id="a", execute=lambda ctx: 1)).commit()
    run = wf.create_run()
    await run.start()
    with pytest.raises(RunNotSuspendedError, match="is not suspended \\(status 'success'\\)"):
        await run.resume(step="a")


async def test_resume_of_a_step_that_is_not_suspended() -> None:
    calls: dict[str, int] = {}
    wf = create_workflow(id="w").then(counted("a", calls)).then(gate("g", calls)).commit()
    run = wf.create_run()
    await run.start()
    with pytest.raises(RunNotSuspendedError, match=r"step 'a' .* suspended steps: \['g'\]"):
        await run.resume(step="a", resume_data={"ok": True})


async def test_invalid_resume_data_is_rejected_and_run_stays_suspended() -> None:
    calls: dict[str, int] = {}
    wf = create_workflow(id="w").then(gate("g", calls)).commit()
    run = wf.create_run()
    await run.start()
    with pytest.raises(StepValidationError, match="resume data") as err:
        await run.resume(step="g", resume_data={"ok": "perhaps"})
    assert err.value.field == "ok"
    assert run.status == "suspended"
    assert (await run.resume(step="g", resume_data={"ok": True})).status == "success"


async def test_two_resumes_of_one_stored_run_cannot_both_run() -> None:
    storage = InMemoryStorage()
    calls: dict[str, int] = {}
    wf = create_workflow(id="w", storage=storage).then(gate("g", calls)).commit()
    run = wf.create_run()
    await run.start()
    one = await wf.get_run(run.run_id)
    two = await wf.get_run(run.run_id)
    await one.resume(resume_data={"ok": True})
    with pytest.raises(RunStateError, match="no longer suspended in storage"):
        await two.resume(resume_data={"ok": True})
    assert calls["g"] == 2


async def test_durability_exit_persists_on_suspend_only() -> None:
    storage = InMemoryStorage()
    calls: dict[str, int] = {}
    wf = create_workflow(id="w", storage=storage).then(counted("a", calls)).then(
        gate("g", calls)).commit()
    run = wf.create_run(durability="exit")
    await run.start()
    loaded = await storage.load_snapshot("w", run.run_id)
    assert loaded is not None and loaded[0].status == "suspended"
    assert set(loaded[1]) == {"a", "g"}


async def test_a_resumed_step_reads_the_payload_it_suspended_with(tmp_path: Path) -> None:
    async def ask(ctx: StepContext) -> Any:
        if ctx.resume_data is None:
            assert ctx.suspend_payload is None
            await ctx.suspend({"ticket": 17})
        return {"ticket": ctx.suspend_payload["ticket"], "answer": ctx.resume_data}

    async with SQLiteStorage(tmp_path / "runs.db") as storage:
        wf = create_workflow(id="ask", storage=storage).then(
            create_step(id="ask", execute=ask)).commit()
        first = await wf.create_run("t").start()
        assert first.status == "suspended"
        done = await (await wf.get_run("t")).resume(resume_data="yes")
    assert done.result == {"ticket": 17, "answer": "yes"}
