"""The README's Memory snippet runs offline as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_memory_snippet_runs(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    found = re.search(r"## Memory\n\n```python\n(.*?)```", readme, re.S)
    assert found is not None
    done = subprocess.run([sys.executable, "-c", found.group(1)], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "You are Ada."
    assert (tmp_path / "chat.db").exists()
