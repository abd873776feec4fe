"""Durable runs per second: a 10-step chain persisted after every step.

Run: ``python benchmarks/durable_runs.py [--quick] [--store sqlite,postgres]``. The
workload of ``../shared/peer-bench/bench_durable.py``: a chain of 10 steps with a
pydantic input and output, on ``SQLiteStorage`` (a fresh file on local disk) and on
``PostgresStorage`` (a fresh database on the machine's server, skipped with a note when
none answers), each step's result stored before the next starts. Prints runs/s over N
sequential runs and over N runs 50 at a time, the best of a few rounds.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from pydantic import BaseModel

from procflow import create_workflow, step
from procflow.storage.base import Storage

STEPS = 10
CONCURRENCY = 50
ADMIN = os.environ.get("PROCFLOW_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


class Value(BaseModel):
    value: int


def chain(storage: Storage) -> Callable[[], Awaitable[None]]:
    wf = create_workflow(id="chain", input_schema=Value)
    for i in range(STEPS):
        @step(id=f"s{i}", input_schema=Value, output_schema=Value)
        async def inc(ctx):  # type: ignore[no-untyped-def]
            return Value(value=ctx.input_data.value + 1)
        wf = wf.then(inc)
    wf = wf.commit()

    async def one() -> None:
        result = await wf.create_run(storage=storage).start(input_data={"value": 0})
        assert result.status == "success" and result.result.value == STEPS, result

    return one


async def runs_per_s(one: Callable[[], Awaitable[None]], n: int, concurrent: bool) -> float:
    start = time.perf_counter()
    if not concurrent:
        for _ in range(n):
            await one()
    else:
        limit = anyio.Semaphore(CONCURRENCY)

        async def worker() -> None:
            async with limit:
                await one()

        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(worker)
    return n / (time.perf_counter() - start)


async def measure(label: str, storage: Storage, n: int, rounds: int) -> None:
    one = chain(storage)
    for _ in range(5):
        await one()
    best = {"sequential": 0.0, f"{CONCURRENCY} concurrent": 0.0}
    for _ in range(rounds):
        for mode in best:
            best[mode] = max(best[mode], await runs_per_s(one, n, mode != "sequential"))
    for mode, value in best.items():
        print(f"  {label:<10} {mode:<14} {value:>8,.0f} runs/s  ({1e3 / value:.2f} ms a run)")


async def main(quick: bool, stores: list[str]) -> None:
    n, rounds = (100, 2) if quick else (300, 3)
    print(f"durable {STEPS}-step runs, persisted after every step (best of {rounds} "
          f"rounds of {n})")
    if "sqlite" in stores:
        from procflow.storage import SQLiteStorage
        with tempfile.TemporaryDirectory() as tmp:
            async with SQLiteStorage(Path(tmp) / "runs.db") as sqlite:
                await measure("sqlite", sqlite, n, rounds)
    if "postgres" in stores:
        await postgres(n, rounds)


async def postgres(n: int, rounds: int) -> None:
    try:
        import psycopg
        admin = psycopg.connect(ADMIN, autocommit=True)
    except Exception as exc:  # a report, not a gate
        print(f"  postgres   skipped: no server at {ADMIN} ({type(exc).__name__})")
        return
    name = "bench_" + uuid.uuid4().hex[:10]
    admin.execute(f"CREATE DATABASE {name}")
    try:
        from procflow.storage import PostgresStorage
        async with PostgresStorage(ADMIN.rsplit("/", 1)[0] + "/" + name) as storage:
            await measure("postgres", storage, n, rounds)
    finally:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--store", default="sqlite,postgres")
    args = parser.parse_args()
    anyio.run(main, args.quick, args.store.split(","))
