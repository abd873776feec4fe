"""Runs on Dramatiq workers against ``LocalExecutor`` in one process.

``python benchmarks/distributed.py [--quick] [--threads N] [--fan-only]``. Starts a private
``redis-server`` on a free port and ``procflow worker`` processes (1, then 2), and
prints: runs per second of a 10-step workflow (trivial steps) with 1 and 2 worker
processes beside ``LocalExecutor`` in this process (the same ``RedisStorage``, snapshots
at every step); submit-to-result latency p50 and p99 of one run at a time; and the
framework overhead per item of a distributed ``foreach`` of the run's input (trivial
items; the median of 3 rounds), with the CPU time the workers and the Redis server
spent and the Redis commands run (``INFO commandstats``, commands run by scripts
included) per item. ``--fan-only`` measures only the foreach. Targets from the issue:
p50 under 20 ms, under 2 ms per item. Every process started is stopped by its pid.
Exit code always 0 (a report).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio

FLOWS = textwrap.dedent('''
    from procflow import create_step, create_workflow

    def inc(i):
        return create_step(id=f"s{i}", execute=lambda ctx: ctx.input_data + 1)

    wf = create_workflow(id="bench-ten")
    for i in range(10):
        wf = wf.then(inc(i))
    ten = wf.commit()

    fan = create_workflow(id="bench-fan").foreach(
        create_step(id="item", execute=lambda ctx: ctx.input_data), distribute=True).commit()
''')


_WATCHED: dict[str, set[int]] = {"redis": set(), "workers": set()}
"""Process groups whose CPU time is measured: the Redis server's, the workers'."""


def _cpu_seconds() -> dict[str, float]:
    """CPU seconds (user + system) used so far by the processes of each watched group
    (read from /proc; a process that exited no longer counts)."""
    tick = os.sysconf("SC_CLK_TCK")
    totals = dict.fromkeys(_WATCHED, 0.0)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                fields = stat.read().rpartition(")")[2].split()
        except OSError:
            continue
        group = int(fields[2])
        for name, groups in _WATCHED.items():
            if group in groups:
                totals[name] += (int(fields[11]) + int(fields[12])) / tick
    return totals


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def redis_server() -> Iterator[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server is not installed")
    port = _free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    _WATCHED["redis"].add(proc.pid)
    try:
        time.sleep(0.3)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        _WATCHED["redis"].discard(proc.pid)
        proc.terminate()
        proc.wait(timeout=10)


@contextmanager
def workers(url: str, directory: Path, n: int, threads: int) -> Iterator[None]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), str(directory)])}
    procs = [subprocess.Popen(
        [sys.executable, "-m", "procflow", "worker", f"{directory}/flows.py:ten",
         f"{directory}/flows.py:fan", "--redis", url, "--processes", "1",
         "--threads", str(threads)], env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True) for _ in range(n)]
    _WATCHED["workers"].update(proc.pid for proc in procs)
    try:
        time.sleep(4)  # imports and broker start-up
        yield
    finally:
        _WATCHED["workers"].difference_update(proc.pid for proc in procs)
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def throughput(flows: Any, executor: Any, runs: int) -> float:
    started = time.perf_counter()
    submitted = []
    for i in range(runs):
        run = flows.ten.create_run(storage=executor.storage)
        await run.submit(i, executor=executor)
        submitted.append(run)
    for run in submitted:
        await run.result(timeout=120)
    return runs / (time.perf_counter() - started)


async def latency(flows: Any, executor: Any, runs: int) -> tuple[float, float]:
    times = []
    for i in range(runs):
        started = time.perf_counter()
        run = flows.ten.create_run(storage=executor.storage)
        await run.submit(i, executor=executor)
        await run.result(timeout=60)
        times.append(time.perf_counter() - started)
    return _percentile(times, 0.5), _percentile(times, 0.99)


def _commands(url: str) -> dict[str, int]:
    """Commands the Redis server has run so far, by name (``INFO commandstats``)."""
    import redis

    with redis.Redis.from_url(url) as client:
        stats = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(row["calls"]) for name, row in stats.items()}


async def fan_seconds(flows: Any, executor: Any, url: str, items: int,
                      ) -> tuple[float, dict[str, int], dict[str, float]]:
    """Seconds from submit to result of a distributed foreach of ``items`` items, the
    Redis commands run meanwhile (by every process), by name, and the CPU seconds the
    Redis server and the workers used."""
    before = _commands(url)
    cpu = _cpu_seconds()
    started = time.perf_counter()
    run = flows.fan.create_run(storage=executor.storage)
    await run.submit(list(range(items)), executor=executor)
    result = await run.result(timeout=300)
    assert result.status == "success", result.error
    assert result.result == list(range(items)), result.result
    seconds = time.perf_counter() - started
    after = _commands(url)
    cpu = {name: used - cpu[name] for name, used in _cpu_seconds().items()}
    return seconds, {name: n - before.get(name, 0) for name, n in after.items()
                     if n > before.get(name, 0)}, cpu


async def per_item(flows: Any, executor: Any, url: str, items: int, rounds: int = 3,
                   ) -> None:
    """Framework cost per distributed foreach item, (N items - 1 item) / (N - 1): each
    round's, then the median round's (by wall time) with its CPU time and commands."""
    measured = []
    for _ in range(rounds):
        one, one_commands, one_cpu = await fan_seconds(flows, executor, url, 1)
        many, many_commands, many_cpu = await fan_seconds(flows, executor, url, items)
        cpu = {name: (used - one_cpu[name]) / (items - 1) for name, used in many_cpu.items()}
        extra = {name: (n - one_commands.get(name, 0)) / (items - 1)
                 for name, n in many_commands.items()}
        measured.append(((many - one) / (items - 1), cpu, extra))
    measured.sort(key=lambda m: m[0])
    per, cpu, extra = measured[len(measured) // 2]
    total = sum(extra.values())
    top = ", ".join(f"{name} {n:.1f}" for name, n in
                    sorted(extra.items(), key=lambda kv: -kv[1]) if n >= 0.05)
    rounds_ms = ", ".join(f"{m[0] * 1000:.2f}" for m in measured)
    print(f"distributed foreach: {per * 1000:.2f} ms per item, median of {rounds_ms} "
          f"({items} items, 1 worker; target < 2 ms)")
    print(f"  CPU per item: workers {cpu['workers'] * 1000:.2f} ms, Redis "
          f"{cpu['redis'] * 1000:.2f} ms; Redis commands per item: {total:.1f} ({top}; "
          "idle polls and heartbeats of every process included)")


async def local_throughput(flows: Any, url: str, runs: int) -> float:
    from procflow import LocalExecutor
    from procflow.storage import RedisStorage

    async with RedisStorage(url, prefix="bench-local") as storage, LocalExecutor() as local:
        started = time.perf_counter()
        submitted = []
        for i in range(runs):
            run = flows.ten.create_run(storage=storage)
            run.durability = "sync"
            await run.submit(i, executor=local)
            submitted.append(run)
        for run in submitted:
            await run.result(timeout=120)
        return runs / (time.perf_counter() - started)


async def main(quick: bool, threads: int, fan_only: bool) -> None:
    from procflow.workers import DramatiqExecutor

    runs, samples, items = (50, 20, 50) if quick else (400, 200, 400)
    with tempfile.TemporaryDirectory() as tmp, redis_server() as url:
        directory = Path(tmp)
        (directory / "flows.py").write_text(FLOWS)
        sys.path.insert(0, tmp)
        import flows

        if fan_only:
            with workers(url, directory, 1, threads):
                async with DramatiqExecutor(url) as executor:
                    await fan_seconds(flows, executor, url, 20)  # warm-up
                    await per_item(flows, executor, url, items)
            return
        local = await local_throughput(flows, url, runs)
        print(f"LocalExecutor, one process: {local:8.1f} runs/s (10 steps, RedisStorage)")
        for n in (1, 2):
            with workers(url, directory, n, threads):
                async with DramatiqExecutor(url) as executor:
                    await throughput(flows, executor, 5)  # warm-up
                    rate = await throughput(flows, executor, runs)
                    print(f"{n} worker process(es) x {threads} threads: {rate:8.1f} runs/s")
                    if n == 1:
                        p50, p99 = await latency(flows, executor, samples)
                        print(f"submit-to-result, one run at a time: p50 {p50 * 1000:.1f} ms "
                              f"p99 {p99 * 1000:.1f} ms (target p50 < 20 ms)")
                        await fan_seconds(flows, executor, url, 20)  # warm-up
                        await per_item(flows, executor, url, items)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    parser.add_argument("--threads", type=int, default=4, help="threads per worker process")
    parser.add_argument("--fan-only", action="store_true",
                        help="only the distributed foreach, three times")
    options = parser.parse_args()
    anyio.run(main, options.quick, options.threads, options.fan_only)
