"""Docs that run: every ```python block of README.md and docs/**/*.md is executed as a
script of its own, in a fresh interpreter and an empty directory, offline; every link
stays in the repository or goes to a public web page.

Conventions for a block (an HTML comment on the line right before its fence; the built
site does not show it):

- ``<!-- fragment: docs/snippets/NAME.py -->``: the block is a fragment; the named file,
  kept beside the docs, holds the lines that complete it and runs first, in the same
  script.
- ``<!-- run -->`` before a ```bash block: the block runs too, with ``bash -e`` in an
  empty directory holding a link to the repository's ``examples/``, the ``procflow``
  command on the ``PATH``.
- ``<!-- needs: redis -->`` (or ``postgres``, or both): the block runs against the
  local server (``REDIS_URL``, default ``redis://127.0.0.1:6379/0``;
  ``PROCFLOW_POSTGRES_DSN``, default ``postgresql://postgres@127.0.0.1:5432/test``); it
  is skipped when none answers, unless ``PROCFLOW_REQUIRE_REDIS`` /
  ``PROCFLOW_REQUIRE_POSTGRES`` is set, which makes a missing server a failure.

A ```text block whose info string has ``title="Output"`` right after a python block is
what that block prints: the test compares it with the block's standard output.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
_FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_MARKER = re.compile(r"<!--\s*(fragment|needs|run)(?::\s*(.*?))?\s*-->\s*$")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_SERVICES = {
    "redis": ("REDIS_URL", "redis://127.0.0.1:6379/0", "PROCFLOW_REQUIRE_REDIS"),
    "postgres": ("PROCFLOW_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test",
                 "PROCFLOW_REQUIRE_POSTGRES"),
}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    code: str
    fragment: Path | None = None
    needs: tuple[str, ...] = ()
    output: str | None = None
    language: str = "python"

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def python_blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    fences = list(_FENCE.finditer(text))
    blocks = []
    for i, match in enumerate(fences):
        language = match.group(1).strip().split(" ", 1)[0]
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = _MARKER.search(before)
        if not (language == "python"
                or (language == "bash" and marker and marker.group(1) == "run")):
            continue
        line = text.count("\n", 0, match.start()) + 1
        fragment = needs = None
        if marker and marker.group(1) == "fragment":
            fragment = ROOT / marker.group(2)
        elif marker and marker.group(1) == "needs":
            needs = tuple(marker.group(2).split())
        output = None
        if i + 1 < len(fences):
            after = fences[i + 1]
            if (not text[match.end():after.start()].strip()
                    and after.group(1).strip() == 'text title="Output"'):
                output = after.group(2)
        blocks.append(Block(page, line, match.group(2), fragment, needs or (), output,
                            language))
    return blocks


BLOCKS = [block for page in PAGES for block in python_blocks(page)]


def test_every_page_with_code_has_its_blocks_collected() -> None:
    assert len(BLOCKS) >= 25
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        # An indented fence would escape the collector: every python block starts a line.
        assert not re.search(r"^[ \t]+```python", text, re.MULTILINE), page


def _service_answers(name: str) -> bool:
    variable, default, _ = _SERVICES[name]
    url = urlsplit(os.environ.get(variable, default))
    try:
        with socket.create_connection((url.hostname or "127.0.0.1", url.port or 0),
                                      timeout=1):
            return True
    except OSError:
        return False


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_python_block_runs(tmp_path: Path, block: Block,
                           request: pytest.FixtureRequest) -> None:
    for name in block.needs:
        if not _service_answers(name):
            if os.environ.get(_SERVICES[name][2]):
                pytest.fail(f"{block.where} needs {name}, which does not answer")
            pytest.skip(f"no {name} server")
    code = block.code
    if block.fragment is not None:
        code = block.fragment.read_text(encoding="utf-8") + "\n" + code
    script = tmp_path / ("block.py" if block.language == "python" else "block.sh")
    script.write_text(code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "PROCFLOW_DB", "PROCFLOW_OTEL",
                        "COLUMNS", "FORCE_COLOR")}
    env["OPENAI_BASE_URL"] = "http://127.0.0.1:9/v1"  # nothing may reach a real provider
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["NO_COLOR"] = "1"
    if "postgres" in block.needs:  # the session's own database, not the shared one
        env["PROCFLOW_POSTGRES_DSN"] = request.getfixturevalue("postgres_dsn")
    command = [sys.executable, str(script)]
    if block.language == "bash":
        (tmp_path / "examples").symlink_to(ROOT / "examples")
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
        command = ["bash", "-e", "-o", "pipefail", str(script)]
    done = subprocess.run(command, cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{block.where} failed:\n{done.stderr[-3000:]}"
    if block.output is not None:
        assert done.stdout == block.output, f"{block.where} printed:\n{done.stdout}"


def test_the_collector_reads_markers_and_outputs(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("x\n\n```python\nprint('a')\n```\n\n```text title=\"Output\"\nb\n```\n"
                    "<!-- needs: redis -->\n```python\nraise SystemExit(3)\n```\n"
                    "<!-- fragment: docs/setup.py -->\n```python\nx = 1\n```\n"
                    "```bash\nnot collected\n```\n<!-- run -->\n```bash\nprocflow --help\n```\n")
    first, second, third, fourth = python_blocks(page)
    assert (first.line, first.output, first.needs) == (3, "b\n", ())
    assert (second.line, second.code, second.needs) == (11, "raise SystemExit(3)\n",
                                                        ("redis",))
    assert (third.fragment, third.code) == (ROOT / "docs" / "setup.py", "x = 1\n")
    assert (fourth.language, fourth.code) == ("bash", "procflow --help\n")


def _drawings() -> list[tuple[str, str, str]]:
    """(where, command, drawing) of each ```text block that shows a ``procflow graph``
    of a file in the repository."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            first, _, rest = match.group(2).partition("\n")
            if match.group(1).strip() == "text" and first.startswith("$ procflow graph "):
                target = first.split()[3].partition(":")[0]
                if (ROOT / target).exists():
                    line = text.count("\n", 0, match.start()) + 1
                    found.append((f"{page.relative_to(ROOT)}:{line}", first[2:], rest))
    return found


DRAWINGS = _drawings()


@pytest.mark.parametrize(("where", "command", "drawing"), DRAWINGS,
                         ids=[w for w, _, _ in DRAWINGS])
def test_a_drawing_is_what_the_studio_draws(where: str, command: str, drawing: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env["COLUMNS"] = "80"
    drawn = subprocess.run([sys.executable, "-m", "procflow", *command.split()[1:],
                            "--no-color"], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=60, check=True)
    assert drawn.stdout == drawing, f"{where}: procflow now draws\n{drawn.stdout}"


def test_every_public_module_has_a_reference_page() -> None:
    package = ROOT / "procflow"
    public = {"procflow"}
    public |= {f"procflow.{p.parent.name}" for p in package.glob("*/__init__.py")
               if not p.parent.name.startswith("_")}
    public |= {f"procflow.{p.stem}" for p in package.glob("*.py")
               if not p.stem.startswith("_") and "__all__" in p.read_text(encoding="utf-8")}
    pages = "".join(p.read_text(encoding="utf-8")
                    for p in (ROOT / "docs" / "reference").glob("*.md"))
    documented = set(re.findall(r"^::: (\S+)$", pages, re.MULTILINE))
    assert public <= documented, f"no reference page for {sorted(public - documented)}"


def test_links_stay_in_the_repository_or_go_to_public_pages() -> None:
    for page in PAGES:
        text = _FENCE.sub("", page.read_text(encoding="utf-8"))
        for target in _LINK.findall(text):
            if target.startswith(("https://", "http://")):
                assert not re.match(r"https?://(localhost|127\.|0\.0\.0\.0)", target), target
                continue
            if target.startswith("#"):
                continue
            path = (page.parent / target.split("#", 1)[0]).resolve()
            assert path.is_relative_to(ROOT), f"{page.name}: {target} leaves the repository"
            assert path.exists(), f"{page.name}: {target} does not exist"
        assert "../shared" not in text


def test_the_readme_picture_is_the_studio_s_timeline_of_its_example() -> None:
    # scripts/readme_picture.py draws it again; its timings change, its shape must not
    from xml.etree import ElementTree

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "](docs/images/timeline.svg)" in readme
    svg = (ROOT / "docs" / "images" / "timeline.svg").read_text(encoding="utf-8")
    root = ElementTree.fromstring(svg)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    text = "".join(root.itertext()).replace("\xa0", " ")
    example = (ROOT / "examples" / "studio_demo.py").read_text(encoding="utf-8")
    assert "timeline customer-onboarding-kyc-document-review" in text
    for name in ("check-identity", "collect-documents", "review-document", "decide"):
        assert f'id="{name}"' in example
        assert f"  {name}" in text, f"{name} is not in the picture: run scripts/readme_picture.py"
