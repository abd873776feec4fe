"""Runs on Dramatiq workers: two ``procflow worker`` processes on a private Redis server.

Every process is started here and stopped by its pid (its process group: the Dramatiq
parent and its worker child); every wait is bounded.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("dramatiq")

from procflow.errors import RunNotSuspendedError
from procflow.storage import RedisStorage
from procflow.workers import DramatiqExecutor, WorkerSettings

pytestmark = pytest.mark.timeout(120)

FLOWS = textwrap.dedent('''
    import os
    import anyio
    from procflow import Agent, create_step, create_workflow
    from procflow.agent import tool
    from procflow.models import ScriptedModel, ToolCall

    LOG = os.environ.get("FLOW_LOG", os.devnull)

    def log(line):
        with open(LOG, "a") as fh:
            fh.write(line + "\\n")

    def counted(i):
        async def step(ctx):
            log(f"{ctx.run_id}:s{i}")
            await anyio.sleep(0.01)
            return ctx.input_data + 1
        return create_step(id=f"s{i}", execute=step)

    wf = create_workflow(id="ten")
    for i in range(10):
        wf = wf.then(counted(i))
    ten = wf.commit()

    async def item(ctx):
        log(f"{ctx.run_id}:item:{ctx.input_data}")
        await anyio.sleep(0.05)
        return ctx.input_data * 2

    fan = create_workflow(id="fan").foreach(create_step(id="item", execute=item),
                                            distribute=True).commit()

    async def long_item(ctx):
        log(f"{ctx.run_id}:long:{ctx.input_data}")
        await anyio.sleep(5)  # longer than the tests' 3 s lease
        return ctx.input_data

    long_fan = create_workflow(id="long-fan").foreach(
        create_step(id="item", execute=long_item), distribute=True).commit()

    async def ask(ctx):
        if ctx.resume_data is None:
            log(f"{ctx.run_id}:ask:{os.getpid()}")
            await ctx.suspend({"question": "ok?"})
        return {"answer": ctx.resume_data["answer"]}

    async def finish(ctx):
        log(f"{ctx.run_id}:finish:{os.getpid()}")
        return ctx.input_data["answer"].upper()

    approval = (create_workflow(id="approval").then(create_step(id="ask", execute=ask))
                .then(create_step(id="finish", execute=finish)).commit())

    async def forever(ctx):
        log(f"{ctx.run_id}:slow")
        await anyio.sleep(60)
        return ctx.input_data

    slow = create_workflow(id="slow").then(create_step(id="forever", execute=forever)).commit()

    async def hold(ctx):
        with open(LOG, "a+") as fh:
            fh.seek(0)
            seen = fh.read().count(f"{ctx.run_id}:hold:")
        log(f"{ctx.run_id}:hold:{os.getpid()}")
        if not seen:
            await anyio.sleep(60)  # the first attempt is running when its worker is killed
        return ctx.input_data

    held = create_workflow(id="held").then(create_step(id="hold", execute=hold)).commit()

    helper = Agent(id="helper", instructions="Be brief.",
                   model=ScriptedModel(["all done"] * 500))

    @tool(requires_approval=True)
    async def refund(order_id: str) -> str:
        """Refund an order."""
        log(f"refund:{order_id}:{os.getpid()}")
        return f"refunded {order_id}"

    approver = Agent(id="approver", tools=[refund], model=ScriptedModel(
        [[ToolCall("refund", {"order_id": "A-1"}, id="call-1")], "refund made"]))
''')

RESUME = textwrap.dedent('''
    import sys
    import anyio
    sys.path.insert(0, sys.argv[1])
    from flows import approval
    from procflow.storage import RedisStorage

    async def main():
        async with RedisStorage(sys.argv[2], prefix="procflow") as storage:
            run = await approval.get_run(sys.argv[3], storage=storage)
            result = await run.resume(resume_data={"answer": "yes"})
            print(result.status, result.result)

    anyio.run(main)
''')

WORKER_OPTIONS = ["--processes", "1", "--threads", "4", "--heartbeat-timeout", "3",
                  "--maintenance-chance", "1", "--lease-ttl", "3", "--shutdown-timeout", "5"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A private ``redis-server`` on a free port (skip when the binary is missing)."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed")
    port = _free_port()
    directory = tmp_path_factory.mktemp("redis")
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(directory)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        import redis

        deadline = time.monotonic() + 10
        while True:
            try:
                with redis.Redis.from_url(url, socket_connect_timeout=0.2) as client:
                    client.ping()
                break
            except redis.RedisError:
                assert proc.poll() is None and time.monotonic() < deadline, "no redis-server"
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


class Pool:
    """Worker processes of one test, each the leader of its own process group."""

    def __init__(self, url: str, directory: Path) -> None:
        self.url = url
        self.directory = directory
        self.log = directory / "log.txt"
        (directory / "flows.py").write_text(FLOWS)
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, n: int = 1) -> list[subprocess.Popen[bytes]]:
        env = {**os.environ, "FLOW_LOG": str(self.log), "PYTHONPATH": os.getcwd()}
        targets = [f"{self.directory / 'flows.py'}:{name}"
                   for name in ("ten", "fan", "long_fan", "approval", "slow", "held", "helper",
                             "approver")]
        started = []
        for _ in range(n):
            out = open(self.directory / f"worker-{len(self.procs)}.log", "wb")  # noqa: SIM115
            proc = subprocess.Popen(
                [sys.executable, "-m", "procflow", "worker", *targets, "--redis", self.url,
                 *WORKER_OPTIONS], env=env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)
            out.close()
            self.procs.append(proc)
            started.append(proc)
        return started

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL the worker: its process group (the Dramatiq parent and its child)."""
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def stop(self) -> None:
        # SIGTERM to the Dramatiq parent only: it forwards one to its worker (a second
        # one, sent to the whole group, would make Dramatiq's worker exit uncleanly).
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)

    def lines(self) -> list[str]:
        return self.log.read_text().split() if self.log.exists() else []


