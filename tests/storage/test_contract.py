"""The ``Storage`` contract, run against every backend (memory, SQLite, Redis, PostgreSQL)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from procflow.errors import SnapshotCorruptedError
from procflow.runtime.results import RunSnapshot, RunStatus, StepResult
from procflow.runtime.tracing import Tracer, TraceRecord
from procflow.storage import (
    InMemoryStorage,
    PostgresStorage,
    PrunedRun,
    RedisStorage,
    SQLiteStorage,
    Storage,
    prune_runs,
)

StorageFactory = Callable[[], Storage]


@pytest.fixture(params=["memory", "sqlite", pytest.param("redis", marks=pytest.mark.redis),
                        pytest.param("postgres", marks=pytest.mark.postgres)])
def storage_factory(request: pytest.FixtureRequest, tmp_path: Path) -> StorageFactory:
    if request.param == "memory":
        return InMemoryStorage
    if request.param == "sqlite":
        return lambda: SQLiteStorage(tmp_path / "nested" / "procflow.db")
    if request.param == "postgres":
        dsn = request.getfixturevalue("postgres_dsn")
        schema = request.getfixturevalue("postgres_schema")
        return lambda: PostgresStorage(dsn, schema=schema)
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


def span(span_id: str, parent_id: str | None = None, **fields: Any) -> dict[str, Any]:
    return {"span_id": span_id, "parent_id": parent_id, "name": f"span {span_id}",
            "kind": "step", "path": None, "start": 100.0, "end": 101.5, "status": "success",
            "input": None, "output": None, "error": None, "attributes": {}, **fields}


def trace(run_id: str = "run-1", *, workflow_id: str = "wf", status: str = "success",
          started_at: float = 100.0, ended_at: float | None = 102.0,
          spans: list[dict[str, Any]] | None = None) -> TraceRecord:
    return TraceRecord(run_id, workflow_id, status, started_at, ended_at,
                       [span("1", kind="run")] if spans is None else spans)


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


async def test_a_free_lease_is_taken_and_read_back(storage: Storage) -> None:
    lease = await storage.acquire_lease("wf", "run-1", owner="a", ttl=30)

    assert lease is not None and lease.owner == "a"
    held = await storage.get_lease("wf", "run-1")
    assert held is not None and held.owner == "a"
    assert held.expires_at == pytest.approx(lease.expires_at, abs=1.0)


async def test_a_live_lease_refuses_other_owners_and_renews_for_its_own(
        storage: Storage) -> None:
    await storage.acquire_lease("wf", "run-1", owner="a", ttl=30)

    assert await storage.acquire_lease("wf", "run-1", owner="b", ttl=30) is None
    renewed = await storage.acquire_lease("wf", "run-1", owner="a", ttl=60)
    assert renewed is not None and renewed.owner == "a"
    held = await storage.get_lease("wf", "run-1")
    assert held is not None and held.owner == "a"


async def test_a_released_lease_is_free_and_only_its_owner_releases(storage: Storage) -> None:
    await storage.acquire_lease("wf", "run-1", owner="a", ttl=30)

    await storage.release_lease("wf", "run-1", owner="b")
    assert (await storage.get_lease("wf", "run-1")) is not None
    await storage.release_lease("wf", "run-1", owner="a")

    assert await storage.get_lease("wf", "run-1") is None
    assert await storage.acquire_lease("wf", "run-1", owner="b", ttl=30) is not None


async def test_an_expired_lease_is_gone_and_anyone_takes_it(storage: Storage) -> None:
    await storage.acquire_lease("wf", "run-1", owner="a", ttl=0.05)
    await anyio.sleep(0.2)

    assert await storage.get_lease("wf", "run-1") is None
    taken = await storage.acquire_lease("wf", "run-1", owner="b", ttl=30)
    assert taken is not None and taken.owner == "b"


async def test_a_lease_is_stolen_only_from_the_named_holder(storage: Storage) -> None:
    await storage.acquire_lease("wf", "run-1", owner="dead", ttl=30)

    assert await storage.acquire_lease("wf", "run-1", owner="b", ttl=30,
                                       steal_from="someone-else") is None
    stolen = await storage.acquire_lease("wf", "run-1", owner="b", ttl=30, steal_from="dead")
    assert stolen is not None and stolen.owner == "b"
    assert await storage.acquire_lease("wf", "run-1", owner="c", ttl=30,
                                       steal_from="dead") is None


async def test_leases_are_per_run(storage: Storage) -> None:
    await storage.acquire_lease("wf", "run-1", owner="a", ttl=30)

    assert await storage.acquire_lease("wf", "run-2", owner="b", ttl=30) is not None
    assert await storage.acquire_lease("other", "run-1", owner="b", ttl=30) is not None


async def test_a_start_is_saved_with_its_lease_and_only_if_it_is_taken(
        storage: Storage) -> None:
    lease = await storage.acquire_and_save(header("r1"), {"a": done(1)}, owner="a", ttl=30)

    assert lease is not None and lease.owner == "a"
    held = await storage.get_lease("wf", "r1")
    assert held is not None and held.owner == "a"
    loaded = await storage.load_snapshot("wf", "r1")
    assert loaded is not None and loaded[1]["a"].output == 1

    refused = await storage.acquire_and_save(header("r1", status="failed"), {"b": done(2)},
                                             owner="b", ttl=30)
    assert refused is None
    loaded = await storage.load_snapshot("wf", "r1")
    assert loaded is not None and loaded[0].status == "running" and "b" not in loaded[1]


async def test_an_end_is_saved_with_its_trace_and_releases_the_lease(
        storage: Storage) -> None:
    await storage.acquire_lease("wf", "r1", owner="a", ttl=30)

    await storage.save_and_release(header("r1", status="success"), {"a": done(1)},
                                   trace=trace("r1"), owner="a")

    loaded = await storage.load_snapshot("wf", "r1")
    assert loaded is not None and loaded[0].status == "success"
    assert loaded[1]["a"].output == 1
    stored = await storage.load_trace("r1")
    assert stored is not None and stored.status == "success"
    assert await storage.get_lease("wf", "r1") is None


async def test_an_end_leaves_another_owners_lease_and_may_omit_parts(
        storage: Storage) -> None:
    await storage.acquire_lease("wf", "r1", owner="b", ttl=30)

    await storage.save_and_release(header("r1", status="failed"), {}, trace=None, owner="a")
    await storage.save_and_release(header("r2", status="success"), {}, trace=None,
                                   owner=None)

    held = await storage.get_lease("wf", "r1")
    assert held is not None and held.owner == "b"
    assert await storage.load_trace("r1") is None
    loaded = await storage.load_snapshot("wf", "r2")
    assert loaded is not None and loaded[0].status == "success"


async def test_deleting_a_run_drops_its_trace(storage: Storage) -> None:
    await storage.save_snapshot(header("r1"), {"a": done(1)})
    await storage.save_trace(trace("r1"))
    await storage.save_snapshot(header("r2"), {})
    await storage.save_trace(trace("r2"))
    await storage.save_trace(trace("mine", workflow_id="other"))

    await storage.delete_run("wf", "r1")
    await storage.delete_run("wf", "mine")  # that run id's trace belongs to "other"

    assert await storage.load_trace("r1") is None
    assert sorted(t.run_id for t in await storage.list_traces()) == ["mine", "r2"]
    assert [t.run_id for t in await storage.list_traces(workflow_id="wf")] == ["r2"]
    assert (await storage.load_trace("mine")) is not None
    assert (await storage.load_trace("r2")) is not None


async def test_deleting_a_run_drops_its_lease(storage: Storage) -> None:
    await storage.save_snapshot(header(), {})
    await storage.acquire_lease("wf", "run-1", owner="a", ttl=30)

    await storage.delete_run("wf", "run-1")

    assert await storage.get_lease("wf", "run-1") is None


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf"), "5", True])
async def test_a_bad_lease_ttl_is_refused(storage: Storage, ttl: Any) -> None:
    with pytest.raises(ValueError, match="lease ttl"):
        await storage.acquire_lease("wf", "run-1", owner="a", ttl=ttl)


async def test_of_many_concurrent_takers_exactly_one_wins(
        storage_factory: StorageFactory) -> None:
    first = storage_factory()
    # Separate connections, as separate processes have (memory: one shared instance).
    shared = isinstance(first, InMemoryStorage)
    stores = [first, *(first if shared else storage_factory() for _ in range(7))]
    wins: list[str] = []

    async def take(i: int, store: Storage) -> None:
        if await store.acquire_lease("wf", "run-1", owner=f"owner-{i}", ttl=30) is not None:
            wins.append(f"owner-{i}")

    try:
        async with anyio.create_task_group() as tg:
            for i, store in enumerate(stores):
                tg.start_soon(take, i, store)
        assert len(wins) == 1
        held = await stores[0].get_lease("wf", "run-1")
        assert held is not None and held.owner == wins[0]
    finally:
        for store in dict.fromkeys(stores):
            await store.aclose()


async def test_ids_with_separators_do_not_collide(storage: Storage) -> None:
    await storage.save_snapshot(header("c", workflow_id="a:b"), {"s": done("first")})
    await storage.save_snapshot(header("b:c", workflow_id="a"), {"s": done("second")})

    first = await storage.load_snapshot("a:b", "c")
    second = await storage.load_snapshot("a", "b:c")

    assert first is not None and first[1] == {"s": done("first")}
    assert second is not None and second[1] == {"s": done("second")}
    assert [run.run_id for run in await storage.list_runs(workflow_id="a")] == ["b:c"]


async def test_trace_round_trip(storage: Storage) -> None:
    record = trace(status="failed", ended_at=None, spans=[
        span("1", kind="run", input={"value": 2, "tags": ["a", "é"]}, status="failed",
             error="ValueError: boom", attributes={"retries": 2}),
        span("2", "1", path="outer.inner", output={"truncated": True, "chars": 5000,
                                                   "preview": "{\"x\": 1"},
             attributes={"usage": {"input_tokens": 12, "cost": 0.25}, "tripwire": None}),
        span("3", "2", kind="model", end=None, status="running", input=[1, 2.5, None, True]),
    ])
    await storage.save_trace(record)

    loaded = await storage.load_trace("run-1")

    assert loaded == record


async def test_trace_built_by_the_tracer_round_trips(storage: Storage) -> None:
    tracer = Tracer()
    run = tracer.start("run", "run", None, input={"value": 2})
    step = tracer.start("double", "step", run, path="double", input={"value": 2})
    Tracer.end(step, "success", output={"value": 4}, retries=0)
    Tracer.end(run, "success", output=(4, "four"))
    record = TraceRecord.from_spans("run-1", "wf", "success", tracer.spans)
    await storage.save_trace(record)

    loaded = await storage.load_trace("run-1")

    assert loaded is not None
    assert (loaded.run_id, loaded.workflow_id, loaded.status) == ("run-1", "wf", "success")
    assert (loaded.started_at, loaded.ended_at) == (record.started_at, record.ended_at)
    assert list(loaded.spans) == list(record.spans)
    assert [row["name"] for row in loaded.spans] == ["run", "double"]
    assert loaded.spans[1]["output"] == {"value": 4}
    assert loaded.spans[1]["attributes"] == {"retries": 0}


async def test_load_trace_of_an_unknown_run_is_none(storage: Storage) -> None:
    await storage.save_trace(trace("other"))

    assert await storage.load_trace("missing") is None


async def test_saving_a_trace_replaces_the_one_of_the_same_run(storage: Storage) -> None:
    await storage.save_trace(trace(workflow_id="old", status="running", started_at=10.0,
                                   spans=[span("1"), span("2", "1")]))

    replacement = trace(workflow_id="new", status="success", started_at=20.0,
                        spans=[span("9", kind="run")])
    await storage.save_trace(replacement)

    assert await storage.load_trace("run-1") == replacement
    assert [t.run_id for t in await storage.list_traces()] == ["run-1"]
    assert await storage.list_traces(workflow_id="old") == []
    assert await storage.list_traces(status="running") == []
    assert [t.run_id for t in await storage.list_traces(workflow_id="new")] == ["run-1"]


async def test_list_traces_is_newest_first_without_spans(storage: Storage) -> None:
    for run_id, started_at in [("t1", 10.0), ("t2", 30.0), ("t3", 20.0)]:
        await storage.save_trace(trace(run_id, started_at=started_at,
                                       ended_at=started_at + 1, spans=[span("1"), span("2")]))

    traces = await storage.list_traces()

    assert traces == [trace("t2", started_at=30.0, ended_at=31.0, spans=[]),
                      trace("t3", started_at=20.0, ended_at=21.0, spans=[]),
                      trace("t1", started_at=10.0, ended_at=11.0, spans=[])]
    stored = await storage.load_trace("t2")
    assert stored is not None and len(stored.spans) == 2  # listing did not strip them


async def test_list_traces_filters_by_workflow_status_and_limit(storage: Storage) -> None:
    await storage.save_trace(trace("t1", workflow_id="a", status="success", started_at=1.0))
    await storage.save_trace(trace("t2", workflow_id="a", status="failed", started_at=2.0))
    await storage.save_trace(trace("t3", workflow_id="b", status="success", started_at=3.0))
    await storage.save_trace(trace("t4", workflow_id="a", status="success", started_at=4.0))

    by_workflow = await storage.list_traces(workflow_id="a")
    by_status = await storage.list_traces(status="success")
    both = await storage.list_traces(workflow_id="a", status="success", limit=1)

    assert [t.run_id for t in by_workflow] == ["t4", "t2", "t1"]
    assert [t.run_id for t in by_status] == ["t4", "t3", "t1"]
    assert [t.run_id for t in both] == ["t4"]
    assert [t.run_id for t in await storage.list_traces(limit=2)] == ["t4", "t3"]
    assert [t.run_id for t in await storage.list_traces(limit=10)] == ["t4", "t3", "t2", "t1"]
    assert await storage.list_traces(workflow_id="nope") == []
    assert await storage.list_traces(status="canceled") == []
    assert await storage.list_traces(limit=0) == []


async def test_list_traces_pages_through_many(storage: Storage) -> None:
    for i in range(250):
        await storage.save_trace(trace(f"t{i}", workflow_id="even" if i % 2 == 0 else "odd",
                                       status="failed" if i == 3 else "success",
                                       started_at=float(i)))

    everything = await storage.list_traces()
    odd = await storage.list_traces(workflow_id="odd", status="failed")

    assert [t.run_id for t in everything] == [f"t{i}" for i in range(249, -1, -1)]
    assert [t.run_id for t in odd] == ["t3"]
    assert len(await storage.list_traces(status="success", limit=220)) == 220


async def test_trace_ids_with_separators_do_not_collide(storage: Storage) -> None:
    await storage.save_trace(trace("a:b", workflow_id="x:y", spans=[span("first")]))
    await storage.save_trace(trace("a%3Ab", workflow_id="x", spans=[span("second")]))

    first = await storage.load_trace("a:b")
    second = await storage.load_trace("a%3Ab")

    assert first is not None and first.spans == [span("first")]
    assert second is not None and second.spans == [span("second")]
    assert [t.run_id for t in await storage.list_traces(workflow_id="x")] == ["a%3Ab"]
    assert [t.run_id for t in await storage.list_traces(workflow_id="x:y")] == ["a:b"]



async def test_memory_storage_keeps_the_trace_by_reference() -> None:
    storage = InMemoryStorage()
    record = trace()

    await storage.save_trace(record)

    assert await storage.load_trace("run-1") is record
    listed = await storage.list_traces()
    assert listed == [trace(spans=[])] and record.spans == [span("1", kind="run")]


async def test_memory_storage_bound_forgets_the_oldest() -> None:
    from procflow.runtime.results import RunSnapshot
    from procflow.runtime.tracing import TraceRecord
    from procflow.storage import InMemoryStorage

    storage = InMemoryStorage(max_runs=2)
    for i in range(3):
        await storage.save_snapshot(RunSnapshot("w", f"r{i}", "success"), {})
        await storage.save_trace(TraceRecord(f"r{i}", "w", "success", float(i), None, []))
    assert [r.run_id for r in await storage.list_runs()] == ["r2", "r1"]
    assert await storage.load_snapshot("w", "r0") is None
    assert await storage.load_trace("r0") is None and await storage.load_trace("r2") is not None


async def test_memory_storage_bound_keeps_runs_that_can_go_on() -> None:
    from procflow.runtime.results import RunSnapshot
    from procflow.storage import InMemoryStorage

    storage = InMemoryStorage(max_runs=2)
    await storage.save_snapshot(RunSnapshot("w", "waiting", "suspended"), {})
    await storage.save_snapshot(RunSnapshot("w", "going", "running"), {})
    for i in range(4):
        await storage.save_snapshot(RunSnapshot("w", f"r{i}", "success"), {})
    kept = {r.run_id for r in await storage.list_runs()}
    assert kept == {"waiting", "going", "r2", "r3"}
    # A claimed run that then finishes counts from when it finished.
    assert await storage.claim_run("w", "waiting", expected="suspended", new="canceled")
    assert {r.run_id for r in await storage.list_runs()} == {"waiting", "going", "r3"}
    await storage.save_snapshot(RunSnapshot("w", "going", "failed"), {})
    assert {r.run_id for r in await storage.list_runs()} == {"waiting", "going"}
    await storage.delete_run("w", "going")
    await storage.save_snapshot(RunSnapshot("w", "r9", "success"), {})
    assert {r.run_id for r in await storage.list_runs()} == {"waiting", "r9"}


# -- damage stays local ------------------------------------------------------------


async def damage(storage: Storage, part: str, run_id: str, path: str = "s") -> None:
    """Overwrite one stored row of ``run_id`` (workflow "wf") with garbage."""
    garbage = '{"v": 1, "damaged'
    if isinstance(storage, SQLiteStorage):
        import sqlite3

        table, column, where = {"header": ("runs", "snapshot", ""),
                                "step": ("steps", "result", f" AND path = '{path}'"),
                                "trace": ("traces", "data", "")}[part]
        with sqlite3.connect(storage.path) as connection:
            connection.execute(f"UPDATE {table} SET {column} = ? WHERE run_id = ?{where}",
                               (garbage, run_id))
    elif isinstance(storage, RedisStorage):
        client = storage._client  # the storage's own connection, for raw writes
        if part == "header":
            await client.set(storage._run_key("wf", run_id), garbage)
        elif part == "step":
            await client.hset(storage._steps_key("wf", run_id), path, garbage)
        else:
            await client.set(storage._trace_key(run_id), garbage)
    else:
        table, column, where = {"header": ("procflow_runs", "snapshot", ""),
                                "step": ("procflow_steps", "result", " AND path = %s"),
                                "trace": ("procflow_traces", "data", "")}[part]
        async with storage.pool.connection("damaging") as conn:  # type: ignore[attr-defined]
            await conn.execute(f"UPDATE {table} SET {column} = %s WHERE run_id = %s{where}",
                               (garbage, run_id, *([path] if where else [])))


damageable = pytest.mark.parametrize("storage_factory", [
    "sqlite", pytest.param("redis", marks=pytest.mark.redis),
    pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True)


@damageable
async def test_a_damaged_header_is_listed_as_corrupted_and_the_rest_stay(
        storage: Storage) -> None:
    for run_id, at in (("good-1", 1.0), ("bad", 2.0), ("good-2", 3.0)):
        await storage.save_snapshot(header(run_id, updated_at=at), {})
    await damage(storage, "header", "bad")

    runs = await storage.list_runs()

    assert [(r.run_id, r.status) for r in runs] == [
        ("good-2", "running"), ("bad", "corrupted"), ("good-1", "running")]
    assert isinstance(runs[1].error, SnapshotCorruptedError)
    assert "'bad'" in str(runs[1].error) and "snapshot" in str(runs[1].error)
    with pytest.raises(SnapshotCorruptedError, match="'bad'"):
        await storage.load_snapshot("wf", "bad")
    assert await storage.load_snapshot("wf", "good-1") is not None


@damageable
async def test_a_damaged_step_names_the_run_and_the_step(storage: Storage) -> None:
    await storage.save_snapshot(header("r"), {"s": done(1), "t": done(2)})
    await damage(storage, "step", "r", "s")

    with pytest.raises(SnapshotCorruptedError, match="step 's'") as err:
        await storage.load_snapshot("wf", "r")
    assert err.value.run_id == "r"
    assert [r.status for r in await storage.list_runs()] == ["running"]


@damageable
async def test_a_damaged_trace_never_blocks_loading_the_run(storage: Storage) -> None:
    from procflow import create_step, create_workflow

    wf = create_workflow(id="wf", storage=storage).then(
        create_step(id="s", execute=lambda ctx: 1)).then(
        create_step(id="t", execute=lambda ctx: 2)).commit()
    await wf.create_run("r").start()
    await damage(storage, "trace", "r")

    with pytest.raises(SnapshotCorruptedError, match="trace of run 'r'"):
        await storage.load_trace("r")
    run = await wf.get_run("r", storage=storage)
    assert run.status == "success" and run.last_result is not None
    assert run.last_result.result == 2


async def test_a_processor_workflows_envelope_is_kept_and_read_back(
        storage_factory: StorageFactory) -> None:
    # each step's envelope holds the live message list (sources, system tags), stream
    # chunks and violations: every backend keeps them, and a new instance reads them back
    from procflow import create_step, create_workflow
    from procflow.messages import Chunk, MessageList
    from procflow.processors import Processor, ProcessorStepSchema, ProcessorViolation

    class Tag(Processor):
        id = "tag"

        def process_input(self, args: Any) -> None:
            args.message_list.add_system("answer briefly", tag="rules")
            args.warn("tagged", {"n": 1})

    wf = create_workflow(id="guard", input_schema=ProcessorStepSchema,
                         output_schema=ProcessorStepSchema).then(create_step(Tag())).commit()
    writer = storage_factory()
    result = await wf.create_run("env", storage=writer).start(input_data={
        "phase": "input", "messages": [{"role": "user", "content": "hello"}],
        "stream_parts": [Chunk.text_delta("hel")]})
    assert result.status == "success", result
    # a persistent backend is read by a new instance (the in-memory one keeps objects)
    reader = writer if isinstance(writer, InMemoryStorage) else storage_factory()
    try:
        run = await wf.get_run("env", storage=reader)
        assert run.last_result is not None
        env = run.last_result.result
    finally:
        await writer.aclose()
        if reader is not writer:
            await reader.aclose()
    assert isinstance(env, ProcessorStepSchema) and isinstance(env.message_list, MessageList)
    assert [(m.text, env.message_list.source_of(m.id)) for m in env.message_list.all()] == [
        ("hello", "input")]
    assert [m.text for m in env.message_list.system("rules")] == ["answer briefly"]
    assert env.violations == [ProcessorViolation("tag", "tagged", {"n": 1})]
    assert [c.to_dict() for c in env.stream_parts] == [Chunk.text_delta("hel").to_dict()]


# -- retention: prune_runs ---------------------------------------------------------------

async def _aged(storage: Storage) -> float:
    """Stores runs of every status, most of them last updated in 1970, and returns now."""
    now = time.time()
    for run_id, status in (("ok", "success"), ("bad", "failed"), ("trip", "tripwire"),
                           ("stop", "canceled"), ("wait", "suspended"), ("busy", "running"),
                           ("queued", "pending")):
        await storage.save_snapshot(header(run_id, status=status, updated_at=100.0),
                                    {"a": done(run_id)})
        await storage.save_trace(trace(run_id))
    await storage.save_snapshot(header("other-ok", workflow_id="other", status="success",
                                       updated_at=200.0), {})
    await storage.save_snapshot(header("fresh", status="success", updated_at=now), {})
    return now


async def test_prune_deletes_old_finished_runs_with_their_steps_and_traces(
        storage: Storage) -> None:
    await _aged(storage)

    pruned = await prune_runs(storage, older_than=timedelta(days=1))

    assert [(r.workflow_id, r.run_id, r.status) for r in pruned] == [
        ("wf", "bad", "failed"), ("wf", "ok", "success"), ("wf", "stop", "canceled"),
        ("wf", "trip", "tripwire"), ("other", "other-ok", "success")]
    assert pruned[0] == PrunedRun("wf", "bad", "failed", 100.0)
    left = {run.run_id: run.status for run in await storage.list_runs()}
    assert left == {"wait": "suspended", "busy": "running", "queued": "pending",
                    "fresh": "success"}  # can still go on, or too recent
    assert await storage.load_snapshot("wf", "ok") is None
    assert await storage.load_trace("ok") is None
    assert await storage.load_trace("wait") is not None
    assert await prune_runs(storage, older_than=timedelta(days=1)) == []


async def test_prune_filters_and_dry_run(storage: Storage) -> None:
    now = await _aged(storage)

    would = await prune_runs(storage, older_than=0, status=["failed", "tripwire"],
                             dry_run=True)
    assert [r.run_id for r in would] == ["bad", "trip"]
    assert len(await storage.list_runs()) == 9  # a dry run deletes nothing
    only_other = await prune_runs(storage, older_than=0, workflow_id="other")
    assert [r.run_id for r in only_other] == ["other-ok"]
    everything = await prune_runs(storage, older_than=0)  # every finished run, fresh too
    assert {r.run_id for r in everything} == {"ok", "bad", "trip", "stop", "fresh"}
    assert all(r.updated_at <= now for r in everything)
    assert sorted(r.status for r in await storage.list_runs()) == [
        "pending", "running", "suspended"]


async def test_prune_leaves_a_run_that_changed_or_holds_a_lease(storage: Storage) -> None:
    await storage.save_snapshot(header("moved", status="failed", updated_at=100.0), {})
    await storage.save_snapshot(header("leased", status="failed", updated_at=100.0), {})
    assert type(storage).delete_finished is not Storage.delete_finished  # its own
    [leased, moved] = await storage.list_finished(before=1000.0, workflow_id="wf",
                                                  statuses=frozenset({"failed"}))
    # between listing and deleting: "moved" is restarted, "leased" is being executed
    await storage.save_snapshot(header("moved", status="failed", updated_at=150.0), {})
    await storage.acquire_lease("wf", "leased", owner="worker", ttl=30)

    assert await storage.delete_finished([moved, leased]) == []
    assert {r.run_id for r in await storage.list_runs()} == {"moved", "leased"}
    await storage.release_lease("wf", "leased", owner="worker")
    assert await storage.delete_finished([moved, leased]) == [leased]
    assert await storage.delete_finished([leased]) == []  # gone already
    assert await storage.delete_finished([]) == []


async def _lone_traces(storage: Storage) -> float:
    """Stores a run with its trace and traces without a run (an ephemeral run's), most
    of them from 1970; returns now."""
    now = time.time()
    await storage.save_snapshot(header("with-run", status="success", updated_at=100.0), {})
    await storage.save_trace(trace("with-run"))
    await storage.save_trace(trace("lone", ended_at=120.0))
    await storage.save_trace(trace("lone-open", status="running", started_at=90.0,
                                   ended_at=None))  # never ended: aged by its start
    await storage.save_trace(trace("lone-other", workflow_id="other", status="failed",
                                   ended_at=150.0))
    await storage.save_trace(trace("recent", started_at=now - 5, ended_at=now - 1))
    return now


async def test_prune_deletes_traces_stored_without_a_run(storage: Storage) -> None:
    await _lone_traces(storage)

    would = await prune_runs(storage, older_than=0, dry_run=True)
    assert [(r.run_id, r.status, r.updated_at, r.trace_only) for r in would] == [
        ("lone-open", "running", 90.0, True), ("with-run", "success", 100.0, False),
        ("lone", "success", 120.0, True), ("lone-other", "failed", 150.0, True)]
    assert len(await storage.list_traces()) == 5  # a dry run deletes nothing
    # a status or a workflow narrows the lone traces as it narrows the runs
    assert [r.run_id for r in await prune_runs(storage, older_than=0, status="failed",
                                               dry_run=True)] == ["lone-other"]
    assert [r.run_id for r in await prune_runs(storage, older_than=0, workflow_id="other",
                                               dry_run=True)] == ["lone-other"]

    pruned = await prune_runs(storage, older_than=0)

    assert pruned == would
    # a trace that ended within ``ORPHAN_GRACE`` may be a finishing run's, its record
    # about to be saved: it stays
    assert [t.run_id for t in await storage.list_traces()] == ["recent"]
    assert await storage.load_snapshot("wf", "with-run") is None


async def test_a_lone_trace_whose_run_was_stored_since_it_was_listed_stays(
        storage: Storage) -> None:
    await storage.save_trace(trace("late", ended_at=100.0))
    await storage.save_trace(trace("moved", ended_at=100.0))
    assert type(storage).delete_orphan_traces is not Storage.delete_orphan_traces
    [late, moved] = await storage.list_orphan_traces(before=1000.0, workflow_id=None,
                                                     statuses=None)
    assert (late.run_id, moved.run_id, late.trace_only) == ("late", "moved", True)
    # between listing and deleting: "late"'s run record lands, "moved" is traced again
    await storage.save_snapshot(header("late", status="success", updated_at=101.0), {})
    await storage.save_trace(trace("moved", ended_at=130.0))

    assert await storage.delete_orphan_traces([late, moved]) == []
    assert await storage.load_trace("late") is not None
    assert await storage.load_trace("moved") is not None
    [again] = await storage.list_orphan_traces(before=1000.0, workflow_id=None,
                                               statuses=frozenset({"success"}))
    assert await storage.delete_orphan_traces([again]) == [again]
    assert await storage.load_trace("moved") is None
    assert await storage.delete_orphan_traces([again]) == []  # gone already


async def test_an_ephemeral_run_leaves_a_trace_that_prune_deletes(
        storage: Storage, monkeypatch: pytest.MonkeyPatch) -> None:
    from procflow import create_step, create_workflow
    from procflow.storage import retention
    from procflow.storage.locate import set_default_storage

    async def double(ctx: Any) -> int:
        return int(ctx.input_data) * 2

    workflow = create_workflow(id="lone-wf").then(create_step(id="double", execute=double))
    set_default_storage(storage)
    try:
        run = workflow.commit().create_run(ephemeral=True)
        assert (await run.start(2)).result == 4
    finally:
        set_default_storage(None)
    assert await storage.list_runs() == []  # an ephemeral run keeps no record...
    assert await storage.load_trace(run.run_id) is not None  # ...but its trace

    assert await prune_runs(storage, older_than=0) == []  # within the grace period
    monkeypatch.setattr(retention, "ORPHAN_GRACE", 0.0)
    [pruned] = await prune_runs(storage, older_than=0)
    assert (pruned.workflow_id, pruned.run_id, pruned.trace_only) == (
        "lone-wf", run.run_id, True)
    assert await storage.load_trace(run.run_id) is None


class _Plain(Storage):
    """A storage with no retention methods of its own: it has ``Storage``'s defaults,
    built on ``list_runs`` and ``delete_run``."""

    def __init__(self, inner: Storage) -> None:
        self._inner = inner

    async def list_runs(self, **options: Any) -> list[RunSnapshot]:
        return await self._inner.list_runs(**options)

    async def delete_run(self, workflow_id: str, run_id: str) -> None:
        await self._inner.delete_run(workflow_id, run_id)


async def test_prune_works_on_any_storage() -> None:
    inner = InMemoryStorage()
    await _aged(inner)
    plain = _Plain(inner)

    pruned = await prune_runs(plain, older_than=60.0, status="success")

    assert [(r.workflow_id, r.run_id) for r in pruned] == [("wf", "ok"), ("other", "other-ok")]
    assert await inner.load_trace("ok") is None


@pytest.mark.parametrize(("options", "message"), [
    ({"older_than": -1}, "older_than must be a timedelta or a number of seconds >= 0"),
    ({"older_than": float("nan")}, "older_than must be"),
    ({"older_than": "7d"}, "older_than must be"),
    ({"older_than": True}, "older_than must be"),
    ({"older_than": 1, "status": "suspended"}, "status must be finished ones"),
    ({"older_than": 1, "status": ["success", "running"]}, r"got \['running'\]"),
    ({"older_than": 1, "status": []}, "status must be finished ones"),
])
async def test_prune_refuses_bad_options(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        await prune_runs(InMemoryStorage(), **options)


# -- the stream log -------------------------------------------------------------------


async def test_stream_log_keeps_entries_in_order_from_any_position(storage: Storage) -> None:
    assert storage.keeps_streams
    assert await storage.read_stream("wf", "run-1") == []

    await storage.append_stream("wf", "run-1", ['{"n": 0}', '{"n": 1}'], start=0)
    await storage.append_stream("wf", "run-1", ['{"n": 2}'], start=2)

    assert await storage.read_stream("wf", "run-1") == ['{"n": 0}', '{"n": 1}', '{"n": 2}']
    assert await storage.read_stream("wf", "run-1", start=2) == ['{"n": 2}']
    assert await storage.read_stream("wf", "run-1", start=3) == []
    assert await storage.read_stream("other-wf", "run-1") == []


async def test_stream_log_keeps_an_entry_already_stored(storage: Storage) -> None:
    # a writer that retries an append after a lost answer writes each entry once
    await storage.append_stream("wf", "run-1", ["a", "b"], start=0)
    await storage.append_stream("wf", "run-1", ["b-again", "c"], start=1)

    assert await storage.read_stream("wf", "run-1") == ["a", "b", "c"]


async def test_stream_log_from_position_zero_replaces_the_old_one(storage: Storage) -> None:
    await storage.append_stream("wf", "run-1", ["a", "b", "c"], start=0)
    await storage.append_stream("wf", "run-1", ["new"], start=0)

    assert await storage.read_stream("wf", "run-1") == ["new"]


async def test_stream_log_is_deleted_with_its_run(storage: Storage) -> None:
    await storage.save_snapshot(header(), {})
    await storage.append_stream("wf", "run-1", ["a"], start=0)
    await storage.append_stream("wf", "run-2", ["kept"], start=0)

    await storage.delete_run("wf", "run-1")

    assert await storage.read_stream("wf", "run-1") == []
    assert await storage.read_stream("wf", "run-2") == ["kept"]


async def test_a_storage_without_stream_logs_says_so() -> None:
    plain = _Plain(InMemoryStorage())
    assert not plain.keeps_streams
    with pytest.raises(NotImplementedError, match="_Plain keeps no stream logs"):
        await plain.append_stream("wf", "run", ["a"], start=0)
    with pytest.raises(NotImplementedError, match="_Plain keeps no stream logs"):
        await plain.read_stream("wf", "run")
