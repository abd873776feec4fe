"""The ``Storage`` contract, run against every backend (memory, SQLite, Redis)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from procflow.runtime.results import RunSnapshot, RunStatus, StepResult
from procflow.storage import InMemoryStorage, RedisStorage, SQLiteStorage, Storage

StorageFactory = Callable[[], Storage]


@pytest.fixture(params=["memory", "sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def storage_factory(request: pytest.FixtureRequest, tmp_path: Path) -> StorageFactory:
    if request.param == "memory":
        return InMemoryStorage
    if request.param == "sqlite":
        return lambda: SQLiteStorage(tmp_path / "nested" / "procflow.db")
    url = request.getfixturevalue("redis_url")
    prefix = request.getfixturevalue("redis_prefix")
    return lambda: RedisStorage(url, prefix=prefix)


@pytest.fixture
async def storage(storage_factory: StorageFactory) -> AsyncIterator[Storage]:
    instance = storage_factory()
    try:
        yield instance
    finally:
        await instance.aclose()


def header(run_id: str = "run-1", *, workflow_id: str = "wf", status: RunStatus = "running",
           updated_at: float = 100.0, **fields: Any) -> RunSnapshot:
    return RunSnapshot(workflow_id=workflow_id, run_id=run_id, status=status,
                       created_at=50.0, updated_at=updated_at, **fields)


def done(output: Any) -> StepResult:
    return StepResult(status="success", output=output, started_at=1.0, ended_at=2.0)


async def test_every_backend_satisfies_the_protocol(storage: Storage) -> None:
    assert isinstance(storage, Storage)


async def test_load_of_an_unknown_run_is_none(storage: Storage) -> None:
    assert await storage.load_snapshot("wf", "missing") is None


async def test_round_trip_of_header_and_steps(storage: Storage) -> None:
    snapshot = header(
        status="suspended", input={"value": 2, "tags": ["a", "b"]}, state={"count": 3},
        suspended=[["outer", "inner"]], tripwire=None,
        request_context={"resource_id": "user-1"},
    )
    steps = {
        "double": done({"value": 4}),
        "outer.inner": StepResult(status="suspended", started_at=2.0, attempts=2,
                                  suspend_payload={"ask": "ok?"}, resume_data=None),
        "each": StepResult(status="suspended", started_at=3.0, partial={0: "x", 2: "z"},
                           iterations=4),
    }
    await storage.save_snapshot(snapshot, steps)

    loaded = await storage.load_snapshot("wf", "run-1")

    assert loaded == (snapshot, steps)
    assert loaded is not None and loaded[1]["each"].partial == {0: "x", 2: "z"}


async def test_saving_some_steps_keeps_the_others(storage: Storage) -> None:
    await storage.save_snapshot(header(), {"a": done(1), "b": done(2)})

    await storage.save_snapshot(header(status="success", updated_at=101.0, result=3),
                                {"b": done(20), "c": done(30)})

    loaded = await storage.load_snapshot("wf", "run-1")
    assert loaded is not None
    snapshot, steps = loaded
    assert (snapshot.status, snapshot.result, snapshot.updated_at) == ("success", 3, 101.0)
    assert steps == {"a": done(1), "b": done(20), "c": done(30)}


async def test_list_runs_is_newest_first(storage: Storage) -> None:
    for run_id, updated_at in [("r1", 10.0), ("r2", 30.0), ("r3", 20.0)]:
        await storage.save_snapshot(header(run_id, updated_at=updated_at), {})

    runs = await storage.list_runs()

    assert [run.run_id for run in runs] == ["r2", "r3", "r1"]


async def test_list_runs_follows_updates(storage: Storage) -> None:
    await storage.save_snapshot(header("r1", updated_at=10.0), {})
    await storage.save_snapshot(header("r2", updated_at=20.0), {})

    await storage.save_snapshot(header("r1", updated_at=30.0, status="success"), {})

    assert [run.run_id for run in await storage.list_runs()] == ["r1", "r2"]


async def test_list_runs_filters_by_workflow_status_and_limit(storage: Storage) -> None:
    await storage.save_snapshot(header("r1", workflow_id="a", status="success",
                                       updated_at=1.0), {})
    await storage.save_snapshot(header("r2", workflow_id="a", status="failed",
                                       updated_at=2.0), {})
    await storage.save_snapshot(header("r3", workflow_id="b", status="success",
                                       updated_at=3.0), {})
    await storage.save_snapshot(header("r4", workflow_id="a", status="success",
                                       updated_at=4.0), {})

    by_workflow = await storage.list_runs(workflow_id="a")
    by_status = await storage.list_runs(status="success")
    both = await storage.list_runs(workflow_id="a", status="success", limit=1)

    assert [run.run_id for run in by_workflow] == ["r4", "r2", "r1"]
    assert [run.run_id for run in by_status] == ["r4", "r3", "r1"]
    assert [run.run_id for run in both] == ["r4"]
    assert await storage.list_runs(workflow_id="nope") == []
    assert await storage.list_runs(limit=0) == []


async def test_delete_run_forgets_header_and_steps(storage: Storage) -> None:
    await storage.save_snapshot(header("r1"), {"a": done(1)})
    await storage.save_snapshot(header("r2"), {"a": done(2)})

    await storage.delete_run("wf", "r1")
    await storage.delete_run("wf", "never-stored")

    assert await storage.load_snapshot("wf", "r1") is None
    assert [run.run_id for run in await storage.list_runs()] == ["r2"]
    await storage.save_snapshot(header("r1"), {})
    assert await storage.load_snapshot("wf", "r1") == (header("r1"), {})


async def test_claim_run_is_compare_and_set(storage: Storage) -> None:
    await storage.save_snapshot(header(status="suspended"), {"a": done(1)})

    first = await storage.claim_run("wf", "run-1", expected="suspended", new="running")
    second = await storage.claim_run("wf", "run-1", expected="suspended", new="running")

    assert (first, second) == (True, False)
    loaded = await storage.load_snapshot("wf", "run-1")
    assert loaded is not None
    assert loaded[0] == header(status="running")
    assert loaded[1] == {"a": done(1)}
    assert [run.status for run in await storage.list_runs(status="running")] == ["running"]
    assert await storage.list_runs(status="suspended") == []


async def test_claim_of_an_unknown_run_is_false(storage: Storage) -> None:
    assert not await storage.claim_run("wf", "missing", expected="suspended", new="running")


async def test_ids_with_separators_do_not_collide(storage: Storage) -> None:
    await storage.save_snapshot(header("c", workflow_id="a:b"), {"s": done("first")})
    await storage.save_snapshot(header("b:c", workflow_id="a"), {"s": done("second")})

    first = await storage.load_snapshot("a:b", "c")
    second = await storage.load_snapshot("a", "b:c")

    assert first is not None and first[1] == {"s": done("first")}
    assert second is not None and second[1] == {"s": done("second")}
    assert [run.run_id for run in await storage.list_runs(workflow_id="a")] == ["b:c"]
