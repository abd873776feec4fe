"""``procflow run --resume ... --data`` with bytes that are not UTF-8 is a clear error
and the run stays suspended (issue 42)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.studio.test_cli import make_project, ok, procflow


def test_non_utf8_resume_data_is_refused_and_the_run_stays_suspended(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    ok(procflow(root, "run", "flows.py:approval", "--input", "50", "--run-id", "s1"))
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}

    refused = subprocess.run(
        [sys.executable.encode(), b"-m", b"procflow", b"run", b"flows.py:approval",
         b"--resume", b"approve", b"--run", b"s1", b"--data", b'{"ok": "\xff"}'],
        cwd=root, env=env, capture_output=True, timeout=30, check=False)
    runs = procflow(root, "--plain", "runs")
    resumed = procflow(root, "run", "flows.py:approval", "--resume", "approve", "--run",
                       "s1", "--data", '{"ok": true}')

    assert refused.returncode == 2
    assert b"--data is not UTF-8 text (byte 0xff" in refused.stderr
    assert b"Traceback" not in refused.stderr
    assert [line.split("\t")[2] for line in runs.stdout.splitlines()] == ["suspended"]
    assert resumed.returncode == 0, resumed.stderr


def test_a_non_utf8_data_file_is_refused(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    ok(procflow(root, "run", "flows.py:approval", "--input", "50", "--run-id", "s1"))
    (root / "data.json").write_bytes(b'{"ok": "\xff"}')

    refused = procflow(root, "run", "flows.py:approval", "--resume", "approve", "--run",
                       "s1", "--data", "@data.json")

    assert refused.returncode == 2
    assert "is not UTF-8 text (byte 0xff at offset 8)" in refused.stderr
