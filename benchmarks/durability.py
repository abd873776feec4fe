"""What durable storage writes: a large value passed through many steps on SQLite.

``python benchmarks/durability.py [--mb 10] [--steps 20]``. Runs a workflow whose steps
each return their input unchanged, with a value of ``--mb`` megabytes, on a fresh SQLite
file, then prints the bytes on disk (database and WAL) and the wall time, beside the same
run with a one-character value. Large strings and bytes are stored once, as
content-addressed blobs, so the file holds the value about once, not once per step.
Exit code always 0 (a report, never a gate).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from time import perf_counter
from typing import Any

import anyio

from procflow import create_step, create_workflow
from procflow.storage import SQLiteStorage

MB = 1024 * 1024


async def measure(value: Any, steps: int, directory: Path, name: str) -> tuple[int, float]:
    db = directory / f"{name}.db"
    async with SQLiteStorage(db) as storage:
        wf = create_workflow(id="durability", storage=storage)
        for i in range(steps):
            wf.then(create_step(id=f"s{i}", execute=lambda ctx: ctx.input_data))
        wf.commit()
        started = perf_counter()
        result = await wf.create_run().start(input_data=value)
        elapsed = perf_counter() - started
        assert result.status == "success", result.error
    return disk_bytes(directory, name), elapsed


def disk_bytes(directory: Path, name: str) -> int:
    """The database file's bytes on disk, its WAL and shared-memory files included."""
    return sum(p.stat().st_size for p in directory.glob(f"{name}.db*"))


async def main(mb: float, steps: int) -> None:
    with tempfile.TemporaryDirectory(prefix="procflow-durability-") as tmp:
        directory = Path(tmp)
        big_size, big_time = await measure("x" * int(mb * MB), steps, directory, "big")
        small_size, small_time = await measure("x", steps, directory, "small")
    print(f"{mb:g} MB through {steps} steps on SQLite: {big_size / MB:.1f} MB on disk, "
          f"{big_time:.2f} s")
    print(f"1 character through {steps} steps:        {small_size / MB:.2f} MB on disk, "
          f"{small_time:.3f} s")
    print(f"target: under {3 * mb:g} MB written -> "
          f"{'PASS' if big_size < 3 * mb * MB else 'FAIL'}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=10.0)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    anyio.run(main, args.mb, args.steps)
