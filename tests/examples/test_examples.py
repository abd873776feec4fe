"""Every example runs offline and ends well."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quickstart_suspends_then_resumes(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "quickstart.py"),
                           str(tmp_path / "q.db")], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "step-suspended  approve" in done.stdout
    assert "step-skipped    auto-approve" in done.stdout
    assert "resumed: success, result=3, approve='approved'" in done.stdout
