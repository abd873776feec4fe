"""restart(): continue a run whose process died, without re-running completed steps."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from procflow import RunStateError, StepContext, create_step, create_workflow
from procflow.storage import InMemoryStorage, SQLiteStorage

SCRIPT = textwrap.dedent('''
    import sys, time
    import anyio
    from procflow import create_step, create_workflow
    from procflow.storage import PostgresStorage, SQLiteStorage

    db, log, mode, run_id = sys.argv[1:5]

    def open_storage():
        if db.startswith("postgres:"):
            schema, _, dsn = db.removeprefix("postgres:").partition(":")
            return PostgresStorage(dsn, schema=schema)
        return SQLiteStorage(db)

    def logged(name, slow=False):
        async def run(ctx):
            with open(log, "a") as fh:
                fh.write(name + "\\n")
            if slow and mode == "start":
                await anyio.sleep(60)          # killed here
            return [*ctx.input_data, name]
        return create_step(id=name, execute=run)

    wf = (create_workflow(id="crashy")
          .then(logged("one")).then(logged("two"))
          .parallel([logged("left"), logged("right")])
          .map(lambda ctx: ctx.input_data["left"] + ["joined"])
          .then(logged("three", slow=True)).then(logged("four")).commit())

    async def main():
        async with open_storage() as storage:
            if mode == "start":
                await wf.create_run(run_id, storage=storage).start(input_data=[])
            else:
                run = await wf.get_run(run_id, storage=storage)
                result = await run.restart()
                print(result.status, result.result)

    anyio.run(main)
''')


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def crash_db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "runs.db")
    dsn = request.getfixturevalue("postgres_dsn")
    return f"postgres:{request.getfixturevalue('postgres_schema')}:{dsn}"


def test_sigkilled_run_restarts_in_a_fresh_process(tmp_path: Path, crash_db: str) -> None:
    script, db, log = tmp_path / "crashy.py", crash_db, tmp_path / "log.txt"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen([sys.executable, str(script), str(db), str(log), "start", "r1"],
                            env=env)
    deadline = time.monotonic() + 30
    while "three" not in (log.read_text() if log.exists() else ""):
        assert proc.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline, "the run never reached step three"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = subprocess.run([sys.executable, str(script), str(db), str(log), "restart", "r1"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(" ", 1)[0] == "success"
    assert "['one', 'two', 'left', 'joined', 'three', 'four']" in done.stdout
    runs = log.read_text().split()
    assert sorted(runs) == sorted(["one", "two", "left", "right", "three", "three", "four"])


async def test_restart_of_failed_run_reruns_only_the_failed_part() -> None:
    calls: dict[str, int] = {}
    broken = {"yes": True}

    def step_fn(name: str) -> Any:
        def run(ctx: StepContext) -> Any:
            calls[name] = calls.get(name, 0) + 1
            if name == "b" and broken["yes"]:
                raise RuntimeError("flaky dependency")
            return name
        return create_step(id=name, execute=run)

    wf = create_workflow(id="w", storage=InMemoryStorage()).then(step_fn("a")).then(
        step_fn("b")).then(step_fn("c")).commit()
    run = wf.create_run()
    assert (await run.start()).status == "failed"
    broken["yes"] = False
    result = await run.restart()
    assert result.status == "success" and calls == {"a": 1, "b": 2, "c": 1}
    assert await run.restart() is result  # a successful run returns its result


async def test_restart_through_when_keeps_skips_and_reruns_only_the_failed_part(
        tmp_path: Path) -> None:
    calls: list[str] = []
    broken = {"yes": True}

    def step_fn(name: str) -> Any:
        def run(ctx: StepContext) -> Any:
            calls.append(name)
            if name == "c" and broken["yes"]:
                raise RuntimeError("flaky dependency")
            return [*ctx.input_data, name]
        return create_step(id=name, execute=run)

    async with SQLiteStorage(tmp_path / "w.db") as storage:
        wf = (create_workflow(id="w", storage=storage).then(step_fn("a"))
              .when(lambda ctx: len(ctx.input_data) > 5, step_fn("b"))
              .when(lambda ctx: True, step_fn("c")).commit())
        run = wf.create_run()
        assert (await run.start(input_data=[])).status == "failed"
        stored = await storage.load_snapshot("w", run.run_id)
        assert stored is not None and stored[1]["b"].status == "skipped"
        broken["yes"] = False
        result = await run.restart()
    assert result.status == "success" and result.result == ["a", "c"]
    assert calls == ["a", "c", "c"] and result.steps["b"].status == "skipped"


async def test_restart_refuses_new_and_suspended_runs(tmp_path: Path) -> None:
    async def wait(ctx: StepContext) -> None:
        await ctx.suspend()

    async with SQLiteStorage(tmp_path / "r.db") as storage:
        wf = create_workflow(id="w", storage=storage).then(
            create_step(id="wait", execute=wait)).commit()
        run = wf.create_run()
        with pytest.raises(RunStateError, match="never started"):
            await run.restart()
        await run.start()
        with pytest.raises(RunStateError, match="use resume"):
            await run.restart()


async def test_loop_restart_continues_from_the_last_iteration() -> None:
    calls: list[int] = []
    storage = InMemoryStorage()

    def inc(ctx: StepContext) -> int:
        calls.append(ctx.input_data)
        if ctx.input_data == 2 and len(calls) == 3:
            raise RuntimeError("crash on third iteration")
        return int(ctx.input_data) + 1

    wf = create_workflow(id="w", storage=storage).dountil(
        create_step(id="inc", execute=inc), lambda ctx: ctx.input_data >= 5).commit()
    run = wf.create_run()
    assert (await run.start(input_data=0)).status == "failed"
    result = await run.restart()
    assert result.result == 5
    assert calls == [0, 1, 2, 2, 3, 4]  # iterations 1 and 2 were not re-run


async def test_replay_inside_a_loop_runs_steps_an_earlier_pass_left_anew() -> None:
    """Replaying a step of a loop's last pass: a nested step that ran in an earlier pass
    but was skipped in the last one still has that pass's record; the replay must run
    it, not reuse it."""
    calls: list[str] = []
    wide = {"on": False}  # the replayed "pick" takes the branch the stored last pass skipped

    def pick(ctx: StepContext) -> Any:
        calls.append("pick")
        n = ctx.input_data["n"] + 1
        return {"n": n, "tool": n == 1 or wide["on"], "log": ctx.input_data["log"]}

    def work(ctx: StepContext) -> Any:
        calls.append(f"work@{ctx.input_data['n']}")
        return {**ctx.input_data, "log": [*ctx.input_data["log"], ctx.input_data["n"]]}

    def prepare(ctx: StepContext) -> Any:
        calls.append("prepare")
        return ctx.input_data

    tools = create_workflow(id="tools").then(create_step(id="work", execute=work)).commit()
    body = (create_workflow(id="body")
            .then(create_step(id="prepare", execute=prepare))
            .then(create_step(id="pick", execute=pick))
            .branch([(lambda ctx: ctx.input_data["tool"], tools)])
            .map(lambda ctx: ctx.get_step_result("tools") or ctx.get_step_result("pick"))
            .commit())
    storage = InMemoryStorage()
    wf = (create_workflow(id="loop", storage=storage)
          .dountil(body, lambda ctx: ctx.input_data["n"] >= 2).commit())
    first = wf.create_run()
    done = await first.start(input_data={"n": 0, "tool": False, "log": []})
    assert done.result == {"n": 2, "tool": False, "log": [1]}
    assert calls == ["prepare", "pick", "work@1", "prepare", "pick"]  # pass 2: no "tools"

    calls.clear()
    wide["on"] = True
    loaded = await wf.get_run(first.run_id)
    replay = await loaded.replay_from("body.pick")
    assert replay.last_result is not None
    # "prepare" of the last pass is kept (it ended before "pick" started); "work" runs
    # anew instead of handing back the first pass's stored result
    assert calls == ["pick", "work@2"]
    assert replay.last_result.result == {"n": 2, "tool": True, "log": [1, 2]}


async def test_replay_from_a_step_is_a_new_run_reusing_earlier_results() -> None:
    calls: list[str] = []

    def step_fn(name: str) -> Any:
        def run(ctx: StepContext) -> Any:
            calls.append(name)
            return f"{ctx.input_data}>{name}"
        return create_step(id=name, execute=run)

    storage = InMemoryStorage()
    wf = (create_workflow(id="w", storage=storage).then(step_fn("a")).then(step_fn("b"))
          .then(step_fn("c")).commit())
    first = wf.create_run()
    await first.start(input_data="in")
    loaded = await wf.get_run(first.run_id)
    replay = await loaded.replay_from("b")
    assert replay.run_id != first.run_id and replay.last_result is not None
    assert replay.last_result.result == "in>a>b>c"
    assert calls == ["a", "b", "c", "b", "c"]
    assert replay.last_result.steps["a"].started_at == first.last_result.steps["a"].started_at  # type: ignore[union-attr]
    trace = await storage.load_trace(replay.run_id)
    assert trace is not None
    assert trace.spans[0]["attributes"]["replayed_from"] == {"run_id": first.run_id, "step": "b"}
    with pytest.raises(RunStateError, match="step 'zzz' has no stored result"):
        await loaded.replay_from("zzz")
