"""The run API: start, stream, statuses, validation, state, bail/abort, get_run."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from procflow import (
    RunNotFoundError,
    RunStateError,
    StepContext,
    StepExecutionError,
    StepValidationError,
    TripwireError,
    create_step,
    create_workflow,
    step,
)
from procflow.records import Tripwire
from procflow.storage import InMemoryStorage


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class In(BaseModel):
    value: int


class Out(BaseModel):
    value: int


@step(id="double", input_schema=In, output_schema=Out)
async def double(ctx: StepContext) -> Out:
    return Out(value=ctx.input_data.value * 2)


def s(id: str, fn: Any) -> Any:
    return create_step(id=id, execute=fn)


async def test_start_returns_typed_outputs() -> None:
    wf = create_workflow(id="typed", input_schema=In, output_schema=Out).then(double).commit()
    result = await wf.create_run().start(input_data={"value": 21})
    assert result.status == "success"
    assert result.result == Out(value=42)
    step_result = result.steps["double"]
    assert isinstance(step_result.output, Out)
    assert step_result.status == "success" and step_result.attempts == 1
    assert step_result.ended_at is not None and step_result.ended_at >= step_result.started_at


async def test_sync_and_async_steps_and_dict_outputs_are_coerced() -> None:
    wf = (create_workflow(id="mixed", input_schema=In, output_schema=Out)
          .then(s("sync", lambda ctx: {"value": ctx.input_data.value + 1}))
          .then(double).commit())
    result = await wf.create_run().start(input_data=In(value=1))
    assert result.result == Out(value=4)


async def test_wrong_input_type_fails_with_field_named() -> None:
    wf = create_workflow(id="typed", input_schema=In).then(double).commit()
    result = await wf.create_run().start(input_data={"value": "many"})
    assert result.status == "failed"
    assert isinstance(result.error, StepValidationError)
    assert result.error.field == "value" and result.error.workflow_id == "typed"
    assert "run input" in str(result.error) and "'value'" in str(result.error)
    assert result.steps == {}


async def test_wrong_step_output_fails_naming_step_and_field() -> None:
    bad = create_step(id="bad", execute=lambda ctx: {"value": "nope"}, output_schema=Out)
    wf = create_workflow(id="w").then(bad).then(s("after", lambda ctx: 1)).commit()
    result = await wf.create_run().start(input_data=None)
    assert result.status == "failed"
    err = result.error
    assert isinstance(err, StepValidationError)
    assert (err.workflow_id, err.step_id, err.field) == ("w", "bad", "value")
    assert result.steps["bad"].status == "failed"
    assert "after" not in result.steps


async def test_step_exception_is_wrapped_with_cause() -> None:
    def boom(ctx: StepContext) -> None:
        raise ValueError("kaput")

    wf = create_workflow(id="w").then(s("boom", boom)).commit()
    result = await wf.create_run().start()
    assert isinstance(result.error, StepExecutionError)
    assert isinstance(result.error.__cause__, ValueError)
    assert "step 'boom' failed: ValueError: kaput" in str(result.error)


async def test_start_twice_is_rejected() -> None:
    wf = create_workflow(id="w").then(s("a", lambda ctx: 1)).commit()
    run = wf.create_run()
    await run.start()
    with pytest.raises(RunStateError, match="cannot start: it is not new"):
        await run.start()


async def test_stream_yields_typed_events_in_order() -> None:
    wf = (create_workflow(id="ev").then(s("a", lambda ctx: 1))
          .branch([(lambda ctx: False, s("no", lambda ctx: 0)),
                   (lambda ctx: True, s("yes", lambda ctx: 2))]).commit())
    run = wf.create_run()
    async with run.stream(input_data=0) as events:
        seen = [(e.type, e.step_id) async for e in events]
    assert seen == [("run-start", None), ("step-start", "a"), ("step-result", "a"),
                    ("step-skipped", "no"), ("step-start", "yes"), ("step-result", "yes"),
                    ("run-finish", None)]
    assert events.result is not None and events.result.result == {"yes": 2}
    assert events.result.steps["no"].status == "skipped"


async def test_direct_iteration_and_custom_events() -> None:
    async def talk(ctx: StepContext) -> int:
        await ctx.emit("data-progress", {"pct": 50})
        return 1

    wf = create_workflow(id="w").then(s("talk", talk)).commit()
    events = [e async for e in wf.create_run().stream()]
    custom = [e for e in events if e.type == "custom"]
    assert custom[0].payload == {"type": "data-progress", "data": {"pct": 50}}
    assert custom[0].step_id == "talk"
    assert events[-1].payload["result"].status == "success"


async def test_leaving_the_stream_early_lets_the_run_finish() -> None:
    wf = create_workflow(id="w").then(s("a", lambda ctx: 1)).then(s("b", lambda ctx: 2)).commit()
    run = wf.create_run()
    async with run.stream() as events:
        async for _ in events:
            break
    assert run.last_result is not None and run.last_result.status == "success"


async def test_state_initial_set_and_get_step_result() -> None:
    def first(ctx: StepContext) -> int:
        ctx.set_state({**ctx.state, "seen": ["first"]})
        return 10

    def second(ctx: StepContext) -> Any:
        return (ctx.state["seen"], ctx.get_step_result("first"), ctx.get_init_data(),
                ctx.get_step_result("missing"))

    wf = create_workflow(id="w").then(s("first", first)).then(s("second", second)).commit()
    result = await wf.create_run().start(input_data="init", initial_state={"k": 1})
    assert result.result == (["first"], 10, "init", None)
    assert result.state == {"k": 1, "seen": ["first"]}


async def test_bail_ends_the_run_successfully() -> None:
    wf = (create_workflow(id="w").then(s("stop", lambda ctx: ctx.bail("early")))
          .then(s("never", lambda ctx: "late")).commit())
    result = await wf.create_run().start()
    assert (result.status, result.result) == ("success", "early")
    assert "never" not in result.steps


async def test_abort_ends_with_tripwire() -> None:
    def guard(ctx: StepContext) -> None:
        ctx.abort("not allowed", metadata={"rule": 7})

    wf = create_workflow(id="w").then(s("guard", guard)).commit()
    result = await wf.create_run().start()
    assert result.status == "tripwire"
    assert result.tripwire == Tripwire("not allowed", "guard", False, {"rule": 7})
    assert result.tripwire is not None and result.tripwire.reason == "not allowed"
    assert isinstance(result.error, TripwireError)


async def test_request_context_reaches_steps() -> None:
    wf = create_workflow(id="w").then(s("rc", lambda ctx: ctx.request_context["user"])).commit()
    result = await wf.create_run().start(request_context={"user": "ada"})
    assert result.result == "ada"


async def test_get_run_rebuilds_and_unknown_id_is_clear() -> None:
    storage = InMemoryStorage()
    wf = create_workflow(id="w", storage=storage).then(s("a", lambda ctx: 5)).commit()
    run = wf.create_run(run_id="r-1")
    await run.start()
    again = await wf.get_run("r-1")
    assert again.status == "success" and again.last_result is not None
    assert again.last_result.steps["a"].output == 5
    with pytest.raises(RunNotFoundError, match="no stored run 'nope'"):
        await wf.get_run("nope")


async def test_runs_are_listed_by_status() -> None:
    storage = InMemoryStorage()
    wf = create_workflow(id="listed", storage=storage).then(s("a", lambda ctx: 1)).commit()
    await wf.create_run(run_id="one").start()
    runs = await wf.list_runs(status="success")
    assert [r.run_id for r in runs] == ["one"]


async def test_default_storage_is_used_and_can_be_reset() -> None:
    from procflow import get_default_storage, set_default_storage

    storage = InMemoryStorage()
    set_default_storage(storage)
    try:
        wf = create_workflow(id="defaulted").then(s("a", lambda ctx: 1)).commit()
        run = wf.create_run()
        assert run.storage is storage and get_default_storage() is storage
    finally:
        set_default_storage(None)
    assert wf.create_run().storage is not storage
