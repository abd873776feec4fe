"""Per-item durability: a foreach records each finished item as it finishes, so a run
killed mid-foreach (SIGKILL) and restarted runs only the items that had not finished."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from procflow import StepContext, create_step, create_workflow
from procflow.storage import RedisStorage, SQLiteStorage, Storage

ITEMS = 6
TRIALS = 30

# One process imports procflow once and forks a child per trial (a fresh interpreter per
# trial would spend seconds on imports alone); the test kills the child with SIGKILL.
ZYGOTE = textwrap.dedent('''
    import os, sys
    import anyio
    from tests.runtime.test_item_durability import ITEMS, open_storage, workflow

    for line in sys.stdin:
        target, log, run_id = line.split()
        pid = os.fork()
        if pid == 0:
            async def main():
                async with open_storage(target) as storage:
                    run = workflow(log, storage).create_run(run_id)
                    await run.start(input_data=list(range(ITEMS)))
            anyio.run(main)
            os._exit(0)
        print(pid, flush=True)
        os.waitpid(pid, 0)
        print("reaped", flush=True)
''')


def open_storage(target: str) -> Storage:
    if target.startswith("redis:"):
        url, _, prefix = target.removeprefix("redis:").rpartition("|")
        return RedisStorage(url, prefix=prefix)
    return SQLiteStorage(target)


def workflow(log: str, storage: Storage) -> Any:
    def work(ctx: StepContext) -> int:
        time.sleep(0.005)
        with open(log, "a") as fh:
            fh.write(f"{ctx.input_data}\n")
        return int(ctx.input_data) * 10

    return create_workflow(id="items", storage=storage).foreach(
        create_step(id="work", execute=work), concurrency=2).commit()


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "runs.db")
    url = request.getfixturevalue("redis_url")
    return f"redis:{url}|{request.getfixturevalue('redis_prefix')}"


def lines(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def test_finished_items_never_run_again_after_a_kill(tmp_path: Path, target: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    zygote = subprocess.Popen([sys.executable, "-c", ZYGOTE], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    assert zygote.stdin is not None and zygote.stdout is not None
    rng = random.Random(12)
    rerun = finished_total = 0
    try:
        for trial in range(TRIALS):
            log = tmp_path / f"log{trial}.txt"
            zygote.stdin.write(f"{target} {log} t{trial}\n")
            zygote.stdin.flush()
            pid = int(zygote.stdout.readline())
            wanted = rng.randint(1, ITEMS - 1)
            deadline = time.monotonic() + 20
            while len(lines(log)) < wanted and time.monotonic() < deadline:
                time.sleep(0.001)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            assert zygote.stdout.readline().strip() == "reaped"
            again, finished = anyio.run(restart, target, log, f"t{trial}")
            rerun += sum(1 for item in again if f"work[{item}]" in finished)
            finished_total += len(finished)
    finally:
        zygote.stdin.close()
        zygote.wait(timeout=10)
        zygote.stdout.close()
    assert (rerun, finished_total > 0) == (0, True)  # kills landed after some items had finished


async def restart(target: str, log: Path, run_id: str) -> tuple[list[str], set[str]]:
    """Restart the killed run; the items it ran again and those it had finished."""
    async with open_storage(target) as storage:
        wf = workflow(str(log), storage)
        loaded = await storage.load_snapshot("items", run_id)
        assert loaded is not None
        finished = {p for p, r in loaded[1].items()
                    if p.startswith("work[") and r.status == "success"}
        before = len(lines(log))
        result = await (await wf.get_run(run_id, storage=storage)).restart()
    assert result.status == "success"
    assert result.result == [i * 10 for i in range(ITEMS)]
    return lines(log)[before:], finished


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_step_results_are_written_at_each_boundary_only_where_they_outlive_the_process(
        kind: str, tmp_path: Path) -> None:
    # Under "sync" durability a durable storage holds each finished step's result
    # before the next step starts; InMemoryStorage (it dies with the process) is
    # written as the run starts and as it ends, its steps' results with the end.
    from procflow.storage import InMemoryStorage

    storage: Storage = InMemoryStorage() if kind == "memory" else SQLiteStorage(
        tmp_path / "runs.db")
    seen: dict[str, Any] = {}

    async def second(ctx: StepContext[Any]) -> int:
        loaded = await storage.load_snapshot("w", "r1")
        assert loaded is not None
        seen["status"], seen["steps"] = loaded[0].status, sorted(loaded[1])
        return 2

    wf = create_workflow(id="w", storage=storage, durability="sync").then(
        create_step(id="a", execute=lambda ctx: 1)).then(
        create_step(id="b", execute=second)).commit()
    result = await wf.create_run("r1").start(input_data=None)
    assert result.status == "success" and result.result == 2
    assert seen["status"] == "running"
    assert seen["steps"] == ([] if kind == "memory" else ["a"])
    loaded = await storage.load_snapshot("w", "r1")
    assert loaded is not None and loaded[0].status == "success"
    assert sorted(loaded[1]) == ["a", "b"]
    if kind == "sqlite":
        await storage.aclose()  # type: ignore[attr-defined]
