"""Draw the README's picture again: a run of ``examples/studio_demo.py:onboarding`` as
``procflow trace RUN_ID --timeline --format svg`` draws it, at 80 columns.

    python scripts/readme_picture.py          # writes docs/images/timeline.svg

The drawing holds the run's real timings, so it changes at every run; the docs tests
check that it is an SVG of this example's steps, not its bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PICTURE = ROOT / "docs" / "images" / "timeline.svg"


def _procflow(cwd: Path, *args: str) -> str:
    env = {**os.environ, "COLUMNS": "80"}
    env.pop("PROCFLOW_DB", None)
    done = subprocess.run([sys.executable, "-m", "procflow", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, check=True, timeout=120)
    return done.stdout


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shutil.copytree(ROOT / "examples", work / "examples")
        _procflow(work, "run", "examples/studio_demo.py:onboarding", "--no-live",
                  "--input", '{"name": "Ada", "documents": 3}')
        [run] = json.loads(_procflow(work, "runs", "--json"))["runs"]
        svg = _procflow(work, "trace", run["run_id"], "--timeline", "--format", "svg")
    PICTURE.parent.mkdir(parents=True, exist_ok=True)
    PICTURE.write_text(svg, encoding="utf-8")
    print(f"wrote {PICTURE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
