"""``load_trace``: a stored run's trace read back as typed spans, from the public API."""

from __future__ import annotations

from pathlib import Path

import pytest

import procflow
from procflow import Agent, StepContext, Trace, TraceSpan, create_workflow, load_trace, step
from procflow.models import ScriptedModel, ToolCall
from procflow.storage import SQLiteStorage
from procflow.tools import tool


@step(id="double")
async def double(ctx: StepContext) -> int:
    return int(ctx.input_data) * 2


@step(id="boom")
async def boom(ctx: StepContext) -> int:
    raise ValueError("kaboom")


async def test_a_workflow_s_trace_is_a_tree_of_typed_spans(tmp_path: Path) -> None:
    wf = create_workflow(id="math").then(double).then(boom).commit()
    async with SQLiteStorage(tmp_path / "runs.db") as storage:
        result = await wf.create_run(storage=storage).start(input_data=2)
    async with SQLiteStorage(tmp_path / "runs.db") as again:  # as another process would
        trace = await load_trace(result.run_id, storage=again)

    assert isinstance(trace, Trace)
    assert (trace.run_id, trace.workflow_id, trace.status) == (result.run_id, "math", "failed")
    [run] = trace.roots
    assert isinstance(run, TraceSpan) and run.kind == "run" and run.parent_id is None
    assert [(s.name, s.kind, s.path, s.status) for s in run.children] == [
        ("double", "step", "double", "success"), ("boom", "step", "boom", "failed")]
    ok, failed = run.children
    assert (ok.input, ok.output, ok.parent_id) == (2, 4, run.span_id)
    assert ok.duration is not None and ok.duration >= 0
    assert failed.error is not None and "ValueError: kaboom" in failed.error
    assert trace.find(path="boom") == [failed] and trace.spans[0] is run
    with pytest.raises(AttributeError):
        ok.name = "changed"  # type: ignore[misc]


async def test_an_agent_call_s_trace_from_the_default_storage() -> None:
    @tool
    def lookup(order_id: str) -> str:
        """Look an order up."""
        return f"{order_id} shipped"

    model = ScriptedModel([[ToolCall("lookup", {"order_id": "A-1"})], "It shipped."])
    out = await Agent(id="support", model=model, tools=[lookup]).generate("where is A-1?")
    trace = await procflow.load_trace(out.run_id)  # where the run went: no storage named
    assert trace is not None and trace.workflow_id == "agent:support"
    assert trace.status == "success"
    kinds = {span.kind for span in trace.spans}
    assert {"run", "model", "tool"} <= kinds
    [call] = trace.find(kind="tool")
    assert call.status == "success" and "lookup" in call.name
    assert all(isinstance(span.attributes, dict) for span in trace.spans)


async def test_an_unknown_run_has_no_trace(tmp_path: Path) -> None:
    async with SQLiteStorage(tmp_path / "runs.db") as storage:
        assert await load_trace("nope", storage=storage) is None
