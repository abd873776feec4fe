"""Faults against durable runs, many times over: the long form of ``tests/chaos``.

``python benchmarks/chaos.py [--rounds 20] [--faults redis-freeze,redis-kill,...]``
runs, for each fault, ``--rounds`` ten-step runs, injects the fault a few steps in,
waits for the run to return (under the caller's ``fail_after``), removes the fault and
restarts the run. Faults:

- ``redis-freeze``: a private ``redis-server`` SIGSTOPped, then SIGCONTed;
- ``redis-kill``: a private ``redis-server`` (append-only file, fsync always)
  SIGKILLed, then started again on its files;
- ``postgres-freeze``: PostgreSQL behind a TCP proxy that stops forwarding
  (``$PROCFLOW_POSTGRES_DSN``, default the local ``test`` database);
- ``sqlite-full``: a SQLite file that cannot grow, then can.

Printed per fault: runs, faults injected, runs lost (not "success" after the restart),
double effects (a step whose success was stored ran again), hangs (no return within the
caller's deadline), and the times to return after the fault and to recover (restart to
success), median and maximum. Workers SIGKILLed mid-batch are measured by
``tests/workers`` (``test_a_killed_worker_loses_no_run_and_repeats_no_completed_step``).
Exit code always 0 (a report, never a gate).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from procflow import create_step, create_workflow
from procflow._backends.redis import QUIET
from procflow.storage import PostgresStorage, RedisStorage, SQLiteStorage

# The TCP proxy the chaos tests use, one definition for both (run from the checkout).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "chaos"))
from proxy import freezable_proxy

STEPS = 10
DEADLINE = 10.0  # the caller's fail_after around each run
FAULTS = ("redis-freeze", "redis-kill", "postgres-freeze", "sqlite-full")


@dataclass
class Figures:
    """What one fault did over its rounds."""

    runs: int = 0
    faults: int = 0
    lost: int = 0
    double_effects: int = 0
    hangs: int = 0
    to_return: list[float] = field(default_factory=list)
    to_recover: list[float] = field(default_factory=list)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Redis:
    """A private redis-server persisting every write."""

    def __init__(self, directory: str) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed")
        self.binary, self.directory, self.port = binary, directory, _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes", "--appendfsync", "always", "--dir", self.directory],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the private redis-server did not start")

    def signal(self, number: int) -> None:
        assert self.process is not None
        os.kill(self.process.pid, number)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait()


async def one_round(storage: Any, run_id: str, inject: Callable[[], Any],
                    remove: Callable[[], Awaitable[None]], figures: Figures) -> None:
    """One run with the fault injected three steps in, then removed and restarted."""
    ran: Counter[str] = Counter()
    stored_at_fault: set[str] = set()
    third = anyio.Event()

    async def step(ctx: Any) -> int:
        ran[ctx.step_id] += 1
        if sum(ran.values()) == 3:
            third.set()
            await anyio.sleep(0.05)
        return int(ctx.input_data) + 1

    wf = create_workflow(id="chaos", storage=storage)
    for i in range(STEPS):
        wf = wf.then(create_step(id=f"s{i}", execute=step))
    run = wf.commit().create_run(run_id)
    injected_at = 0.0

    async def fault() -> None:
        nonlocal injected_at
        await third.wait()
        stored_at_fault.update(name for name, count in ran.items() if count)
        stored_at_fault.discard(f"s{sum(ran.values()) - 1}")  # the one in flight
        inject()
        injected_at = time.perf_counter()

    figures.runs += 1
    with anyio.move_on_after(DEADLINE) as deadline:
        async with anyio.create_task_group() as tg:
            tg.start_soon(fault)
            await run.start(input_data=0)
    if deadline.cancelled_caught:
        figures.hangs += 1
    figures.faults += injected_at > 0
    figures.to_return.append(time.perf_counter() - injected_at)
    await remove()
    started = time.perf_counter()
    try:
        with anyio.fail_after(DEADLINE):
            again = await run.restart()
        ok = again.status == "success" and again.result == STEPS
    except Exception:
        ok = False
    figures.to_recover.append(time.perf_counter() - started)
    figures.lost += not ok
    figures.double_effects += sum(1 for name in stored_at_fault if ran[name] > 1)


async def redis_rounds(rounds: int, *, kill: bool) -> Figures:
    figures = Figures()
    with tempfile.TemporaryDirectory(prefix="procflow-chaos-") as directory:
        server = Redis(directory)
        server.start()
        try:
            for i in range(rounds):
                async with RedisStorage(server.url, prefix="chaos") as storage:
                    async def remove() -> None:
                        if kill:
                            server.start()
                        else:
                            server.signal(signal.SIGCONT)
                        await anyio.sleep(QUIET)

                    def inject() -> None:
                        if kill:
                            server.signal(signal.SIGKILL)
                            assert server.process is not None
                            server.process.wait()
                        else:
                            server.signal(signal.SIGSTOP)

                    await one_round(storage, f"r{i}", inject, remove, figures)
        finally:
            server.stop()
    return figures


async def postgres_rounds(rounds: int) -> Figures:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    figures = Figures()
    dsn = os.environ.get("PROCFLOW_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
    target = conninfo_to_dict(dsn)
    schema = f"chaos_{os.getpid()}"
    async with freezable_proxy(str(target.get("host") or "127.0.0.1"),
                               int(target.get("port") or 5432)) as proxy:
        proxied = make_conninfo(dsn, host="127.0.0.1", port=proxy.port)
        try:
            for i in range(rounds):
                async with PostgresStorage(proxied, schema=schema, timeout=1.0) as storage:
                    async def remove() -> None:
                        proxy.thaw()

                    await one_round(storage, f"r{i}", proxy.freeze, remove, figures)
        finally:
            import psycopg

            with psycopg.connect(dsn, autocommit=True) as connection:
                connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return figures


async def sqlite_rounds(rounds: int) -> Figures:
    figures = Figures()
    with tempfile.TemporaryDirectory(prefix="procflow-chaos-") as directory:
        for i in range(rounds):
            async with SQLiteStorage(Path(directory) / f"r{i}.db") as storage:
                await storage.list_runs()  # the file and its tables exist

                def cap(pages: int | None) -> None:
                    def set_cap(connection: sqlite3.Connection) -> None:
                        count = connection.execute("PRAGMA page_count").fetchone()[0]
                        connection.execute("PRAGMA max_page_count = "
                                           f"{count if pages is None else pages}")

                    storage._file.call("capping the file", set_cap)

                async def remove() -> None:
                    cap(1_000_000)

                await one_round(storage, f"r{i}", lambda: cap(None), remove, figures)
    return figures


def _seconds(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} / {max(values):.2f}"


async def main(rounds: int, faults: list[str]) -> dict[str, Figures]:
    results: dict[str, Figures] = {}
    for name in faults:
        if name == "redis-freeze":
            results[name] = await redis_rounds(rounds, kill=False)
        elif name == "redis-kill":
            results[name] = await redis_rounds(rounds, kill=True)
        elif name == "postgres-freeze":
            results[name] = await postgres_rounds(rounds)
        elif name == "sqlite-full":
            results[name] = await sqlite_rounds(rounds)
        else:
            raise SystemExit(f"unknown fault {name!r}; choose from {', '.join(FAULTS)}")
    print(f"{'fault':<16} {'runs':>5} {'faults':>6} {'lost':>5} {'double':>6} {'hangs':>5}"
          f"  {'return s (median / max)':>24}  {'recover s (median / max)':>25}")
    for name, f in results.items():
        print(f"{name:<16} {f.runs:>5} {f.faults:>6} {f.lost:>5} {f.double_effects:>6} "
              f"{f.hangs:>5}  {_seconds(f.to_return):>24}  {_seconds(f.to_recover):>25}")
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--faults", default=",".join(FAULTS))
    args = parser.parse_args()
    logging.getLogger("procflow").setLevel(logging.CRITICAL)  # the faults' own warnings
    anyio.run(main, args.rounds, [f for f in args.faults.split(",") if f])
