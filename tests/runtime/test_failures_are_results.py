"""Failures are results: a storage failure ends the run "failed" with a ``StorageError``
(not an exception out of ``start()``); the builder refuses numbers it cannot use."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from procflow import StepContext, WorkflowDefinitionError, create_step, create_workflow
from procflow.errors import StorageError
from procflow.records import RunSnapshot, StepResult
from procflow.storage import SQLiteStorage


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class FailingOnce:
    """A SQLite storage whose ``fail_at``-th snapshot write fails (a lost connection)."""

    def __init__(self, inner: SQLiteStorage, fail_at: int) -> None:
        self.inner, self.fail_at, self.saves = inner, fail_at, 0

    async def save_snapshot(self, snapshot: RunSnapshot,
                            steps: Mapping[str, StepResult]) -> None:
        self.saves += 1
        if self.saves == self.fail_at:
            raise StorageError("the database went away")
        await self.inner.save_snapshot(snapshot, steps)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def three_steps(storage: Any) -> Any:
    def add(name: str) -> Any:
        return create_step(id=name, execute=lambda ctx: [*ctx.input_data, name])
    return create_workflow(id="w", storage=storage).then(add("a")).then(add("b")).then(
        add("c")).commit()


async def test_a_storage_failure_mid_run_is_a_failed_result(tmp_path: Path) -> None:
    async with SQLiteStorage(tmp_path / "r.db") as inner:
        storage = FailingOnce(inner, fail_at=3)
        result = await three_steps(storage).create_run("r").start(input_data=[])
        assert result.status == "failed"
        assert isinstance(result.error, StorageError)
        assert "went away" in str(result.error)
        stored = await inner.load_snapshot("w", "r")
        assert stored is not None and stored[0].status == "failed"  # best-effort write


async def test_a_storage_that_is_gone_fails_the_run_without_raising(tmp_path: Path) -> None:
    storage = SQLiteStorage(tmp_path / "r.db")

    async def close(ctx: StepContext) -> Any:
        await storage.aclose()
        return ctx.input_data

    wf = create_workflow(id="w", storage=storage).then(
        create_step(id="close", execute=close)).then(
        create_step(id="after", execute=lambda ctx: 1)).commit()
    result = await wf.create_run().start(input_data=0)
    assert result.status == "failed" and isinstance(result.error, StorageError)


def step(**numbers: Any) -> Any:
    return create_step(id="s", execute=lambda ctx: None, **numbers)


@pytest.mark.parametrize(("build", "argument"), [
    pytest.param(lambda: create_workflow(id="w", timeout=math.nan), "timeout", id="wf-timeout-nan"),
    pytest.param(lambda: create_workflow(id="w", timeout=math.inf), "timeout", id="wf-timeout-inf"),
    pytest.param(lambda: create_workflow(id="w", retries=-1), "retries", id="wf-retries"),
    pytest.param(lambda: create_workflow(id="w", retries=True), "retries", id="wf-retries-bool"),
    pytest.param(lambda: create_workflow(id="w", retry_delay=math.nan), "retry_delay",
                 id="wf-delay-nan"),
    pytest.param(lambda: step(timeout=math.nan), "timeout", id="step-timeout-nan"),
    pytest.param(lambda: step(timeout=0), "timeout", id="step-timeout-0"),
    pytest.param(lambda: step(retries=-2), "retries", id="step-retries"),
    pytest.param(lambda: create_workflow(id="w").sleep(math.nan), "seconds", id="sleep-nan"),
    pytest.param(lambda: create_workflow(id="w").sleep(-1), "seconds", id="sleep-negative"),
    pytest.param(lambda: create_workflow(id="w").foreach(step(), concurrency=0), "concurrency",
                 id="concurrency-0"),
    pytest.param(lambda: create_workflow(id="w").dowhile(step(), lambda c: False,
                                                         max_iterations=0),
                 "max_iterations", id="max-iterations-0"),
])
def test_the_builder_refuses_numbers_it_cannot_use(build: Any, argument: str) -> None:
    with pytest.raises(WorkflowDefinitionError, match=argument):
        build()


async def test_a_sleep_function_returning_nan_fails_the_run() -> None:
    wf = create_workflow(id="w").sleep(lambda ctx: math.nan).commit()
    result = await wf.create_run().start()
    assert result.status == "failed" and "finite number" in str(result.error)
