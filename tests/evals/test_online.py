from __future__ import annotations

from pathlib import Path

import pytest

from procflow import Agent
from procflow.evals import Case, Contains, Dataset, NoPII, ToolCalled, load_report, score_runs
from procflow.evals.online import in_sample
from procflow.models import FunctionModel
from procflow.models.base import ModelRequest
from procflow.storage import SQLiteStorage


def reply(request: ModelRequest) -> str:
    asked = str(request.prompt[-1]["content"])
    return "Paris; write to ann@example.com" if "France" in asked else "No idea."


async def test_stored_agent_runs_are_scored_as_an_experiment(tmp_path: Path) -> None:
    async with SQLiteStorage(str(tmp_path / "runs.db")) as storage:
        geo = Agent(id="geo", model=FunctionModel(reply), storage=storage)
        other = Agent(id="other", model=FunctionModel(reply), storage=storage)
        ran = [(await geo.generate(q)).run_id for q in ("France?", "Peru?")]
        await other.generate("France?")
        # the agent runs an experiment makes are not production traffic
        await Dataset("d", [Case(input="France?")], scorers=[NoPII()]).evaluate(
            geo, storage=storage)
        report = await score_runs([NoPII(), Contains("Paris"), ToolCalled("lookup")],
                                  agent="geo", storage=storage)
        assert report.workflow_id == "eval:runs-geo"
        scored = {c.name: (c.input, c.scores) for c in report.cases}
        assert scored == {
            ran[0]: ("France?", {"NoPII": 0.0, "Contains": 1.0, "ToolCalled": 0.0}),
            ran[1]: ("Peru?", {"NoPII": 1.0, "Contains": 0.0, "ToolCalled": 0.0})}
        assert {c.run_id for c in report.cases} == set(ran)  # each case links to its run
        assert await load_report(report.run_id, storage=storage) == report
        everyone = await score_runs([NoPII()], storage=storage)
        assert len(everyone.cases) == 3


def test_sampling_is_stable_and_about_the_share() -> None:
    ids = [f"run-{i}" for i in range(2000)]
    picked = [i for i in ids if in_sample(i, 0.1)]
    assert picked == [i for i in ids if in_sample(i, 0.1)]
    assert 150 < len(picked) < 250
    assert not [i for i in ids if in_sample(i, 0.0)]


async def test_nothing_to_score_says_what_was_asked(tmp_path: Path) -> None:
    async with SQLiteStorage(str(tmp_path / "runs.db")) as storage:
        with pytest.raises(ValueError, match=r"no stored agent run to score \(agent nobody\)"):
            await score_runs([NoPII()], agent="nobody", storage=storage)
