"""Docs that run: every ```python block of README.md is executed, on its own, in a
fresh interpreter and an empty directory, offline; every link stays in the repository
or goes to a public web page.

A block that needs something it cannot define says so in a comment and defines a
stand-in (``# placeholder: ...``). Blocks may use top-level ``await`` (run with anyio).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")

DRIVER = r"""
import ast, sys, types
import anyio

source = open(sys.argv[1], encoding="utf-8").read()
code = compile(source, sys.argv[2], "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
module = types.ModuleType("__main__")
sys.modules["__main__"] = module
result = eval(code, module.__dict__)
if result is not None:  # a coroutine: the block awaits at top level
    async def main():
        await result
    anyio.run(main)
"""


def python_blocks(text: str) -> list[tuple[str, str]]:
    """(id, code) of each ```python block: "line N" of its fence, and its heading."""
    blocks = []
    for match in _FENCE.finditer(text):
        if match.group(1) != "python":
            continue
        line = text.count("\n", 0, match.start()) + 1
        prose = _FENCE.sub("", text[:match.start()])  # a "# comment" in code is no heading
        heading = next((h for h in reversed(re.findall(r"^#+ (.+)$", prose, re.MULTILINE))),
                       "top")
        blocks.append((f"line {line} ({heading})", match.group(2)))
    return blocks


BLOCKS = python_blocks(README.read_text(encoding="utf-8"))


def test_the_readme_has_python_blocks() -> None:
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize(("where", "code"), BLOCKS, ids=[w for w, _ in BLOCKS])
def test_python_block_runs(tmp_path: Path, where: str, code: str) -> None:
    block = tmp_path / "block.py"
    block.write_text(code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "PROCFLOW_DB", "PROCFLOW_OTEL")}
    env["OPENAI_BASE_URL"] = "http://127.0.0.1:9/v1"  # nothing may reach a real provider
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", DRIVER, str(block), f"README.md {where}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, f"README.md {where} failed:\n{done.stderr[-3000:]}"


def test_links_stay_in_the_repository_or_go_to_public_pages() -> None:
    text = README.read_text(encoding="utf-8")
    for target in _LINK.findall(text):
        if target.startswith(("https://", "http://")):
            assert not re.match(r"https?://(localhost|127\.|0\.0\.0\.0)", target), target
            continue
        path = (ROOT / target.split("#", 1)[0]).resolve()
        assert path.is_relative_to(ROOT), f"{target} leaves the repository"
        assert path.exists(), f"{target} does not exist"
    assert "../shared" not in text
