"""Stored run data that cannot be loaded gives a clear error and is not overwritten."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from procflow import SnapshotCorruptedError, StepContext, create_step, create_workflow
from procflow.storage import SQLiteStorage


async def test_corrupted_snapshot_names_the_run_and_stays(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"

    async def wait(ctx: StepContext) -> None:
        await ctx.suspend()

    async with SQLiteStorage(db) as storage:
        wf = create_workflow(id="w", storage=storage).then(
            create_step(id="wait", execute=wait)).commit()
        await wf.create_run("broken-run").start()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE steps SET result = '{not json' WHERE run_id = 'broken-run'")
    async with SQLiteStorage(db) as storage:
        with pytest.raises(SnapshotCorruptedError, match="broken-run") as err:
            await wf.get_run("broken-run", storage=storage)
        assert err.value.run_id == "broken-run"
    with sqlite3.connect(db) as conn:
        (value,) = conn.execute("SELECT result FROM steps WHERE run_id = 'broken-run'").fetchone()
    assert value == "{not json"


async def test_corrupted_trace_loads_the_run_with_one_warning_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "runs.db"
    async with SQLiteStorage(db) as storage:
        wf = create_workflow(id="w", storage=storage).then(
            create_step(id="inc", execute=lambda ctx: ctx.input_data + 1)).commit()
        await wf.create_run("r").start(input_data=1)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE traces SET data = 'xx' WHERE run_id = 'r'")
    async with SQLiteStorage(db) as storage:
        with caplog.at_level("WARNING", logger="procflow"):
            run = await wf.get_run("r", storage=storage)
        assert run.status == "success"
        with pytest.raises(SnapshotCorruptedError, match="trace of run 'r'"):
            await storage.load_trace("r")
    [record] = [r for r in caplog.records if r.name == "procflow"]
    assert record.exc_info is None  # the reason is in the line; no traceback
    message = record.getMessage()
    assert "trace of run 'r' is corrupted: Invalid JSON" in message
    assert message.endswith("the run is loaded without its trace")
    with sqlite3.connect(db) as conn:
        (value,) = conn.execute("SELECT data FROM traces WHERE run_id = 'r'").fetchone()
    assert value == "xx"
