"""Ephemeral runs (``create_run(ephemeral=True, parent_span=...)``): transient runs
inside a library call keep nothing and nest their spans in the caller's trace."""

from __future__ import annotations

from typing import Any

import pytest

from procflow import RunNotFoundError, RunStateError, StepContext, create_workflow, step
from procflow.runtime import ParentSpan
from procflow.storage import InMemoryStorage


@step(id="inc")
async def inc(ctx: StepContext) -> int:
    return int(ctx.input_data) + 1


def _inner() -> Any:
    return create_workflow(id="inner").then(inc).commit()


async def test_an_ephemeral_run_keeps_no_snapshot() -> None:
    storage = InMemoryStorage()
    wf = create_workflow(id="eph", storage=storage).then(inc).commit()
    run = wf.create_run(ephemeral=True, tracing=False)
    result = await run.start(input_data=1)
    assert result.status == "success" and result.result == 2
    assert await storage.list_runs() == []
    with pytest.raises(RunNotFoundError):
        await wf.get_run(run.run_id)


async def test_an_ephemeral_run_refuses_cancel_and_storage() -> None:
    wf = _inner()
    with pytest.raises(ValueError, match="ephemeral"):
        wf.create_run(ephemeral=True, storage=InMemoryStorage())
    with pytest.raises(RunStateError, match="cannot be cancelled"):
        await wf.create_run(ephemeral=True).cancel()


async def test_parent_span_nests_the_runs_spans_in_the_callers_trace() -> None:
    storage = InMemoryStorage()
    inner = _inner()

    @step(id="outer-step")
    async def outer_step(ctx: StepContext) -> int:
        run = inner.create_run(ephemeral=True, tracing=False,
                               parent_span=ParentSpan.of(ctx.tracer, ctx.span))
        return int((await run.start(input_data=ctx.input_data)).result)

    outer = create_workflow(id="outer", storage=storage).then(outer_step).commit()
    run = outer.create_run()
    assert (await run.start(input_data=1)).result == 2
    trace = await storage.load_trace(run.run_id)
    assert trace is not None
    rows = {row["name"]: row for row in trace.spans}
    assert rows["inner"]["parent_id"] == rows["outer-step"]["span_id"]
    assert rows["inc"]["parent_id"] == rows["inner"]["span_id"]
    assert [r.workflow_id for r in await storage.list_runs()] == ["outer"]


def test_parent_span_of_an_untraced_caller_is_none() -> None:
    assert ParentSpan.of(None, None) is None