@pytest.fixture
def pool(redis_server: str, tmp_path: Path) -> Iterator[Pool]:
    import redis

    with redis.Redis.from_url(redis_server) as client:
        client.flushdb()
    workers = Pool(redis_server, tmp_path)
    sys.path.insert(0, str(tmp_path))
    sys.modules.pop("flows", None)
    try:
        yield workers
    finally:
        workers.stop()
        sys.path.remove(str(tmp_path))
        sys.modules.pop("flows", None)


def _flows() -> Any:
    import flows

    return flows


async def _until(check: Callable[[], bool], what: str, seconds: float = 60) -> None:
    """Wait (bounded) until the workers' log shows ``what``."""
    with anyio.fail_after(seconds):
        while not check():  # noqa: ASYNC110 - the log is written by other processes
            await anyio.sleep(0.05)


def _executor(url: str) -> DramatiqExecutor:
    return DramatiqExecutor(url, settings=WorkerSettings(heartbeat_timeout=3,
                                                         maintenance_chance=1, lease_ttl=3))


async def test_a_killed_worker_loses_no_run_and_repeats_no_completed_step(pool: Pool) -> None:
    flows = _flows()
    pool.start(2)
    async with _executor(pool.url) as executor:
        holder = flows.held.create_run(storage=executor.storage)
        await holder.submit(7, executor=executor)
        runs = []
        for i in range(200):
            run = flows.ten.create_run(storage=executor.storage)
            await run.submit(i, executor=executor)
            runs.append((i, run))
        agent_runs = [await flows.helper.submit(f"question {i}", executor=executor)
                      for i in range(20)]
        await _until(lambda: len(pool.lines()) >= 300, "a third of the steps")
        await _until(lambda: any(":hold:" in line for line in pool.lines()), "the held step")
        # Kill the worker running the held step (its group leader is a pool process), so
        # the kill surely lands inside a running step.
        pid = int(next(line for line in pool.lines() if ":hold:" in line).rsplit(":", 1)[1])
        pool.kill(next(p for p in pool.procs if p.pid == os.getpgid(pid)))

        for i, run in runs:
            result = await run.result(timeout=90)
            assert (result.status, result.result) == ("success", i + 10), run.run_id
        for run_id in agent_runs:
            output = await flows.helper.wait(run_id, executor=executor, timeout=60)
            assert output.text == "all done"

        counts = Counter(line for line in pool.lines() if ":s" in line)
        repeated = {line for line, n in counts.items() if n > 1}
        assert all(n <= 2 for n in counts.values())
        noted = set()
        for _, run in runs:
            trace = await executor.storage.load_trace(run.run_id)
            assert trace is not None
            for span in trace.spans:
                note = (span.get("attributes") or {}).get("note")
                if note == "attempt 2 after worker loss":
                    noted.add(f"{run.run_id}:{span['name']}")
        # A step ran twice only where the trace shows the lost attempt.
        assert repeated <= noted
        held = await holder.result(timeout=60)
        assert (held.status, held.result) == ("success", 7)
        trace = await executor.storage.load_trace(holder.run_id)
        assert trace is not None
        assert any((span.get("attributes") or {}).get("note") == "attempt 2 after worker loss"
                   for span in trace.spans), "the held step's re-run does not show the crash"
    assert sum(p.poll() is None for p in pool.procs) == 1  # the other worker lives on
    shown = await anyio.run_process(
        [sys.executable, "-m", "procflow", "trace", holder.run_id, "--db", pool.url, "--plain"],
        env={**os.environ, "PYTHONPATH": os.getcwd()}, check=False)
    assert "attempt 2 after worker loss" in shown.stdout.decode(), shown.stderr.decode()


