"""SQLiteStorage specifics: WAL, several processes on one file, corrupted rows, encoding."""

from __future__ import annotations

import sqlite3
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import closing
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from procflow.errors import SnapshotCorruptedError, StepExecutionError, StorageError
from procflow.runtime.results import RunSnapshot, StepResult
from procflow.runtime.tracing import TraceRecord
from procflow.storage import SQLiteStorage
from procflow.storage.values import UnstorableValueError


class Out(BaseModel):
    value: int
    label: str = "x"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "procflow.db"


@pytest.fixture
async def storage(db_path: Path) -> AsyncIterator[SQLiteStorage]:
    async with SQLiteStorage(db_path) as instance:
        yield instance


def header(run_id: str = "run-1", **fields: Any) -> RunSnapshot:
    return RunSnapshot(workflow_id="wf", run_id=run_id, status="running",
                       updated_at=1.0, **fields)


def raw_execute(path: Path, sql: str, *params: object) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(path)) as connection, connection:
        return connection.execute(sql, params).fetchall()


async def test_creates_the_file_in_wal_mode(storage: SQLiteStorage, db_path: Path) -> None:
    await storage.save_snapshot(header(), {})

    assert raw_execute(db_path, "PRAGMA journal_mode") == [("wal",)]


async def test_two_instances_see_each_others_writes(db_path: Path) -> None:
    async with SQLiteStorage(db_path) as first, SQLiteStorage(db_path) as second:
        await first.save_snapshot(header("a"), {"s": StepResult(status="success", output=1)})
        await second.save_snapshot(header("b"), {})

        assert await second.load_snapshot("wf", "a") is not None
        assert [run.run_id for run in await first.list_runs()] == ["b", "a"]


_WRITER = textwrap.dedent("""
    import sys, anyio
    from procflow.runtime.results import RunSnapshot, StepResult
    from procflow.storage import SQLiteStorage

    async def main(path, name):
        async with SQLiteStorage(path) as storage:
            for i in range(50):
                step = {f"{name}-{i}": StepResult(status="success", output=i)}
                await storage.save_snapshot(
                    RunSnapshot(workflow_id="wf", run_id=f"{name}-{i}", status="success",
                                updated_at=float(i)), step)
                await storage.save_snapshot(
                    RunSnapshot(workflow_id="wf", run_id="shared", status="running"), step)

    anyio.run(main, sys.argv[1], sys.argv[2])
""")


async def test_writers_in_two_processes_all_land(db_path: Path) -> None:
    with anyio.fail_after(50):
        async with anyio.create_task_group() as group:
            for name in ("p1", "p2"):
                group.start_soon(partial(anyio.run_process, stdout=None, stderr=None),
                                 [sys.executable, "-c", _WRITER, str(db_path), name])

    async with SQLiteStorage(db_path) as storage:
        runs = await storage.list_runs()
        shared = await storage.load_snapshot("wf", "shared")

    assert len(runs) == 101
    assert shared is not None and len(shared[1]) == 100


async def test_corrupted_header_raises_and_is_kept(storage: SQLiteStorage,
                                                   db_path: Path) -> None:
    await storage.save_snapshot(header(), {})
    raw_execute(db_path, "UPDATE runs SET snapshot = '{not json' WHERE run_id = 'run-1'")

    with pytest.raises(SnapshotCorruptedError, match="run 'run-1' of workflow 'wf'") as info:
        await storage.load_snapshot("wf", "run-1")
    assert [r.status for r in await storage.list_runs()] == ["corrupted"]

    assert (info.value.workflow_id, info.value.run_id) == ("wf", "run-1")
    assert raw_execute(db_path, "SELECT snapshot FROM runs") == [("{not json",)]


async def test_corrupted_step_names_the_step(storage: SQLiteStorage, db_path: Path) -> None:
    await storage.save_snapshot(header(), {"outer.inner": StepResult(status="success")})
    raw_execute(db_path, """UPDATE steps SET result = json_set(result, '$.status', 'done')""")

    with pytest.raises(SnapshotCorruptedError, match=r"step 'outer.inner'.*status"):
        await storage.load_snapshot("wf", "run-1")


async def test_unknown_run_status_is_corrupted(storage: SQLiteStorage, db_path: Path) -> None:
    await storage.save_snapshot(header(), {})
    raw_execute(db_path, "UPDATE runs SET snapshot = json_set(snapshot, '$.status', 'bogus')")

    with pytest.raises(SnapshotCorruptedError, match="bogus"):
        await storage.load_snapshot("wf", "run-1")


async def test_pydantic_outputs_come_back_as_models(storage: SQLiteStorage) -> None:
    step = StepResult(status="success", output=Out(value=4), partial={3: Out(value=1)})
    await storage.save_snapshot(header(input=Out(value=2), state={"last": Out(value=5)}),
                                {"double": step})

    loaded = await storage.load_snapshot("wf", "run-1")

    assert loaded is not None
    snapshot, steps = loaded
    assert snapshot.input == Out(value=2)
    assert snapshot.state == {"last": Out(value=5)}
    assert steps["double"].output == Out(value=4)
    assert steps["double"].partial == {3: Out(value=1)}


