"""``procflow run``'s live view in a real terminal: a detached tmux session runs a slow
workflow, and the captured pane shows the final node states and the run id."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

SLOW = '''
import anyio
from procflow import create_step, create_workflow


def slow(name, fn):
    async def execute(ctx):
        await anyio.sleep(0.2)
        return fn(ctx.input_data)
    return create_step(id=name, execute=execute)


slow_flow = (create_workflow(id="slow")
             .then(slow("fetch", lambda x: x + 1))
             .parallel([slow("left", lambda x: x), slow("right", lambda x: x * 10)])
             .map(lambda ctx: [1, 2, 3])
             .foreach(slow("each", lambda x: x * x))
             .then(slow("finish", sum))
             .commit())
'''


def capture(session: str) -> str:
    result = subprocess.run(["tmux", "capture-pane", "-p", "-J", "-S", "-", "-t", session],
                            capture_output=True, text=True, check=False)
    return result.stdout


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_live_view_in_a_terminal(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(SLOW)
    session = f"procflow-live-{os.getpid()}-{time.monotonic_ns()}"
    command = " ".join(shlex.quote(w) for w in [
        sys.executable, "-m", "procflow", "--db", str(tmp_path / "runs.db"), "run",
        "slow.py:slow_flow", "--input", "1"]) + "; sleep 5"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "40",
                    "-c", str(tmp_path), command], check=True)
    try:
        deadline = time.monotonic() + 30
        pane = capture(session)
        seen_running = False
        while "run id:" not in pane and time.monotonic() < deadline:
            seen_running = seen_running or "◐" in pane
            time.sleep(0.1)
            pane = capture(session)
        assert "run id:" in pane, pane
        assert seen_running, "the live view never showed a running node"
        for name in ("fetch", "left", "right", "each", "finish"):
            assert f"● □ {name}" in pane, pane
        assert "3/3 items" in pane
        assert "● success" in pane
        assert "output: 14" in pane
        assert (tmp_path / "runs.db").is_file()
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False,
                       capture_output=True)
