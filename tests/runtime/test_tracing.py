"""Traces: every run records spans, stored through its storage, secrets redacted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from procflow import StepContext, create_step, create_workflow
from procflow.agent import Agent, tool
from procflow.models import ScriptedModel, ToolCall
from procflow.processors import Processor
from procflow.runtime.tracing import TraceRecord, redact_secrets
from procflow.storage import InMemoryStorage, SQLiteStorage


def s(id: str, fn: Any) -> Any:
    return create_step(id=id, execute=fn)


def by_name(trace: TraceRecord) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in trace.spans}


async def test_workflow_trace_has_run_steps_and_containers() -> None:
    storage = InMemoryStorage()
    inner = create_workflow(id="inner").then(s("i1", lambda c: c.input_data + 1)).commit()
    flaky_calls = 0

    def flaky(ctx: StepContext) -> int:
        nonlocal flaky_calls
        flaky_calls += 1
        if flaky_calls == 1:
            raise ConnectionError("once")
        return 1

    wf = (create_workflow(id="traced", storage=storage, retry_delay=0)
          .then(s("a", lambda c: c.input_data))
          .parallel([s("b", lambda c: 1), create_step(id="flaky", execute=flaky, retries=1)])
          .map(lambda c: [1, 2])
          .foreach(s("each", lambda c: c.input_data * 2), concurrency=2)
          .map(lambda c: 0)
          .then(inner)
          .dountil(s("inc", lambda c: c.input_data + 1), lambda c: c.input_data >= 3)
          .commit())
    run = wf.create_run()
    await run.start(input_data=5)
    trace = await storage.load_trace(run.run_id)
    assert trace is not None and trace.status == "success" and trace.workflow_id == "traced"
    spans = by_name(trace)
    root = spans["run: traced"]
    assert root["kind"] == "run" and root["parent_id"] is None and root["input"] == 5
    assert spans["a"]["parent_id"] == root["span_id"] and spans["a"]["output"] == 5
    parallel = spans["parallel"]
    assert parallel["kind"] == "parallel"
    assert spans["b"]["parent_id"] == parallel["span_id"]
    assert spans["flaky"]["attributes"]["attempts"] == 2
    each_items = [r for r in trace.spans if r["path"] in ("each[0]", "each[1]")]
    foreach = next(r for r in trace.spans if r["kind"] == "foreach")
    assert {r["parent_id"] for r in each_items} == {foreach["span_id"]}
    assert foreach["attributes"] == {"items": 2, "concurrency": 2}
    assert spans["i1"]["parent_id"] == spans["inner"]["span_id"]
    loop = next(r for r in trace.spans if r["kind"] == "loop")
    assert loop["attributes"]["iterations"] == 2
    assert all(r["end"] is not None and r["end"] >= r["start"] for r in trace.spans)


async def test_failed_and_skipped_spans() -> None:
    storage = InMemoryStorage()

    def boom(ctx: StepContext) -> None:
        raise ValueError("bad input")

    wf = (create_workflow(id="w", storage=storage)
          .branch([(lambda c: False, s("no", lambda c: 1)), (lambda c: True, s("boom", boom))])
          .commit())
    run = wf.create_run()
    await run.start()
    spans = by_name(await storage.load_trace(run.run_id))  # type: ignore[arg-type]
    assert spans["no"]["status"] == "skipped"
    assert spans["boom"]["status"] == "failed" and "ValueError: bad input" in spans["boom"]["error"]
    assert spans["run: w"]["status"] == "failed"


async def test_a_branch_span_groups_several_arms_and_a_gate_has_none() -> None:
    storage = InMemoryStorage()
    wf = (create_workflow(id="w", storage=storage)
          .branch([(lambda c: True, s("left", lambda c: 1)),
                   (lambda c: True, s("right", lambda c: 2))])
          .map(lambda c: c.input_data["left"])
          .branch([(lambda c: c.input_data > 0, s("gated", lambda c: c.input_data))])
          .map(lambda c: c.input_data["gated"])
          .branch([(lambda c: False, s("never", lambda c: 0))])
          .commit())
    run = wf.create_run()
    await run.start()
    trace = await storage.load_trace(run.run_id)
    assert trace is not None
    spans = by_name(trace)
    root, branch = spans["run: w"], spans["branch"]
    assert [r["name"] for r in trace.spans if r["kind"] == "branch"] == ["branch"]
    assert branch["attributes"] == {"branches": 2}
    assert spans["left"]["parent_id"] == spans["right"]["parent_id"] == branch["span_id"]
    # One arm: its step's span (run or skipped) sits where the branch is.
    assert spans["gated"]["parent_id"] == root["span_id"] and spans["gated"]["output"] == 1
    assert spans["never"]["parent_id"] == root["span_id"]
    assert spans["never"]["status"] == "skipped"


async def test_suspend_and_resume_append_to_one_trace(tmp_path: Path) -> None:
    async def wait(ctx: StepContext) -> str:
        if ctx.resume_data is None:
            await ctx.suspend()
        return "ok"

    async with SQLiteStorage(tmp_path / "t.db") as storage:
        wf = create_workflow(id="w", storage=storage).then(s("wait", wait)).commit()
        run = wf.create_run()
        await run.start()
        again = await wf.get_run(run.run_id)
        await again.resume(resume_data=1)
        trace = await storage.load_trace(run.run_id)
    assert trace is not None and trace.status == "success"
    statuses = [(r["name"], r["status"]) for r in trace.spans]
    assert statuses == [("run: w", "suspended"), ("wait", "suspended"),
                        ("run: w", "success"), ("wait", "success")]


async def test_tracing_can_be_turned_off() -> None:
    storage = InMemoryStorage()
    wf = create_workflow(id="w", storage=storage, tracing=False).then(s("a", lambda c: 1)).commit()
    run = wf.create_run()
    await run.start()
    assert await storage.load_trace(run.run_id) is None
    traced = wf.create_run(tracing=True)
    await traced.start()
    assert await storage.load_trace(traced.run_id) is not None


async def test_secrets_are_redacted_and_values_truncated() -> None:
    storage = InMemoryStorage()
    wf = (create_workflow(id="w", storage=storage)
          .then(s("leak", lambda c: {"api_key": "abc123", "note": "token sk-test-SECRETSECRET12",
                                     "headers": {"Authorization": "Bearer xyz"},
                                     "big": "x" * 5000}))
          .commit())
    run = wf.create_run()
    await run.start()
    trace = await storage.load_trace(run.run_id)
    assert trace is not None
    text = str(list(trace.spans))
    assert "abc123" not in text and "SECRETSECRET" not in text and "xyz" not in text
    leak = by_name(trace)["leak"]["output"]
    assert leak["truncated"] is True and len(leak["preview"]) == 2000
    assert redact_secrets({"password": "p", "count": 3, "output_tokens": 7}) == {
        "password": "***", "count": 3, "output_tokens": 7}


async def test_agent_trace_has_processor_model_and_tool_spans() -> None:
    from procflow import set_default_storage

    class Guard(Processor):
        id = "guard"

        def process_input(self, args: Any) -> None:
            return None

        def process_output_stream(self, args: Any) -> Any:
            return args.part

    @tool
    def lookup(order_id: str) -> str:
        """Find an order."""
        return "shipped"

    storage = InMemoryStorage()
    set_default_storage(storage)
    try:
        agent = Agent(id="support", model=ScriptedModel([[ToolCall("lookup", {"order_id": "1"})],
                                                          "done here"]),
                      tools=[lookup], input_processors=[Guard()], output_processors=[Guard()])
        out = await agent.generate("where?")
    finally:
        set_default_storage(None)
    trace = await storage.load_trace(out.run_id)
    assert trace is not None and trace.workflow_id == "agent:support"
    names = [r["name"] for r in trace.spans]
    assert names.count("input processor: guard") == 1
    assert names.count("output stream processor: guard") == 2  # one per model call
    stream_span = next(r for r in trace.spans if r["name"] == "output stream processor: guard")
    assert stream_span["attributes"]["chunks"] >= 1
    model_spans = [r for r in trace.spans if r["kind"] == "model"]
    assert [r["name"] for r in model_spans] == ["model call: scripted/scripted"] * 2
    assert model_spans[1]["output"] == "done here"
    assert model_spans[1]["attributes"]["usage"]["output_tokens"] == 2
    tool_span = next(r for r in trace.spans if r["kind"] == "tool")
    assert tool_span["name"] == "tool call: lookup" and tool_span["output"] == "shipped"


async def test_agent_tripwire_is_on_the_processor_span() -> None:
    from procflow import set_default_storage

    class Block(Processor):
        id = "block"

        def process_input(self, args: Any) -> None:
            args.abort("nope", metadata={"rule": 1})

    storage = InMemoryStorage()
    set_default_storage(storage)
    try:
        out = await Agent(id="a", model=ScriptedModel([]), input_processors=[Block()]).generate("x")
    finally:
        set_default_storage(None)
    trace = await storage.load_trace(out.run_id)
    assert trace is not None
    span = by_name(trace)["input processor: block"]
    assert span["status"] == "tripwire"
    assert span["attributes"]["tripwire"] == {"reason": "nope", "processor_id": "block",
                                              "retry": False, "metadata": {"rule": 1}}


def test_trace_rows_are_lazy() -> None:
    from procflow.runtime.tracing import Tracer

    tracer = Tracer()
    root = tracer.start("run: x", "run", None)
    Tracer.end(root, "success")
    record = TraceRecord.from_spans("r", "x", "success", tracer.spans)
    assert record.spans._rows is None  # type: ignore[attr-defined]
    assert record.spans[0]["name"] == "run: x"
    anyio.run(anyio.sleep, 0)


async def test_trace_truncation_is_configurable() -> None:
    storage = InMemoryStorage()
    wf = (create_workflow(id="w", storage=storage, trace_truncate=100)
          .then(s("big", lambda c: "y" * 500)).commit())
    run = wf.create_run()
    await run.start()
    trace = await storage.load_trace(run.run_id)
    assert trace is not None
    out = by_name(trace)["big"]["output"]
    assert out["truncated"] is True and len(out["preview"]) == 100 and out["chars"] == 502


def test_leaf_spans_read_like_full_spans() -> None:
    from procflow.runtime.tracing import Tracer, as_span

    tracer = Tracer()
    root = tracer.start("run: x", "run", None)
    full = tracer.start("input processor: a", "processor", root)
    Tracer.end(full, "success")
    tracer.leaf("input processor: b", "processor", root, full.start)
    Tracer.end(root, "success")
    leaf = as_span(tracer.spans[2])
    assert (leaf.span_id, leaf.parent_id, leaf.kind, leaf.status) == ("3", root.span_id,
                                                                      "processor", "success")
    assert leaf.end is not None and leaf.end >= leaf.start == full.start
    rows = list(TraceRecord.from_spans("r", "x", "success", tracer.spans).spans)
    assert [r["name"] for r in rows] == ["run: x", "input processor: a", "input processor: b"]
    assert set(rows[2]) == set(rows[1])
    assert {k: v for k, v in rows[2].items() if k not in ("span_id", "name", "start", "end")} \
        == {k: v for k, v in rows[1].items() if k not in ("span_id", "name", "start", "end")}
    assert tracer.start("next", "step", root).span_id == "4"  # numbering goes on


def test_a_leaf_keeps_its_attributes() -> None:
    from procflow.runtime.tracing import Tracer

    tracer = Tracer()
    root = tracer.start("run: x", "run", None)
    tracer.leaf("output stream processor: p", "processor", root, root.start, "tripwire",
                attributes={"chunks": 3})
    row = TraceRecord.from_spans("r", "x", "success", tracer.spans).spans[1]
    assert (row["status"], row["attributes"]) == ("tripwire", {"chunks": 3})
