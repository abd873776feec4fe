"""A SQLite file that cannot grow (a full disk, here a capped page count) fails the run
with ``StorageError`` instead of hanging or corrupting it; the steps stored before stay,
and the run restarts to success once there is room (issue 42)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from procflow import create_step, create_workflow
from procflow.errors import StorageError
from procflow.storage import SQLiteStorage

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(60)]


def _cap(storage: SQLiteStorage, pages: int | None) -> None:
    def cap(connection: sqlite3.Connection) -> None:
        count = connection.execute("PRAGMA page_count").fetchone()[0]
        connection.execute(f"PRAGMA max_page_count = {count if pages is None else pages}")

    storage._file.call("capping the file", cap)


async def test_a_full_disk_fails_the_run_and_it_restarts_when_there_is_room(
        tmp_path: Path) -> None:
    ran: list[int] = []

    async def step(ctx: Any) -> str:
        ran.append(len(ran))
        return "x" * 20_000 if len(ran) == 3 else "ok"  # the third needs new pages

    async with SQLiteStorage(tmp_path / "runs.db") as storage:
        wf = create_workflow(id="disk", storage=storage)
        for i in range(5):
            wf = wf.then(create_step(id=f"s{i}", execute=step))
        run = wf.commit().create_run("r1")
        await storage.list_runs()  # the file exists, with its tables
        _cap(storage, None)  # full from here on

        with anyio.fail_after(10):
            result = await run.start(input_data=0)
        stored = await storage.load_snapshot("disk", "r1")

        _cap(storage, 1_000_000)  # room again
        with anyio.fail_after(10):
            again = await run.restart()

    assert result.status == "failed" and isinstance(result.error, StorageError)
    assert "full" in str(result.error)
    assert stored is not None
    assert {path: r.status for path, r in stored[1].items()} == {"s0": "success",
                                                                 "s1": "success"}
    assert again.status == "success"
    assert len(ran) == 5 + 1  # only the step whose result found no room ran again
