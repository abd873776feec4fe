"""``Run`` is one class holding collaborators, and who holds it is one value (``RunMode``)
that decides whether an execution takes a lease and whether ``cancel()`` accepts it."""

from __future__ import annotations

from pathlib import Path

import pytest

from procflow import Run, RunStateError, StepContext, create_step, create_workflow
from procflow.runtime import RunMode
from procflow.storage import SQLiteStorage


def test_run_is_one_class_without_procflow_ancestors() -> None:
    ancestors = [cls for cls in Run.__mro__ if cls.__module__.startswith("procflow")]
    assert ancestors == [Run]
    assert len(Run.__mro__) <= 3  # (Run, Generic, object)


def test_the_mode_is_one_value() -> None:
    wf = create_workflow(id="m").then(create_step(id="s", execute=lambda c: 1)).commit()
    shared, ephemeral = wf.create_run(), wf.create_run(ephemeral=True)
    assert shared.mode is RunMode.SHARED and ephemeral.mode is RunMode.EPHEMERAL
    for run in (shared, ephemeral):
        flags = {k for k, v in vars(run).items() if isinstance(v, bool)}
        assert not flags & {"private", "internal", "ephemeral"}


async def _lease_seen_by_the_step(tmp_path: Path, mode: RunMode) -> bool:
    storage = SQLiteStorage(tmp_path / f"{mode.value}.sqlite")
    seen: list[bool] = []

    async def look(ctx: StepContext) -> int:
        seen.append(await storage.get_lease("w", ctx.run_id) is not None)
        return 1

    wf = create_workflow(id="w", storage=storage).then(create_step(id="s", execute=look))
    run = wf.commit().create_run()
    run.mode = mode
    assert (await run.start()).status == "success"
    await storage.aclose()
    return seen == [True]


async def test_a_shared_run_holds_a_lease_and_a_private_one_none(tmp_path: Path) -> None:
    assert await _lease_seen_by_the_step(tmp_path, RunMode.SHARED)
    assert not await _lease_seen_by_the_step(tmp_path, RunMode.PRIVATE)


async def test_private_is_a_deprecated_spelling_of_the_mode() -> None:
    run = create_workflow(id="p").then(create_step(id="s", execute=lambda c: 1)).commit() \
        .create_run()
    with pytest.warns(DeprecationWarning, match="RunMode.PRIVATE"):
        run.private = True
    assert run.mode is RunMode.PRIVATE
    with pytest.warns(DeprecationWarning):
        assert run.private
    await run.cancel()  # a private run not executing can be cancelled: it is marked so
    assert run.status == "canceled"
    run.mode = RunMode.EPHEMERAL
    with pytest.raises(RunStateError, match="cannot be cancelled on its own"):
        await run.cancel()