async def test_errors_come_back_with_their_type_name(storage: SQLiteStorage) -> None:
    failed = StepExecutionError("step 'parse' failed", step_id="parse", attempt=3)
    failed.__cause__ = ValueError("boom")
    await storage.save_snapshot(header(error=failed), {
        "parse": StepResult(status="failed", error=ValueError("boom")),
    })

    loaded = await storage.load_snapshot("wf", "run-1")

    assert loaded is not None
    run_error, step_error = loaded[0].error, loaded[1]["parse"].error
    assert isinstance(step_error, StepExecutionError)
    assert str(step_error) == "ValueError: boom"
    assert isinstance(run_error, StepExecutionError)
    assert (str(run_error), run_error.step_id, run_error.attempt) == (
        "step 'parse' failed", "parse", 3)
    assert str(run_error.__cause__) == "ValueError: boom"


async def test_unencodable_values_are_refused_and_nothing_is_written(
        storage: SQLiteStorage) -> None:
    cyclic: list[object] = []
    cyclic.append(cyclic)
    with pytest.raises(UnstorableValueError) as refused:
        await storage.save_snapshot(header(state={"ok": 1, "loop": cyclic}), {})
    assert refused.value.where("").startswith("state.loop[0][0]")
    with pytest.raises(UnstorableValueError) as refused:
        await storage.save_snapshot(header(), {"s": StepResult("success", output=[object()])})
    assert (refused.value.where(""), refused.value.type_name) == ("output[0]", "object")

    assert await storage.load_snapshot("wf", "run-1") is None


async def test_a_closed_storage_raises(db_path: Path) -> None:
    storage = SQLiteStorage(db_path)
    await storage.aclose()

    with pytest.raises(StorageError, match="closed"):
        await storage.list_runs()


async def test_an_unusable_path_is_a_storage_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    path = tmp_path / "file" / "procflow.db"

    async with SQLiteStorage(path) as storage:
        with pytest.raises(StorageError, match=r"procflow\.db"):
            await storage.save_snapshot(header(), {})


def trace_record(run_id: str = "run-1", *, started_at: float = 1.0,
                 spans: list[dict[str, Any]] | None = None) -> TraceRecord:
    return TraceRecord(run_id, "wf", "success", started_at, started_at + 1.0,
                       [{"span_id": "1", "name": "run"}] if spans is None else spans)


async def test_corrupted_trace_raises_and_is_kept(storage: SQLiteStorage,
                                                  db_path: Path) -> None:
    await storage.save_trace(trace_record())
    raw_execute(db_path, "UPDATE traces SET data = '{not json' WHERE run_id = 'run-1'")

    with pytest.raises(SnapshotCorruptedError, match="trace of run 'run-1'") as info:
        await storage.load_trace("run-1")

    assert info.value.run_id == "run-1"
    assert raw_execute(db_path, "SELECT data FROM traces") == [("{not json",)]


async def test_trace_with_wrongly_typed_spans_is_corrupted(storage: SQLiteStorage,
                                                           db_path: Path) -> None:
    await storage.save_trace(trace_record())
    raw_execute(db_path, "UPDATE traces SET data = json_set(data, '$.spans', json('[1]'))")

    with pytest.raises(SnapshotCorruptedError, match=r"run 'run-1'.*spans\.0"):
        await storage.load_trace("run-1")


async def test_trace_of_another_run_is_corrupted(storage: SQLiteStorage,
                                                 db_path: Path) -> None:
    await storage.save_trace(trace_record())
    raw_execute(db_path, "UPDATE traces SET data = json_set(data, '$.run_id', 'other')")

    with pytest.raises(SnapshotCorruptedError, match="names run 'other'"):
        await storage.load_trace("run-1")


async def test_listing_traces_does_not_decode_the_spans(storage: SQLiteStorage,
                                                        db_path: Path) -> None:
    big = [{"span_id": str(i), "name": "step", "output": "x" * 2000} for i in range(50)]
    for i in range(200):
        await storage.save_trace(trace_record(f"t{i:03}", started_at=float(i), spans=big))
    raw_execute(db_path, "UPDATE traces SET data = '{not json' WHERE run_id = 't150'")

    listed = await storage.list_traces()

    assert [t.run_id for t in listed] == [f"t{i:03}" for i in range(199, -1, -1)]
    assert all(t.spans == [] for t in listed)
    assert listed[49] == trace_record("t150", started_at=150.0, spans=[])
    with pytest.raises(SnapshotCorruptedError, match="t150"):
        await storage.load_trace("t150")


async def test_corrupted_trace_header_columns_raise_when_listed(storage: SQLiteStorage,
                                                               db_path: Path) -> None:
    await storage.save_trace(trace_record())
    raw_execute(db_path, "UPDATE traces SET started_at = 'soon' WHERE run_id = 'run-1'")

    with pytest.raises(SnapshotCorruptedError, match=r"run 'run-1'.*started_at"):
        await storage.list_traces()


async def test_unencodable_span_values_are_stored_as_repr(storage: SQLiteStorage) -> None:
    cyclic: list[object] = []
    cyclic.append(cyclic)
    await storage.save_trace(trace_record(spans=[{"span_id": "1", "loop": cyclic,
                                                  "raw": b"\xff", "ok": [1, 2]}]))

    loaded = await storage.load_trace("run-1")

    assert loaded is not None
    assert loaded.spans == [{"span_id": "1", "loop": "[[...]]", "raw": "_w==", "ok": [1, 2]}]
