"""``procflow run``'s live view in a real terminal: a detached tmux session runs a slow
workflow, and the captured pane shows the final node states and the run id."""

from __future__ import annotations

import os
import re
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


_SOCKETS: dict[str, Path] = {}


def tmux(session: str) -> list[str]:
    """``tmux`` on a server of the session's own, its socket in the test's directory: a
    session on the shared default server could start just as the previous test's last
    session took that server down ("server exited unexpectedly")."""
    return ["tmux", "-S", str(_SOCKETS[session])]


def new_session(session: str, cwd: Path, columns: int, rows: int, command: str) -> None:
    _SOCKETS[session] = cwd / ".tmux-socket"
    subprocess.run([*tmux(session), "new-session", "-d", "-s", session, "-x", str(columns),
                    "-y", str(rows), "-c", str(cwd), command], check=True)


def end_session(session: str) -> None:
    subprocess.run([*tmux(session), "kill-server"], check=False, capture_output=True)
    _SOCKETS.pop(session).unlink(missing_ok=True)


def capture(session: str) -> str:
    result = subprocess.run([*tmux(session), "capture-pane", "-p", "-J", "-S", "-", "-t",
                             session], capture_output=True, text=True, check=False)
    return result.stdout


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_live_view_in_a_terminal(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(SLOW)
    session = f"procflow-live-{os.getpid()}-{time.monotonic_ns()}"
    command = " ".join(shlex.quote(w) for w in [
        sys.executable, "-m", "procflow", "--db", str(tmp_path / "runs.db"), "run",
        "slow.py:slow_flow", "--input", "1"]) + "; sleep 5"
    new_session(session, tmp_path, 120, 40, command)
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
        end_session(session)


DEMO = Path(__file__).resolve().parents[2] / "examples" / "studio_demo.py"


class Pane:
    """A detached tmux pane running one shell command in ``cwd``."""

    def __init__(self, cwd: Path, command: str, *, columns: int, rows: int,
                 **env: str) -> None:
        self.session = f"procflow-{os.getpid()}-{time.monotonic_ns()}"
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        full = f"unset COLUMNS LINES; export TERM=xterm-256color {exports}; {command}; sleep 30"
        new_session(self.session, cwd, columns, rows, full)

    def screen(self) -> str:
        """What the pane shows now (no scrollback)."""
        return subprocess.run([*tmux(self.session), "capture-pane", "-p", "-t", self.session],
                              capture_output=True, text=True, check=False).stdout

    def everything(self) -> str:
        return capture(self.session)

    def wait_for(self, text: str, timeout: float = 40) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pane = self.everything()
            if text in pane:
                return pane
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never appeared:\n{self.everything()}")

    def keys(self, *keys: str) -> None:
        subprocess.run([*tmux(self.session), "send-keys", "-t", self.session, *keys],
                       check=True)

    def close(self) -> None:
        end_session(self.session)


def procflow_command(*args: str) -> str:
    return " ".join(shlex.quote(w) for w in [sys.executable, "-m", "procflow", *args])


needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


@needs_tmux
@pytest.mark.parametrize("columns", [80, 200])
def test_a_tall_workflow_scrolls_to_its_running_step(tmp_path: Path, columns: int) -> None:
    shutil.copy(DEMO, tmp_path / "studio_demo.py")
    pane = Pane(tmp_path, procflow_command("run", "studio_demo.py:long_review", "--input", "0"),
                columns=columns, rows=20, STUDIO_DEMO_DELAY="0.15")
    try:
        seen: set[str] = set()  # running steps seen with the "more above" line
        deadline = time.monotonic() + 60
        while "run id:" not in (screen := pane.screen()) and time.monotonic() < deadline:
            assert len(screen.rstrip("\n").splitlines()) <= 20
            if "more lines above" in screen:  # (a capture may catch a redraw half done)
                seen.update(re.findall(r"◐ □ (step-\d\d)", screen))
            time.sleep(0.05)
        assert any(int(name[5:]) > 20 for name in seen), seen  # far below the first screen
        everything = pane.wait_for("run id:")
        assert "output: 40" in everything
        # the final frame once: each step's final line appears a single time
        assert everything.count("● □ step-01") == 1, everything
        assert "more lines" not in everything.split("workflow long-review")[-1]
    finally:
        pane.close()


@needs_tmux
def test_ctrl_c_cancels_the_run_and_prints_its_id(tmp_path: Path) -> None:
    shutil.copy(DEMO, tmp_path / "studio_demo.py")
    pane = Pane(tmp_path, procflow_command("run", "studio_demo.py:long_review", "--input", "0",
                                           "--run-id", "stopped-run"),
                columns=100, rows=20, STUDIO_DEMO_DELAY="0.3")
    try:
        pane.wait_for("◐ □ step-03")
        pane.keys("C-c")
        everything = pane.wait_for("run id: stopped-run")
        assert "interrupted" in everything
        assert "procflow trace stopped-run" in everything
        assert "Traceback" not in everything
    finally:
        pane.close()
    listed = subprocess.run([sys.executable, "-m", "procflow", "runs"], cwd=tmp_path,
                            capture_output=True, text=True, check=False).stdout
    assert re.search(r"^stopped-run\tlong-review\t(canceled|running)", listed, re.MULTILINE), \
        listed


@needs_tmux
@pytest.mark.parametrize("columns", [80, 200])
def test_runs_table_in_a_terminal(tmp_path: Path, columns: int) -> None:
    shutil.copy(DEMO, tmp_path / "studio_demo.py")
    for _ in range(2):
        subprocess.run([sys.executable, "-m", "procflow", "run", "studio_demo.py:onboarding",
                        "--input", '{"name": "Ada"}'], cwd=tmp_path, capture_output=True,
                       check=True, env={**os.environ, "STUDIO_DEMO_DELAY": "0"})
    pane = Pane(tmp_path, procflow_command("runs") + "; echo END", columns=columns, rows=30)
    try:
        screen = pane.wait_for("END")
    finally:
        pane.close()
    rows = [line for line in screen.splitlines() if "● success" in line]
    assert len(rows) == 2, screen
    for line in rows:
        short_id = line.split()[0]
        assert 8 <= len(short_id) < 32  # a unique prefix, not the whole id
        assert re.search(r"\d\d-\d\d \d\d:\d\d:\d\d", line)  # start time on one line
    name = "customer-onboarding-kyc-document-review"
    if columns >= 120:
        assert all(name in line for line in rows), screen
    else:  # the names wrap, nothing else does, nothing is cut
        assert "…" not in screen
        lines = screen.splitlines()
        for line in rows:
            head = line.split()[1]
            rest = lines[lines.index(line) + 1].strip()
            assert head + rest == name, (head, rest)
