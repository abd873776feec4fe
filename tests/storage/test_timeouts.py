"""Every storage wait is bounded by a documented option (issue 42)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest

from procflow import create_step, create_workflow
from procflow.errors import StorageError
from procflow.storage import SQLiteStorage


async def test_sqlite_gives_up_on_a_lock_held_too_long(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    async with SQLiteStorage(db) as storage:
        await storage.list_runs()  # the file and its tables exist
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process writing, and never done
    try:
        async with SQLiteStorage(db, timeout=0.2) as storage:
            wf = create_workflow(id="w", storage=storage).then(
                create_step(id="a", execute=lambda ctx: 1)).commit()
            with anyio.fail_after(10), pytest.raises(StorageError, match="locked"):
                await wf.create_run("r1").start(input_data=None)
    finally:
        holder.rollback()
        holder.close()


def test_a_run_id_no_storage_can_keep_is_refused_at_once() -> None:
    wf = create_workflow(id="w").then(create_step(id="a", execute=lambda ctx: 1)).commit()

    with pytest.raises(ValueError, match="lone surrogate"):
        wf.create_run("a\udcffb")


async def test_a_small_write_waits_for_a_lock_off_the_event_loop(tmp_path: Path) -> None:
    # Small writes are first tried on the event loop's thread without waiting; a lock
    # held by another connection sends them to a worker thread, where they wait.
    db = tmp_path / "runs.db"
    async with SQLiteStorage(db) as storage:
        await storage.list_runs()  # the connection is open: the next writes try inline
        wf = create_workflow(id="w", storage=storage).then(
            create_step(id="a", execute=lambda ctx: 1)).commit()
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process writing
        ticks = 0
        try:
            async with anyio.create_task_group() as tg:
                async def run() -> None:
                    result = await wf.create_run("r1").start(input_data=None)
                    assert result.status == "success" and result.result == 1

                tg.start_soon(run)
                with anyio.fail_after(5):
                    while ticks < 20:  # the loop is not blocked while the run waits
                        await anyio.sleep(0.01)
                        ticks += 1
                holder.rollback()
        finally:
            holder.close()
        loaded = await storage.load_snapshot("w", "r1")
        assert loaded is not None and loaded[0].status == "success"
