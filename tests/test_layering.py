"""Imports point down: a module may import from its own layer's packages (without a
cycle between packages) or from lower layers, never from a higher one.

Every ``import`` and ``from ... import`` in every module of the package counts —
at module level, inside functions, and under ``if TYPE_CHECKING:`` (a type-only
import still ties the lower layer to the higher one's names and makes refactors
ripple upward). The layers, bottom to top, are ``LAYERS``; docs/index.md ("How the
package is built") describes them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parent.parent / "procflow"

LAYERS: list[set[str]] = [
    # L0: plain data and errors
    {"errors", "context", "messages", "records", "_extras", "_lazy", "_secrets", "_version",
     "_wordscan", "textscan", "_durations"},
    {"_backends"},  # L1: shared SQLite/Redis plumbing
    {"storage"},  # L2: where runs, traces and memory are kept
    {"runtime"},  # L3: the interpreter of compiled plans
    {"steps"},  # L4: units of work
    {"workflows"},  # L5: the builder and its plan entries
    {"tools", "models", "cache"},  # L6: what an LLM call needs
    {"processors"},  # L7: hooks around LLM calls
    {"memory"},  # L8: memory processors and stores
    {"agent"},  # L9: the agent loop
    {"workers", "evals", "mcp"},  # L10: runs on workers (procflow[dramatiq]); experiments; MCP
    {"studio", "otel", "__main__", "__init__"},  # L11: the terminal studio and the public surface
]
"""Bottom to top. ``__init__`` is ``procflow/__init__.py`` (the public surface)."""

KNOWN_VIOLATIONS: set[tuple[str, str]] = set()
"""Upward imports tolerated for now: none. Nothing may be added here."""
"""Upward package edges tolerated for now, as (importer, imported)."""

_LAYER_OF = {name: level for level, names in enumerate(LAYERS) for name in names}


def _package_of(module: str) -> str:
    """The layer unit of a dotted module name: "procflow.runtime.run" -> "runtime"."""
    parts = module.split(".")
    if parts == ["procflow"]:
        return "__init__"
    return parts[1]


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), path


def _imports(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """Every procflow module ``module`` imports, with the line, wherever the import is."""
    is_package = path.name == "__init__.py"
    source = path.read_text(encoding="utf-8")
    try:
        tree = ast.parse(source, filename=str(path))
    except SystemError:  # CPython 3.11: AST recursion-depth mismatch deep in the stack
        with ThreadPoolExecutor(max_workers=1) as pool:
            tree = pool.submit(ast.parse, source, str(path)).result()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "procflow" or alias.name.startswith("procflow."):
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                if not is_package:
                    anchor = anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            if base == "procflow":  # "from procflow import x": x may be a subpackage
                for alias in node.names:
                    sub = f"procflow.{alias.name}"
                    known = (PACKAGE / alias.name).is_dir() or (
                        PACKAGE / f"{alias.name}.py").exists()
                    yield (sub if known else base), node.lineno
            elif base.startswith("procflow."):
                yield base, node.lineno


def _edges() -> list[tuple[str, str, str, int]]:
    """(importer package, imported package, importer module, line) across packages."""
    edges = []
    for module, path in _modules():
        source = _package_of(module)
        for target_module, line in _imports(module, path):
            target = _package_of(target_module)
            if target != source:
                edges.append((source, target, module, line))
    return edges


def test_every_package_has_a_layer() -> None:
    packages = {_package_of(module) for module, _ in _modules()}
    missing = sorted(packages - set(_LAYER_OF))
    assert not missing, f"add these to LAYERS in tests/test_layering.py: {missing}"


def test_imports_point_down() -> None:
    upward = [
        f"{module}:{line} imports procflow.{target} (layer {_LAYER_OF[target]}) from "
        f"{source} (layer {_LAYER_OF[source]})"
        for source, target, module, line in _edges()
        if _LAYER_OF[target] > _LAYER_OF[source] and (source, target) not in KNOWN_VIOLATIONS
    ]
    assert not upward, "imports from a higher layer:\n" + "\n".join(upward)


def test_no_cycle_between_packages() -> None:
    graph = nx.DiGraph()
    for source, target, _, _ in _edges():
        if (source, target) not in KNOWN_VIOLATIONS:
            graph.add_edge(source, target)
    cycles = sorted(sorted(c) for c in nx.simple_cycles(graph))
    assert not cycles, f"import cycles between packages: {cycles}"


def test_known_violations_still_exist() -> None:
    """An entry here that no longer happens must be deleted (the set only shrinks)."""
    present = {(source, target) for source, target, _, _ in _edges()}
    stale = sorted(KNOWN_VIOLATIONS - present)
    assert not stale, f"remove from KNOWN_VIOLATIONS, fixed already: {stale}"


def test_the_checker_sees_function_level_and_type_checking_imports(tmp_path: Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from procflow.agent import Agent\n"
        "def f():\n    from ..studio import cli\n    import procflow.memory\n",
        encoding="utf-8")
    found = [name for name, _ in _imports("procflow.storage.mod", source)]
    assert found == ["procflow.agent", "procflow.studio", "procflow.memory"]
