from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from procflow import Agent, create_step, create_workflow
from procflow.errors import RunNotFoundError, RunStateError
from procflow.evals import (
    Case,
    Contains,
    Dataset,
    ExactMatch,
    ToolCalled,
    compare,
    load_report,
    scorer,
)
from procflow.models import FunctionModel
from procflow.models.base import ModelRequest
from procflow.storage import SQLiteStorage


def geography(request: ModelRequest) -> str:
    return "Paris" if "France" in str(request.prompt[-1]["content"]) else "I don't know"


CAPITALS = Dataset("capitals", cases=[Case(input="Capital of France?", expected="Paris"),
                                      Case(input="Capital of Peru?", expected="Lima")],
                   scorers=[Contains()])


async def test_an_agent_experiment_is_a_stored_run(tmp_path: Path) -> None:
    async with SQLiteStorage(str(tmp_path / "runs.db")) as storage:
        agent = Agent(id="geo", model=FunctionModel(geography), storage=storage)
        report = await CAPITALS.evaluate(agent, storage=storage)
        assert [c.scores for c in report.cases] == [{"Contains": 1.0}, {"Contains": 0.0}]
        assert report.averages == {"Contains": 0.5}
        header = (await storage.load_snapshot("eval:capitals", report.run_id))
        assert header is not None and header[0].status == "success"
        for case in report.cases:  # each case's agent run is stored, its id under the run's
            assert case.run_id is not None and case.run_id.startswith(report.run_id)
            assert await storage.load_snapshot("agent:geo", case.run_id) is not None
        assert await load_report(report.run_id, storage=storage) == report


async def test_a_workflow_target_and_its_failure() -> None:
    def answer(ctx: Any) -> str:
        if ctx.input_data == "boom":
            raise ValueError("no answer")
        return str(ctx.input_data).upper()

    wf = create_workflow(id="upper").then(create_step(id="up", execute=answer)).commit()
    ds = Dataset("upper", cases=[Case(input="a", expected="A"), Case(input="boom")],
                 scorers=[ExactMatch()])
    report = await ds.evaluate(wf)
    ok, failed = report.cases
    assert (ok.output, ok.scores) == ("A", {"ExactMatch": 1.0})
    assert failed.error is not None and "no answer" in failed.error
    assert failed.scores == {"ExactMatch": 0.0}  # a failed target counts against it
    assert [(f.case, f.scorer) for f in report.failures] == [("case-2", None)]


async def test_a_raising_scorer_is_reported_and_the_experiment_goes_on() -> None:
    @scorer
    def picky(case: Case[Any, Any], output: Any) -> bool:
        if case.input == 2:
            raise KeyError("two")
        return True

    ds = Dataset("nums", cases=[Case(input=1), Case(input=2), Case(input=3)],
                 scorers=[picky])
    report = await ds.evaluate(lambda x: x * 10, concurrency=2)
    assert [c.scores["picky"] for c in report.cases] == [1.0, None, 1.0]
    assert report.averages == {"picky": 1.0}
    assert [(f.case, f.scorer, f.error) for f in report.failures] == [
        ("case-2", "picky", "KeyError: 'two'")]


async def test_repeat_scores_each_run_of_each_case() -> None:
    seen: list[int] = []

    async def target(x: int) -> int:
        seen.append(x)
        return x

    ds = Dataset("r", cases=[Case(input=1, expected=1), Case(input=2, expected=0)],
                 scorers=[ExactMatch()])
    report = await ds.evaluate(target, repeat=3)
    assert sorted(seen) == [1, 1, 1, 2, 2, 2]
    assert [c.label for c in report.cases] == ["case-1", "case-1#2", "case-1#3", "case-2",
                                               "case-2#2", "case-2#3"]
    assert report.averages == {"ExactMatch": 0.5}


async def test_tool_calls_of_an_agent_reach_the_scorers() -> None:
    from procflow import tool
    from procflow.models import ToolCall

    @tool
    def lookup(id: int) -> str:
        """Look an order up."""
        return "shipped"

    def reply(request: ModelRequest) -> Any:
        if not any(m["role"] == "tool" for m in request.prompt):
            return [ToolCall("lookup", {"id": 7})]
        return "Order 7 has shipped."

    agent = Agent(id="support", model=FunctionModel(reply), tools=[lookup])
    ds = Dataset("t", cases=[Case(input="where is 7?")], scorers=[ToolCalled("lookup")])
    assert (await ds.evaluate(agent)).averages == {"ToolCalled": 1.0}


async def test_a_stopped_experiment_continues_with_only_its_unfinished_cases(
        tmp_path: Path) -> None:
    calls: Counter[int] = Counter()
    crash = anyio.CancelScope()

    async def target(x: int) -> int:
        calls[x] += 1
        if x == 3 and calls[x] == 1:
            crash.cancel()  # the process "dies" while case 3 is in flight
            await anyio.sleep_forever()
        return x

    ds = Dataset("long", cases=[Case(input=i, expected=i) for i in range(6)],
                 scorers=[ExactMatch()])
    async with SQLiteStorage(str(tmp_path / "runs.db")) as storage:
        with crash:
            await ds.evaluate(target, concurrency=1, run_id="exp-1", storage=storage)
        assert crash.cancelled_caught and calls == Counter({0: 1, 1: 1, 2: 1, 3: 1})
        partial = await load_report("exp-1", storage=storage)
        assert [c.index for c in partial.cases] == [0, 1, 2]
        report = await ds.evaluate(target, concurrency=1, run_id="exp-1", storage=storage)
    assert calls == Counter({0: 1, 1: 1, 2: 1, 3: 2, 4: 1, 5: 1})
    assert (report.status, report.averages) == ("success", {"ExactMatch": 1.0})


async def test_a_finished_run_id_gives_its_stored_report_and_other_cases_are_refused(
        ) -> None:
    calls: list[int] = []

    def target(x: int) -> int:
        calls.append(x)
        return x

    ds = Dataset("again", cases=[Case(input=1, expected=1)], scorers=[ExactMatch()])
    first = await ds.evaluate(target, run_id="again-1")
    assert await ds.evaluate(target, run_id="again-1") == first and calls == [1]
    other = Dataset("again", cases=[Case(input=2)], scorers=[ExactMatch()])
    with pytest.raises(RunStateError, match="other cases"):
        await other.evaluate(target, run_id="again-1")


async def test_compare_lists_the_dropped_case_first() -> None:
    ds = Dataset("cmp", cases=[Case(input=i, expected=i, name=f"n{i}") for i in range(3)],
                 scorers=[ExactMatch()])
    before = await ds.evaluate(lambda x: 0 if x == 0 else x)
    after = await ds.evaluate(lambda x: 0 if x in (0, 2) else 1 if x == 1 else x)
    changes = compare(before, after)
    assert [(c.case, c.before, c.after, c.regression) for c in changes] == [
        ("n2", 1.0, 0.0, True)]


async def test_load_report_of_an_unknown_run() -> None:
    with pytest.raises(RunNotFoundError, match="no experiment 'nope'"):
        await load_report("nope")


@pytest.mark.parametrize("bad", [{"concurrency": 0}, {"repeat": 0}])
async def test_bad_options(bad: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="must be an integer of at least 1"):
        await CAPITALS.evaluate(lambda x: x, **bad)  # type: ignore[arg-type]
