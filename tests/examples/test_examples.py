"""Every example runs offline and ends well."""

from __future__ import annotations

import os
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


def test_guarded_agent_streams_redacts_and_blocks(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "guarded_agent.py")],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "should arrive on Thursday" in done.stdout
    assert "[lookup_order → {'status': 'shipped'" in done.stdout
    assert "the model saw the email redacted: True" in done.stdout
    assert "blocked by prompt-injection-detector" in done.stdout


def test_the_guarded_agent_is_drawn_with_its_guardrails_and_tool(tmp_path: Path) -> None:
    # the command the example's docstring gives
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    done = subprocess.run([sys.executable, "-m", "procflow", "graph",
                           f"{ROOT / 'examples' / 'guarded_agent.py'}:support", "--depth", "3"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "workflow agent:support" in done.stdout
    for node in ("workflow guardrails", "processor:prompt-injection-detector",
                 "processor:token-limiter", "tool:lookup_order"):
        assert node in done.stdout, node
