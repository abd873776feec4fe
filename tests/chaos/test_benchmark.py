"""``benchmarks/chaos.py``, the long form of these tests, runs and reports a clean round
(one round of the faults that need no server of their own)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(60)]


def _benchmark(name: str) -> Any:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def test_the_chaos_benchmark_reports_a_clean_round(
        capsys: pytest.CaptureFixture[str]) -> None:
    chaos = _benchmark("chaos")

    figures = await chaos.main(1, ["sqlite-full"])

    (sqlite,) = figures.values()
    assert (sqlite.runs, sqlite.faults, sqlite.lost, sqlite.double_effects,
            sqlite.hangs) == (1, 1, 0, 0, 0)
    assert "sqlite-full" in capsys.readouterr().out
