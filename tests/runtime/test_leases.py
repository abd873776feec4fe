"""Run leases: restart() and resume() take the run's lease; one winner; stalled runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Mapping
from pathlib import Path

import anyio
import pytest

from procflow import RunStateError, StepContext, create_step, create_workflow
from procflow.errors import StorageError
from procflow.records import Lease, RunSnapshot, StepResult
from procflow.runtime.leases import owner_is_dead
from procflow.storage import InMemoryStorage, NullStorage, SQLiteStorage

TRIALS = 10

SCRIPT = textwrap.dedent('''
    import sys
    import anyio
    from procflow import RunStateError, create_step, create_workflow
    from procflow.storage import RedisStorage, SQLiteStorage

    db, log, mode, go = sys.argv[1:5]
    TRIALS = int(sys.argv[5])

    def open_storage():
        if db.startswith("redis:"):
            prefix, _, url = db.removeprefix("redis:").partition("|")
            return RedisStorage(url, prefix=prefix)
        return SQLiteStorage(db)

    async def hang(ctx):
        if mode == "start":
            with open(log, "a") as fh:
                fh.write(f"hang:{ctx.run_id}\\n")
            await anyio.sleep(60)           # killed here
        return ctx.input_data

    async def charge(ctx):
        with open(log, "a") as fh:
            fh.write(f"charge:{ctx.run_id}\\n")
        return ctx.input_data + 1

    wf = (create_workflow(id="billing").then(create_step(id="hang", execute=hang))
          .then(create_step(id="charge", execute=charge)).commit())

    async def restart(storage, run_id):
        run = await wf.get_run(run_id, storage=storage)
        try:
            result = await run.restart()
        except RunStateError:
            print("refused", run_id)
        else:
            print(result.status, run_id, result.result)

    async def main():
        async with open_storage() as storage:
            async with anyio.create_task_group() as tg:
                for i in range(TRIALS):
                    if mode == "start":
                        tg.start_soon(wf.create_run(f"r{i}", storage=storage).start, i)
                    else:
                        tg.start_soon(restart, storage, f"r{i}")
                        if i == 0:
                            while not __import__("os").path.exists(go):
                                await anyio.sleep(0.005)

    anyio.run(main)
''')


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def crash_db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "runs.db")
    url = request.getfixturevalue("redis_url")
    return f"redis:{request.getfixturevalue('redis_prefix')}|{url}"


def test_two_processes_restarting_one_crashed_run_run_its_pending_step_once(
        tmp_path: Path, crash_db: str) -> None:
    script, log, go = tmp_path / "billing.py", tmp_path / "log.txt", tmp_path / "go"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}

    def command(mode: str) -> list[str]:
        return [sys.executable, str(script), crash_db, str(log), mode, str(go), str(TRIALS)]

    crashed = subprocess.Popen(command("start"), env=env)
    deadline = time.monotonic() + 30
    try:
        while (log.read_text() if log.exists() else "").count("hang:") < TRIALS:
            assert crashed.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        crashed.send_signal(signal.SIGKILL)
        crashed.wait()
    restarters = [subprocess.Popen(command("restart"), env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True) for _ in range(2)]
    go.touch()
    outputs = []
    for proc in restarters:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        outputs.append(out)

    charges = [line for line in log.read_text().split() if line.startswith("charge:")]
    assert sorted(charges) == sorted(f"charge:r{i}" for i in range(TRIALS))
    lines = "".join(outputs).split("\n")
    for i in range(TRIALS):
        answers = [line for line in lines if line.split(" ")[1:2] == [f"r{i}"]]
        assert len(answers) == 2
        assert any(a == f"success r{i} {i + 1}" for a in answers), answers


def _two_steps(calls: list[str]) -> object:
    async def first(ctx: StepContext) -> int:
        calls.append("first")
        return 1

    async def second(ctx: StepContext) -> int:
        calls.append("second")
        return 2

    return (create_workflow(id="leased").then(create_step(id="first", execute=first))
            .then(create_step(id="second", execute=second)).commit())


async def _crashed_run(storage: InMemoryStorage | SQLiteStorage, *, owner: str,
                       ttl: float) -> None:
    """A stored run that stopped after its first step, its lease held by ``owner``."""
    from procflow.records import RunSnapshot, StepResult

    await storage.save_snapshot(
        RunSnapshot("leased", "r1", "running", created_at=1.0, updated_at=2.0),
        {"first": StepResult("success", 1, started_at=1.0, ended_at=2.0)})
    await storage.acquire_lease("leased", "r1", owner=owner, ttl=ttl)


async def test_a_run_whose_lease_is_live_elsewhere_is_not_restarted(tmp_path: Path) -> None:
    calls: list[str] = []
    wf = _two_steps(calls)
    async with SQLiteStorage(tmp_path / "db.sqlite") as storage:
        await _crashed_run(storage, owner="another-host:1:x", ttl=30)
        run = await wf.get_run("r1", storage=storage)  # type: ignore[attr-defined]
        assert not await run.stalled()
        with pytest.raises(RunStateError, match="being executed by 'another-host:1:x'"):
            await run.restart()
        assert calls == []


async def test_an_expired_lease_makes_the_run_stalled_and_restartable(tmp_path: Path) -> None:
    calls: list[str] = []
    wf = _two_steps(calls)
    async with SQLiteStorage(tmp_path / "db.sqlite") as storage:
        await _crashed_run(storage, owner="another-host:1:x", ttl=0.05)
        await anyio.sleep(0.2)
        run = await wf.get_run("r1", storage=storage)  # type: ignore[attr-defined]
        assert await run.stalled()

        result = await run.restart()

        assert result.status == "success" and result.result == 2
        assert calls == ["second"]
        assert await storage.get_lease("leased", "r1") is None  # released at the end


def test_a_lease_of_a_dead_process_of_this_host_is_dead() -> None:
    import socket

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    host = socket.gethostname()
    assert owner_is_dead(f"{host}:{proc.pid}:x")
    assert not owner_is_dead(f"{host}:{os.getpid()}:x")
    assert not owner_is_dead(f"elsewhere:{proc.pid}:x")
    assert not owner_is_dead("garbage")


async def test_a_running_run_renews_its_lease_and_releases_it_at_the_end(
        tmp_path: Path) -> None:
    storage = SQLiteStorage(tmp_path / "db.sqlite")
    seen: list[float] = []
    release = anyio.Event()

    async def wait(ctx: StepContext) -> int:
        await release.wait()
        return 1

    wf = create_workflow(id="slow", storage=storage).then(
        create_step(id="wait", execute=wait)).commit()
    run = wf.create_run("r1")
    run.lease_ttl = 0.3
    async with anyio.create_task_group() as tg:
        tg.start_soon(run.start)
        for _ in range(4):
            await anyio.sleep(0.2)
            lease = await storage.get_lease("slow", "r1")
            assert lease is not None and lease.owner == run.lease_owner
            seen.append(lease.expires_at)
        release.set()
    assert seen == sorted(seen) and seen[-1] > seen[0]
    assert await storage.get_lease("slow", "r1") is None


async def test_a_run_that_lost_its_lease_stops_without_writing(tmp_path: Path) -> None:
    storage = SQLiteStorage(tmp_path / "db.sqlite")
    wrote: list[str] = []

    async def wait(ctx: StepContext) -> int:
        await anyio.sleep(5)
        wrote.append("wait")
        return 1

    wf = create_workflow(id="slow", storage=storage).then(
        create_step(id="wait", execute=wait)).commit()
    run = wf.create_run("r1")
    run.lease_ttl = 0.15

    async def steal() -> None:
        while True:
            await anyio.sleep(0.01)
            lease = await storage.get_lease("slow", "r1")
            if lease is not None:
                break
        # Simulate a process that stalled past its ttl: the lease expires and another
        # owner takes it before the heartbeat renews it.
        await storage.release_lease("slow", "r1", owner=run.lease_owner)
        await storage.acquire_lease("slow", "r1", owner="thief", ttl=30)

    async with anyio.create_task_group() as tg:
        tg.start_soon(steal)
        with pytest.raises(RunStateError, match="lost its lease"):
            await run.start()
    assert wrote == []
    stored = await storage.load_snapshot("slow", "r1")
    assert stored is not None and stored[0].status == "running"


async def test_an_in_memory_lease_never_expires_while_its_run_runs() -> None:
    # InMemoryStorage lives only in this process: its leases need no heartbeat, and
    # none expires under a running run, however short the ttl.
    storage = InMemoryStorage()
    release = anyio.Event()

    async def wait(ctx: StepContext) -> int:
        await release.wait()
        return 1

    wf = create_workflow(id="slow", storage=storage).then(
        create_step(id="wait", execute=wait)).commit()
    run = wf.create_run("r1")
    run.lease_ttl = 0.05
    async with anyio.create_task_group() as tg:
        tg.start_soon(run.start)
        await anyio.sleep(0.3)
        lease = await storage.get_lease("slow", "r1")
        assert lease is not None and lease.owner == run.lease_owner
        assert lease.expires_at > time.time() + 86400
        other = await wf.get_run("r1")  # type: ignore[attr-defined]
        assert not await other.stalled()
        with pytest.raises(RunStateError, match="being executed by"):
            await other.restart()
        release.set()
    assert run.status == "success"
    assert await storage.get_lease("slow", "r1") is None


class _LeasesOnly(NullStorage):
    """Keeps leases, refuses to save runs: a start written with its lease fails after the
    lease was taken (the default ``acquire_and_save``: two calls)."""

    persistent = True

    def __init__(self) -> None:
        self.leases: dict[tuple[str, str], str] = {}

    async def acquire_lease(self, workflow_id: str, run_id: str, *, owner: str,
                            ttl: float, steal_from: str | None = None) -> Lease | None:
        holder = self.leases.setdefault((workflow_id, run_id), owner)
        return Lease(owner, time.time() + ttl) if holder == owner else None

    async def release_lease(self, workflow_id: str, run_id: str, *, owner: str) -> None:
        if self.leases.get((workflow_id, run_id)) == owner:
            del self.leases[(workflow_id, run_id)]

    async def save_snapshot(self, snapshot: RunSnapshot,
                            steps: Mapping[str, StepResult]) -> None:
        raise StorageError("the database went away")


async def test_a_start_that_fails_after_taking_the_lease_lets_it_go() -> None:
    storage = _LeasesOnly()
    wf = create_workflow(id="w", storage=storage).then(
        create_step(id="a", execute=lambda ctx: 1)).commit()

    with pytest.raises(StorageError, match="went away"):
        await wf.create_run().start(input_data=None)
    assert storage.leases == {}
