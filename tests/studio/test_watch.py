"""``procflow watch``: a run started by one process is followed to its end by another,
from what storage holds; the exit status is the run's end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.studio.test_cli import procflow

FLOWS = '''
import anyio
from procflow import create_step, create_workflow


def step(name, pause, fail=False):
    async def execute(ctx):
        await anyio.sleep(pause)
        if fail:
            raise ValueError("no good")
        return ctx.input_data
    return create_step(id=name, execute=execute)


slow = (create_workflow(id="slow").then(step("fetch", 0.4))
        .parallel([step("left", 0.4), step("right", 0.2)]).then(step("store", 0.4)).commit())
broken = create_workflow(id="broken").then(step("fetch", 0.3)).then(
    step("parse", 0.2, fail=True)).commit()
stuck = create_workflow(id="stuck").then(step("fetch", 0.1)).then(step("hang", 60)).commit()
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "flows.py").write_text(FLOWS)
    return tmp_path


def start(project: Path, target: str, run_id: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PROCFLOW_DEBUG", "COLUMNS")}
    return subprocess.Popen([sys.executable, "-m", "procflow", "run", target, "--db", "w.db",
                             "--input", "1", "--run-id", run_id, "--no-live"], cwd=project,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            text=True)


def test_a_run_started_elsewhere_is_followed_to_its_end(project: Path) -> None:
    runner = start(project, "flows.py:slow", "w1")
    try:
        watched = procflow(project, "watch", "w1", "--db", "w.db", "--interval", "0.1")
    finally:
        runner.wait(timeout=30)
    assert watched.returncode == 0, watched.stderr
    lines = watched.stdout.splitlines()
    assert lines[0] == "# watching workflow slow\trun w1"
    assert sorted(line.split("\t")[3] for line in lines[1:-1]) == [
        "fetch", "left", "right", "store"]
    assert all(line.split("\t")[1] == "success" for line in lines[1:-1])
    assert lines[-1] == "# run w1\tsuccess"


def test_a_failed_run_ends_the_watch_with_status_1(project: Path) -> None:
    runner = start(project, "flows.py:broken", "b1")
    try:
        watched = procflow(project, "watch", "b1", "--db", "w.db", "--interval", "0.1",
                           "--json")
    finally:
        runner.wait(timeout=30)
    assert watched.returncode == 1
    assert '"status": "failed"' in watched.stdout and "no good" in watched.stdout


def test_a_run_whose_process_died_is_reported_stalled(project: Path) -> None:
    runner = start(project, "flows.py:stuck", "s1")
    try:
        first = procflow(project, "runs", "--db", "w.db", "--json")
        for _ in range(100):
            if '"s1"' in first.stdout and '"running"' in first.stdout:
                break
            first = procflow(project, "runs", "--db", "w.db", "--json")
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=30)
    watched = procflow(project, "watch", "s1", "--db", "w.db", "--interval", "0.1")
    assert watched.returncode == 4, watched.stdout + watched.stderr
    assert watched.stdout.splitlines()[-1].startswith("# run s1\tstalled")


def test_watching_a_run_that_never_comes_says_so(project: Path) -> None:
    (project / "w.db").touch()
    watched = procflow(project, "watch", "nope", "--db", "w.db", "--wait", "0.2",
                       "--interval", "0.1")
    assert watched.returncode == 2
    assert "no run 'nope'" in watched.stderr
