"""``procflow runs`` lists a run whose stored header is damaged as "corrupted" and goes on."""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

import anyio

from procflow import create_step, create_workflow
from procflow.storage import SQLiteStorage


async def test_procflow_runs_shows_a_damaged_run_as_corrupted(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    async with SQLiteStorage(db) as storage:
        wf = create_workflow(id="wf", storage=storage).then(
            create_step(id="s", execute=lambda ctx: 1)).commit()
        for run_id in ("good", "bad"):
            await wf.create_run(run_id).start()
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE runs SET snapshot = '{oops' WHERE run_id = 'bad'")
        connection.execute("DELETE FROM traces")

    done = await anyio.run_process(
        [sys.executable, "-m", "procflow", "--db", str(db), "--plain", "runs"],
        env={**os.environ, "PYTHONPATH": os.getcwd()}, check=False)
    stdout = done.stdout.decode()

    assert done.returncode == 0, done.stderr
    rows = {line.split("\t")[0]: line.split("\t")[2] for line in stdout.splitlines()}
    assert rows == {"good": "success", "bad": "corrupted"}
