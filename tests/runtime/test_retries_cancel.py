"""Retries with backoff, timeouts, and cancellation leaving no task behind."""

from __future__ import annotations

import time

import anyio
import pytest

from procflow import (
    RunStateError,
    StepContext,
    StepExecutionError,
    StepTimeoutError,
    create_step,
    create_workflow,
)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_retries_until_success_with_exponential_backoff() -> None:
    stamps: list[float] = []

    def flaky(ctx: StepContext) -> int:
        stamps.append(time.monotonic())
        assert ctx.retry_count == len(stamps) - 1
        if len(stamps) < 3:
            raise ConnectionError("try again")
        return 7

    wf = create_workflow(id="w", retry_delay=0.02).then(
        create_step(id="flaky", execute=flaky, retries=3)).commit()
    result = await wf.create_run().start()
    assert result.result == 7 and result.steps["flaky"].attempts == 3
    first_gap, second_gap = stamps[1] - stamps[0], stamps[2] - stamps[1]
    assert first_gap >= 0.02 and second_gap >= 0.04  # delay doubles


async def test_retries_exhausted_report_attempts() -> None:
    calls = 0

    def always(ctx: StepContext) -> None:
        nonlocal calls
        calls += 1
        raise ValueError("no")

    wf = create_workflow(id="w", retries=2, retry_delay=0).then(
        create_step(id="always", execute=always)).commit()
    result = await wf.create_run().start()
    assert calls == 3
    assert isinstance(result.error, StepExecutionError) and result.error.attempt == 3
    assert "after 3 attempts" in str(result.error)
    assert result.steps["always"].attempts == 3


async def test_step_retries_override_workflow_default() -> None:
    calls = 0

    def once(ctx: StepContext) -> None:
        nonlocal calls
        calls += 1
        raise ValueError("no")

    wf = create_workflow(id="w", retries=5, retry_delay=0).then(
        create_step(id="once", execute=once, retries=0)).commit()
    await wf.create_run().start()
    assert calls == 1


async def test_timeout_fails_the_step_and_is_retried() -> None:
    attempts = 0

    async def slow(ctx: StepContext) -> str:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            await anyio.sleep(5)
        return "second try"

    wf = create_workflow(id="w", retry_delay=0).then(
        create_step(id="slow", execute=slow, timeout=0.05, retries=1)).commit()
    result = await wf.create_run().start()
    assert result.result == "second try"


async def test_workflow_default_timeout() -> None:
    async def slow(ctx: StepContext) -> None:
        await anyio.sleep(5)

    wf = create_workflow(id="w", timeout=0.05).then(create_step(id="slow", execute=slow)).commit()
    result = await wf.create_run().start()
    assert result.status == "failed"
    assert isinstance(result.error, StepTimeoutError)
    assert "step 'slow' timed out after 0.05s" in str(result.error)


async def test_cancel_stops_running_steps_and_leaves_no_task() -> None:
    started = anyio.Event()
    finished: list[str] = []

    async def forever(ctx: StepContext) -> None:
        started.set()
        try:
            await anyio.sleep(30)
        finally:
            finished.append(ctx.step_id)

    wf = create_workflow(id="w").parallel([
        create_step(id="a", execute=forever), create_step(id="b", execute=forever),
    ]).then(create_step(id="never", execute=lambda ctx: 1)).commit()
    run = wf.create_run()
    async with anyio.create_task_group() as tg:
        results = []

        async def go() -> None:
            results.append(await run.start())

        tg.start_soon(go)
        await started.wait()
        await run.cancel()
    assert results[0].status == "canceled"
    assert sorted(finished) == ["a", "b"]  # both branches were torn down before start returned
    assert "never" not in results[0].steps
    stored = await wf.get_run(run.run_id)
    assert stored.status == "canceled"


async def test_cancel_before_start_and_of_a_suspended_run() -> None:
    async def wait(ctx: StepContext) -> None:
        await ctx.suspend()

    wf = create_workflow(id="w").then(create_step(id="wait", execute=wait)).commit()
    run = wf.create_run()
    await run.start()
    await run.cancel()
    assert (await wf.get_run(run.run_id)).status == "canceled"
    early = wf.create_run()
    await early.cancel()
    assert early.status == "canceled"
    with pytest.raises(RunStateError, match="status 'canceled'"):
        await early.start()


async def test_outer_cancellation_propagates_and_records_canceled() -> None:
    async def slow(ctx: StepContext) -> None:
        await anyio.sleep(30)

    wf = create_workflow(id="w").then(create_step(id="slow", execute=slow)).commit()
    run = wf.create_run()
    with anyio.move_on_after(0.05):
        await run.start()
    assert run.status == "canceled"
