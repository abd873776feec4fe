"""Refuse before writing (issue 42): resume data the storage cannot keep is refused
before the run is claimed, so the run stays suspended at the same step and a later
resume with good data succeeds; text UTF-8 cannot encode (lone surrogates) is refused
naming the step and the path, never with a raw serialization error."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from procflow import create_step, create_workflow
from procflow.errors import StepValidationError
from procflow.storage import RedisStorage, SQLiteStorage
from procflow.storage.base import Storage


class Money:
    """A type no storage knows (not registered)."""

    def __init__(self, cents: int) -> None:
        self.cents = cents


async def approve(ctx: Any) -> Any:
    if ctx.resume_data is None:
        await ctx.suspend({"question": "approve?"})
    return {"approved": ctx.resume_data["ok"]}


@pytest.fixture(params=["sqlite", "redis"])
async def storage(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Storage]:
    if request.param == "sqlite":
        async with SQLiteStorage(tmp_path / "runs.db") as sqlite:
            yield sqlite
    else:
        url = request.getfixturevalue("redis_url")
        prefix = request.getfixturevalue("redis_prefix")
        async with RedisStorage(url, prefix=prefix) as redis:
            yield redis


def _approval(storage: Storage) -> Any:
    return (create_workflow(id="approval", storage=storage)
            .then(create_step(id="prepare", execute=lambda ctx: ctx.input_data))
            .then(create_step(id="approve", execute=approve)).commit())


@pytest.mark.parametrize(("data", "field"), [
    pytest.param({"ok": Money(1)}, "resume_data.ok", id="unknown-type"),
    pytest.param({"ok": "yes \udcff"}, "resume_data.ok", id="lone-surrogate"),
    pytest.param({"ok": True, "note \udcff": 1}, "resume_data['note \\udcff']",
                 id="surrogate-key"),
])
async def test_a_refused_resume_leaves_the_run_suspended(storage: Storage, data: Any,
                                                         field: str) -> None:
    wf = _approval(storage)
    run = wf.create_run("r1")
    first = await run.start(input_data=5)
    assert first.status == "suspended"

    with pytest.raises(StepValidationError) as caught:
        await run.resume(step="approve", resume_data=data)

    assert caught.value.field == field and caught.value.step_id == "approve"
    assert "cannot keep" in str(caught.value) and "Nothing was written" in str(caught.value)
    assert run.status == "suspended"
    loaded = await storage.load_snapshot("approval", "r1")
    assert loaded is not None
    assert loaded[0].status == "suspended" and loaded[0].suspended == [["approve"]]
    # a reloaded run resumes with good data, at the same step
    done = await (await wf.get_run("r1")).resume(step="approve", resume_data={"ok": True})
    assert done.status == "success" and done.result == {"approved": True}


async def test_a_lone_surrogate_in_an_output_names_the_step_and_the_path(
        storage: Storage) -> None:
    wf = (create_workflow(id="names", storage=storage)
          .then(create_step(id="list", execute=lambda ctx: {"files": ["ok", "bad \udcff"]}))
          .commit())

    result = await wf.create_run().start(input_data=None)

    assert result.status == "failed" and isinstance(result.error, StepValidationError)
    assert result.error.step_id == "list" and result.error.field == "output.files[1]"
    assert "lone surrogate" in str(result.error)


async def test_a_lone_surrogate_as_run_input_is_a_clear_refusal(storage: Storage) -> None:
    wf = _approval(storage)

    result = await wf.create_run().start(input_data="ok \udcff")

    assert result.status == "failed" and isinstance(result.error, StepValidationError)
    assert result.error.field == "input" and "lone surrogate" in str(result.error)


async def test_an_error_message_with_a_lone_surrogate_is_stored_escaped(
        storage: Storage) -> None:
    def fail(ctx: Any) -> None:
        raise ValueError("cannot open bad\udcff.txt")

    wf = create_workflow(id="oops", storage=storage).then(
        create_step(id="open", execute=fail)).commit()
    result = await wf.create_run("r2").start(input_data=None)

    stored = await storage.load_snapshot("oops", "r2")
    trace = await storage.load_trace("r2")
    assert result.status == "failed" and "bad\udcff.txt" in str(result.error)  # in memory
    assert stored is not None and stored[0].status == "failed"
    assert "bad\\udcff.txt" in str(stored[0].error)  # stored escaped
    assert trace is not None and trace.spans
