"""Runs the typed API file ``check_api.py`` (which ``mypy --strict tests/typing`` checks in
``.ci/run``), so that what it pins for the type checker is also what happens."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest

from procflow import Usage

CHECK_API = Path(__file__).with_name("check_api.py")


@pytest.fixture(scope="module")
def api() -> dict[str, Any]:
    return runpy.run_path(str(CHECK_API))


def test_the_typed_workflow_runs(api: dict[str, Any]) -> None:
    refund = api["run_workflow"]()
    assert refund == api["Refund"](refund=3800)


async def test_the_typed_workflow_runs_async(api: dict[str, Any]) -> None:
    assert await api["run_workflow_async"]() == 4900


async def test_a_misspelled_agent_option_is_refused_at_run_time(api: dict[str, Any]) -> None:
    with pytest.raises(TypeError, match=r"generate\(\) got an unexpected option 'max_stepz'; "
                                        r"options: error_processors, "):
        await api["call_agent"]()


def test_the_sync_agent_call_runs(api: dict[str, Any]) -> None:
    assert api["call_agent_sync"]() == "hello"


def test_steps_take_their_function_names(api: dict[str, Any]) -> None:
    assert api["untyped"].id == "untyped"
    assert api["named_by_function"].id == "named_by_function"
    assert api["total"] == Usage(input_tokens=5, output_tokens=2, total_tokens=7)
