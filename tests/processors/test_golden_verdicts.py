"""Every guard's verdicts and spans over the golden inputs are those pinned in
``tests/processors/data/golden_verdicts.jsonl.gz``, on both engines.

A change that moves one fails here with a readable diff of the first inputs that
moved. When the move is meant, regenerate the file with
``python scripts/golden_verdicts.py write`` and commit it with the change."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "golden_verdicts", ROOT / "scripts" / "golden_verdicts.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("golden_verdicts", module)
    spec.loader.exec_module(module)
    return module


golden = _script()


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    return golden.read()  # type: ignore[no-any-return]


def test_golden_covers_every_guard(rows: list[dict[str, Any]]) -> None:
    verdicts = [row["re2"] for row in rows]
    found = {"pii": sum(bool(v["pii"]) for v in verdicts),
             "injection": sum(v["injection"]["flagged"] for v in verdicts),
             "moderation": sum(v["moderation"]["flagged"] for v in verdicts),
             "regex": sum(bool(v["regex"]["counts"]) for v in verdicts)}
    assert len(rows) > 5_000
    assert all(count > 400 for count in found.values()), found


@pytest.mark.timeout(120)
@pytest.mark.parametrize("engine", ["re2", "re"])
def test_verdicts_unchanged(rows: list[dict[str, Any]], engine: str) -> None:
    if engine == "re2":
        pytest.importorskip("re2")
    report = golden.differences(rows, engine)
    assert not report, "\n".join(report)