async def test_a_run_suspended_on_a_worker_resumes_from_another_process(pool: Pool) -> None:
    flows = _flows()
    pool.start(2)
    async with _executor(pool.url) as executor:
        run = flows.approval.create_run(storage=executor.storage)
        await run.submit({}, executor=executor)
        suspended = await run.result(timeout=60)
        assert suspended.status == "suspended"

        done = await anyio.run_process(
            [sys.executable, "-c", RESUME, str(pool.directory), pool.url, run.run_id],
            env={**os.environ, "PYTHONPATH": os.getcwd()}, check=False)
        assert done.returncode == 0, done.stderr.decode()
        assert done.stdout.decode().split() == ["success", "YES"]
        result = await run.result(timeout=10)
        assert (result.status, result.result) == ("success", "YES")
        asked = [line for line in pool.lines() if ":ask:" in line]
        assert len(asked) == 1


async def test_a_resume_submitted_to_workers_runs_on_a_worker(pool: Pool) -> None:
    flows = _flows()
    pool.start(1)
    async with _executor(pool.url) as executor:
        run = flows.approval.create_run(storage=executor.storage)
        await run.submit({}, executor=executor)
        assert (await run.result(timeout=60)).status == "suspended"

        again = await flows.approval.get_run(run.run_id, storage=executor.storage)
        assert await again.resume_submit(resume_data={"answer": "yes"},
                                         executor=executor) == run.run_id
        result = await again.result(timeout=60)

        assert (result.status, result.result) == ("success", "YES")
        finished = [int(line.rsplit(":", 1)[1]) for line in pool.lines() if ":finish:" in line]
        assert len(finished) == 1 and finished[0] != os.getpid()
        assert os.getpgid(finished[0]) == pool.procs[0].pid  # a child of the worker command
        with pytest.raises(RunNotSuspendedError):
            await again.resume_submit(resume_data={"answer": "no"}, executor=executor)


async def test_an_agent_call_suspended_on_a_worker_is_resumed_on_a_worker(pool: Pool) -> None:
    flows = _flows()
    pool.start(1)
    async with _executor(pool.url) as executor:
        run_id = await flows.approver.submit("refund A-1", executor=executor)
        waiting = await flows.approver.wait(run_id, executor=executor, timeout=60)
        assert [call.tool_call_id for call in waiting.suspended] == ["call-1"]

        await flows.approver.resume_submit(run_id, approve=["call-1"], executor=executor)
        out = await flows.approver.wait(run_id, executor=executor, timeout=60)

        assert out.text == "refund made"
        refunds = [int(line.rsplit(":", 1)[1]) for line in pool.lines()
                   if line.startswith("refund:A-1:")]
        assert len(refunds) == 1 and os.getpgid(refunds[0]) == pool.procs[0].pid


