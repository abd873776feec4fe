"""Large values once: a value that does not change between steps is not written again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from procflow import StepContext, create_step, create_workflow
from procflow.storage import SQLiteStorage, Storage
from procflow.storage.codec import BLOB_SIZE

pytest_plugins = ["tests.storage.test_contract"]

MB = 1024 * 1024


def passing(steps: int, storage: Storage) -> Any:
    wf = create_workflow(id="big", storage=storage)
    for i in range(steps):
        wf.then(create_step(id=f"s{i}", execute=lambda ctx: ctx.input_data))
    return wf.commit()


def stored_bytes(db: Path) -> int:
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))


async def test_ten_megabytes_through_twenty_steps_write_less_than_thirty(
        tmp_path: Path) -> None:
    db = tmp_path / "big.db"
    value = "x" * (10 * MB)
    async with SQLiteStorage(db) as storage:
        result = await passing(20, storage).create_run("r").start(input_data=value)
        assert result.status == "success"
    assert stored_bytes(db) < 30 * MB
    async with SQLiteStorage(db) as storage:
        loaded = await storage.load_snapshot("big", "r")
    assert loaded is not None
    assert loaded[0].input == value and loaded[1]["s19"].output == value


async def test_large_values_round_trip_on_every_backend(storage: Storage) -> None:
    def grow(ctx: StepContext) -> Any:
        return {"text": ctx.input_data["text"], "raw": b"\x00" * (BLOB_SIZE + 1),
                "n": ctx.input_data.get("n", 0) + 1}

    text = "é" * (BLOB_SIZE + 10)
    wf = create_workflow(id="big", storage=storage).then(
        create_step(id="a", execute=grow)).then(create_step(id="b", execute=grow)).commit()
    result = await wf.create_run("r").start(input_data={"text": text})
    assert result.status == "success"
    run = await wf.get_run("r", storage=storage)
    assert run.last_result is not None
    assert run.last_result.result == {"text": text, "raw": b"\x00" * (BLOB_SIZE + 1), "n": 2}
    listed = await storage.list_runs()
    assert [r.run_id for r in listed] == ["r"]  # listings do not read the blobs
