"""The runnable seed examples (``examples/seeds/``) run offline and print what the seeds
say happens."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(name: str, cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "seeds" / name), *args],
                          capture_output=True, text=True, timeout=120, cwd=cwd, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_processors_overview(tmp_path: Path) -> None:
    out = run("processors_overview.py", tmp_path)
    assert "'The capital of France is Paris.' after 2 model calls" in out
    assert "harassment" in out and "model calls: 0" in out
    assert "the model got: 'hello world'" in out
    assert "Total words: 4" in out and "streamed: 'the word is swordfish'" in out
    assert "bob@example.com" not in out
    assert "injection: tripwire from prompt-injection-detector" in out


def test_response_cache(tmp_path: Path) -> None:
    lines = run("response_cache.py", tmp_path).splitlines()
    sources = [(line.split("from ")[1].split(";")[0], line.rsplit(" ", 1)[1])
               for line in lines if "model calls so far" in line]
    assert sources == [("model", "1"), ("cache", "1"), ("model", "2"), ("cache", "2"),
                       ("model", "3"), ("cache", "3"), ("model", "4")]
    assert "caller-meta kept: {'userId': 'u-123'}" in lines


def test_memory_processors(tmp_path: Path) -> None:
    out = run("memory_processors.py", tmp_path, str(tmp_path))
    assert (tmp_path / "memory.db").exists()
    assert "the model saw 10 remembered messages (of 12 stored)" in out
    assert "stored after the call: 14 messages, last: 'answer 6'" in out
    assert "recalled beyond the last 2: ['user: My cat is named Whiskers" in out
    assert "output: ['message-history']; the model saw it: True" in out
    assert "the model saw 14 remembered messages of the 14 stored (limit 20" in out
    assert "Blocked: Content blocked by guardrail" in out
    assert "messages stored: 0" in out