async def test_a_run_is_cancelled_from_the_submitting_process(pool: Pool) -> None:
    flows = _flows()
    pool.start(1)
    async with _executor(pool.url) as executor:
        run = flows.slow.create_run(storage=executor.storage)
        await run.submit(1, executor=executor)
        await _until(lambda: any(":slow" in line for line in pool.lines()), "the step")

        await run.cancel()
        result = await run.result(timeout=30)

        assert result.status == "canceled"
        other = await flows.slow.get_run(run.run_id, storage=executor.storage)
        assert other.status == "canceled"


async def test_a_distributed_foreach_survives_a_killed_worker(pool: Pool) -> None:
    flows = _flows()
    first, _ = pool.start(2)
    async with _executor(pool.url) as executor:
        run = flows.fan.create_run(storage=executor.storage)
        await run.submit(list(range(100)), executor=executor)
        await _until(lambda: len(pool.lines()) >= 30, "30 items")
        pool.kill(first)

        result = await run.result(timeout=90)

        assert result.status == "success"
        assert result.result == [2 * i for i in range(100)]
        counts = Counter(pool.lines())
        assert len(counts) == 100 and all(n <= 2 for n in counts.values())
        # Only what the killed worker was running ran again (4 threads, prefetch 8).
        assert sum(n - 1 for n in counts.values()) <= 8
        # Each item run again shows its lost attempt in the trace, as a chain step does.
        trace = await executor.storage.load_trace(run.run_id)
        assert trace is not None
        noted = {span["path"] for span in trace.spans
                 if (span.get("attributes") or {}).get("note") == "attempt 2 after worker loss"}
        repeated = {f"item[{line.rsplit(':', 1)[1]}]" for line, n in counts.items() if n > 1}
        assert repeated <= noted


async def test_a_run_parked_on_live_items_is_listed_running_not_stalled(pool: Pool) -> None:
    from procflow.studio.listing import run_rows

    flows = _flows()
    pool.start(1)
    async with _executor(pool.url) as executor:
        run = flows.long_fan.create_run(storage=executor.storage)
        await run.submit([1, 2], executor=executor)
        await _until(lambda: sum(":long:" in line for line in pool.lines()) == 2, "2 items")
        await anyio.sleep(3.5)  # past the run's 3 s lease: only the items keep it alive

        stored = await flows.long_fan.get_run(run.run_id, storage=executor.storage)
        rows = await run_rows(executor.storage, "long-fan", None, 10)

        assert stored.status == "running" and not await stored.stalled()
        assert [(r.run_id, r.status) for r in rows] == [(run.run_id, "running")]
        result = await run.result(timeout=60)
        assert (result.status, result.result) == ("success", [1, 2])


async def test_get_run_from_any_process_sees_the_stored_run(pool: Pool) -> None:
    flows = _flows()
    pool.start(1)
    async with _executor(pool.url) as executor:
        run = flows.ten.create_run(storage=executor.storage)
        run_id = await run.submit(5, executor=executor)
        async with RedisStorage(pool.url, prefix="procflow") as storage:
            again = await flows.ten.get_run(run_id, storage=storage)
            result = await again.result(timeout=60, executor=executor)
        assert (result.status, result.result) == ("success", 15)


def test_worker_startup_errors_are_one_line_with_exit_status_2(redis_server: str,
                                                              tmp_path: Path) -> None:
    def worker(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "procflow", "worker", *args],
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PYTHONPATH": os.getcwd()})

    (tmp_path / "flows.py").write_text(FLOWS)
    unknown = worker(f"{tmp_path}/flows.py:missing", "--redis", redis_server)
    port = _free_port()
    down = worker(f"{tmp_path}/flows.py:ten", "--redis", f"redis://127.0.0.1:{port}/0")

    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1
    assert "has no attribute 'missing'" in unknown.stderr
    assert down.returncode == 2 and down.stderr.count("\n") == 1
    assert f"Redis at redis://127.0.0.1:{port}/0 does not answer" in down.stderr
