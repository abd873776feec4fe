"""Property: under any concurrency every span's parent is its structural parent.

Random plans nest parallel, branch, foreach, map and nested workflows around steps that
await; each step records a leaf span through one ``ProcessorContext`` that every step
shares (as the processors of one agent call do). The stored trace and the OpenTelemetry
export must both give each span the parent the plan says it has.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from procflow import Agent, StepContext, create_step, create_workflow
from procflow.models import ScriptedModel
from procflow.processors import Processor, ProcessorArgs, ProcessorStepSchema
from procflow.processors.args import ProcessorContext
from procflow.storage.memory import InMemoryStorage

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

import procflow

pauses = st.sampled_from([0.0, 0.001, 0.003])
leaf = st.tuples(st.just("step"), pauses)


def _nodes(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    lanes = st.lists(st.one_of(leaf, st.tuples(st.just("wf"), st.lists(inner, min_size=1,
                                                                        max_size=3))),
                     min_size=1, max_size=3)
    return st.one_of(
        st.tuples(st.just("parallel"), lanes),
        st.tuples(st.just("branch"), lanes, st.lists(st.booleans(), min_size=3, max_size=3)),
        st.tuples(st.just("foreach"), st.integers(1, 3), pauses, st.integers(1, 3)),
    )


items = st.recursive(leaf, _nodes, max_leaves=8)
plans = st.lists(items, min_size=1, max_size=4)


@dataclass
class Row:
    id: Any
    parent: Any
    name: str
    kind: str


@dataclass
class Plan:
    """The workflow and, beside it, where each of its spans must hang."""

    shared: ProcessorContext = field(default_factory=ProcessorContext)
    n: int = 0
    chains: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    ran: set[str] = field(default_factory=set)

    def step(self, pause: float, chain: tuple[tuple[str, str], ...], runs: bool) -> Any:
        self.n += 1
        name = f"s{self.n}"
        self.chains[name] = chain
        if runs:
            self.ran.add(name)
        shared = self.shared

        async def work(ctx: StepContext) -> Any:
            tracer = ctx.tracer
            assert tracer is not None
            shared.tracer = tracer
            shared.span = ctx.span  # what a processor step does before its first await
            begun = anyio.current_time()
            await anyio.sleep(pause)
            tracer.leaf(f"work: {name}", "processor", shared.span, begun)
            return ctx.input_data

        return create_step(id=name, execute=work)

    def build(self, wf_id: str, plan: list[Any], chain: tuple[tuple[str, str], ...],
              runs: bool = True) -> Any:
        wf = create_workflow(id=wf_id)
        for item in plan:
            self.add(wf, item, chain, runs)
        return wf.commit()

    def add(self, wf: Any, item: Any, chain: tuple[tuple[str, str], ...], runs: bool) -> None:
        kind = item[0]
        if kind == "step":
            wf.then(self.step(item[1], chain, runs))
        elif kind in ("parallel", "branch"):
            key = (f"{kind}{self.n}-{id(item)}", kind)
            flags = item[2] if kind == "branch" else [True] * len(item[1])
            inner = chain if kind == "branch" and len(item[1]) == 1 else (*chain, key)
            lanes = [self.lane(lane, inner, runs and on)
                     for lane, on in zip(item[1], flags, strict=False)]
            if kind == "parallel":
                wf.parallel(lanes)
            else:
                wf.branch([(lambda ctx, on=on: on, lane)
                           for lane, on in zip(lanes, flags, strict=False)])
        else:  # foreach over a list made by a map
            _, count, pause, concurrency = item
            wf.map(lambda ctx, count=count: list(range(count)))
            step = self.step(pause, (), runs)
            self.chains[step.id] = (*chain, (f"foreach-{step.id}", step.id))
            wf.foreach(step, concurrency=concurrency)

    def lane(self, lane: Any, chain: tuple[tuple[str, str], ...], runs: bool) -> Any:
        if lane[0] == "step":
            return self.step(lane[1], chain, runs)
        self.n += 1
        wf_id = f"w{self.n}"
        return self.build(wf_id, lane[1], (*chain, (wf_id, wf_id)), runs)


def check_tree(rows: list[Row], plan: Plan, root: str) -> None:
    """Each step span's ancestors are the containers the plan puts it in (one span per
    container, never shared by two), and each work leaf hangs under its own step."""
    by_id = {row.id: row for row in rows}
    container: dict[str, Any] = {}
    seen: dict[Any, str] = {}
    steps = [row for row in rows if row.name in plan.chains and row.kind != "foreach"]
    for row in steps:
        chain = plan.chains[row.name]
        ancestors = []
        parent = by_id.get(row.parent)
        while parent is not None and parent.name != root:
            ancestors.append(parent)
            parent = by_id.get(parent.parent)
        assert parent is not None, f"{row.name} does not hang under the run"
        ancestors.reverse()
        assert [a.name for a in ancestors] == [name for _, name in chain], row.name
        for (key, _), span in zip(chain, ancestors, strict=True):
            assert container.setdefault(key, span.id) == span.id, (row.name, key)
            assert seen.setdefault(span.id, key) == key, (row.name, key)
    work = [row for row in rows if row.name.startswith("work: ")]
    for row in work:
        parent = by_id[row.parent]
        assert parent.name == row.name.removeprefix("work: "), (row.name, parent.name)
    assert {row.name.removeprefix("work: ") for row in work} == plan.ran
    assert len(work) == len({row.parent for row in work})  # one leaf per step span


def otel_rows(exporter: InMemorySpanExporter) -> list[Row]:
    return [Row(s.context.span_id, s.parent.span_id if s.parent else None, s.name,
                str((s.attributes or {}).get("procflow.span.kind")))
            for s in exporter.get_finished_spans()]


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    procflow.instrument(tracer_provider=provider)
    try:
        yield memory
    finally:
        procflow.uninstrument()


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=plans)
async def test_every_span_hangs_under_its_structural_parent(
        plan: list[Any], exporter: InMemorySpanExporter) -> None:
    model = Plan()
    wf = model.build("tree", plan, ())
    storage = InMemoryStorage()
    exporter.clear()
    run = wf.create_run(storage=storage)
    result = await run.start(input_data=0)
    assert result.status == "success"
    record = await storage.load_trace(run.run_id)
    assert record is not None
    stored = [Row(s["span_id"], s["parent_id"], s["name"], s["kind"]) for s in record.spans]
    check_tree(stored, model, "run: tree")
    check_tree(otel_rows(exporter), model, "run: tree")


class Slow(Processor):
    def __init__(self, pid: str, pause: float) -> None:
        self.id = pid
        self.pause = pause

    async def process_input(self, args: ProcessorArgs) -> None:
        await anyio.sleep(self.pause)


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pauses=st.lists(pauses, min_size=2, max_size=4), nested=st.booleans())
async def test_processor_spans_hang_under_their_own_step_in_an_agent(
        pauses: list[float], nested: bool, exporter: InMemorySpanExporter) -> None:
    steps: list[Any] = [create_step(Slow(f"p{i}", pause)) for i, pause in enumerate(pauses)]
    if nested:
        steps[0] = (create_workflow(id="inner", input_schema=ProcessorStepSchema,
                                    output_schema=ProcessorStepSchema)
                    .parallel([steps[0], create_step(Slow("q", 0.002))])
                    .map(procflow.processors.merge_processor_results).commit())
    guard = (create_workflow(id="guard", input_schema=ProcessorStepSchema,
                             output_schema=ProcessorStepSchema)
             .parallel(steps).map(procflow.processors.merge_processor_results).commit())
    storage = InMemoryStorage()
    agent = Agent(id="support", model=ScriptedModel(["ok"]), input_processors=[guard],
                  storage=storage)
    exporter.clear()
    result = await agent.generate("hi")
    record = await storage.load_trace(result.run_id)
    assert record is not None
    stored = [Row(s["span_id"], s["parent_id"], s["name"], s["kind"]) for s in record.spans]
    for rows in (stored, otel_rows(exporter)):
        by_id = {row.id: row for row in rows}
        # run where its processors act (input), not as no-op spans in each model step
        assert [row.name for row in rows].count("guard") == 1
        hooks = [row for row in rows if row.name.startswith("input processor: ")]
        assert len(hooks) == len(pauses) + nested
        for row in hooks:
            pid = row.name.removeprefix("input processor: ")
            assert by_id[row.parent].name == f"processor:{pid}"


async def test_three_awaiting_guards_each_hang_under_their_own_step() -> None:
    guard = (create_workflow(id="guard", input_schema=ProcessorStepSchema,
                             output_schema=ProcessorStepSchema)
             .parallel([create_step(Slow(pid, 0.01)) for pid in ("a", "b", "c")])
             .map(procflow.processors.merge_processor_results).commit())
    storage = InMemoryStorage()
    agent = Agent(id="support", model=ScriptedModel(["ok"]), input_processors=[guard],
                  storage=storage)
    record = await storage.load_trace((await agent.generate("hi")).run_id)
    assert record is not None
    by_id = {s["span_id"]: s for s in record.spans}
    parents = {s["name"]: by_id[s["parent_id"]]["name"] for s in record.spans
               if s["name"].startswith("input processor: ")}
    assert parents == {f"input processor: {p}": f"processor:{p}" for p in ("a", "b", "c")}
