"""How long the studio takes to draw a big workflow.

Run: ``python benchmarks/studio.py``. Builds a workflow of 1,008 nodes (252 entries
mixing ``then``, ``foreach``, ``parallel`` of 3 and nested workflows of 10 steps),
then times rendering ``GraphView`` to an in-memory ``Console`` (width 120) and
``to_mermaid``. Target: each < 1000 ms.

Then traces: rendering ``TraceView`` of a synthetic 10,000-span trace (target
< 1000 ms), and what recording a trace costs a run: a 200-step chain of trivial
async steps with ``tracing=False`` and ``tracing=True``, best of several alternating
repeats, in µs per step (target: overhead ≤ 20 %). Exit code always 0.
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Callable
from typing import Any

import anyio
from rich.console import Console

from procflow import Workflow, create_step, create_workflow
from procflow.runtime.tracing import TraceRecord
from procflow.steps.step import Step
from procflow.storage import InMemoryStorage
from procflow.studio import GraphView, TraceView, to_mermaid

TARGET_MS = 1000.0
ENTRIES = 252


def _step(step_id: str) -> Step:
    return create_step(id=step_id, execute=_identity)


def _identity(ctx: Any) -> Any:
    return ctx.input_data


def _nested(tag: str) -> Workflow:
    """A nested workflow of 10 steps: then, parallel of 3, then, parallel of 3, then x2."""
    return (create_workflow(id=f"w{tag}")
            .then(_step("a")).parallel([_step("b"), _step("c"), _step("d")])
            .then(_step("e")).parallel([_step("f"), _step("g"), _step("h")])
            .then(_step("i")).then(_step("j")).commit())


def build_big_workflow(entries: int = ENTRIES) -> tuple[Workflow, int]:
    """A workflow of ``entries`` entries cycling then / foreach / parallel-of-3 / nested.

    Each cycle of 4 entries has 16 graph nodes (1 + 1 + 3 + a nested workflow of 10
    steps and its own node), so 252 entries give 1,008 nodes.

    Returns:
        The committed workflow and its number of graph nodes (start and end excluded).
    """
    wf = create_workflow(id="big")
    for i in range(entries):
        shape = i % 4
        if shape == 0:
            wf.then(_step(f"s{i}"))
        elif shape == 1:
            wf.foreach(_step(f"f{i}"), concurrency=4)
        elif shape == 2:
            wf.parallel([_step(f"p{i}-{lane}") for lane in range(3)])
        else:
            wf.then(_nested(str(i)))
    wf.commit()
    nodes = wf.graph.number_of_nodes() - 2
    return wf, nodes


def best_ms(fn: Callable[[], object], *, repeat: int = 3) -> float:
    """The best of ``repeat`` timings of ``fn()``, in milliseconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, (time.perf_counter() - start) * 1000)
    return best


def _render_graph(wf: Workflow) -> None:
    console = Console(file=io.StringIO(), width=120)
    console.print(GraphView(wf))


def main() -> int:
    wf, nodes = build_big_workflow()
    wf.graph  # noqa: B018 - build the networkx graph outside the timings
    print(f"workflow: {len(wf.entries)} entries, {nodes} nodes")
    graph_ms = best_ms(lambda: _render_graph(wf))
    mermaid_ms = best_ms(lambda: to_mermaid(wf))
    for name, ms in (("GraphView render (width 120)", graph_ms), ("to_mermaid", mermaid_ms)):
        verdict = "ok" if ms < TARGET_MS else "SLOW"
        print(f"{name:<30} {ms:8.1f} ms   target < {TARGET_MS:.0f} ms   {verdict}")

    # ----------------------------------------------------------------------------
    # trace rendering: added later
    # ----------------------------------------------------------------------------
    trace = build_big_trace()
    trace_ms = best_ms(lambda: _render_trace(trace))
    verdict = "ok" if trace_ms < TARGET_MS else "SLOW"
    print(f"{'TraceView render (10,000 spans)':<30} {trace_ms:8.1f} ms   "
          f"target < {TARGET_MS:.0f} ms   {verdict}")
    off_us, on_us = anyio.run(tracing_cost)
    overhead = (on_us / off_us - 1) * 100
    verdict = "ok" if overhead <= TARGET_OVERHEAD_PCT else "SLOW"
    print(f"{CHAIN}-step chain, tracing off    {off_us:8.2f} µs/step")
    print(f"{CHAIN}-step chain, tracing on     {on_us:8.2f} µs/step   overhead "
          f"{overhead:+.1f} %   target ≤ {TARGET_OVERHEAD_PCT:.0f} %   {verdict}")
    return 0


# ---------------------------------------------------------------------------- traces

SPANS = 10_000
CHAIN = 200
TARGET_OVERHEAD_PCT = 20.0


def _span(span_id: int, parent: int | None, name: str, kind: str, start: float, end: float,
          path: str | None = None, **attributes: Any) -> dict[str, Any]:
    return {"span_id": str(span_id), "parent_id": None if parent is None else str(parent),
            "name": name, "kind": kind, "path": path, "start": start, "end": end,
            "status": "success", "input": {"text": "hello"}, "output": "ok", "error": None,
            "attributes": attributes}


def build_big_trace(spans: int = SPANS) -> TraceRecord:
    """A run of ``(spans - 1) // 9`` agent-like iterations of 9 spans each: a nested
    workflow holding steps with processor, model and tool spans (1 ms per iteration)."""
    rows = [_span(1, None, "run: big", "run", 0.0, (spans - 1) // 9 * 0.001)]
    for n in range((spans - 1) // 9):
        t, w = n * 0.001, len(rows) + 1
        rows += [_span(w, 1, "agent-step", "workflow", t, t + 0.001, "agent-step"),
                 _span(w + 1, w, "prepare-step", "step", t, t + 0.0001,
                       "agent-step.prepare-step"),
                 _span(w + 2, w + 1, "input processor: guard", "processor", t, t + 0.00005),
                 _span(w + 3, w, "llm-call", "step", t + 0.0001, t + 0.0006,
                       "agent-step.llm-call"),
                 _span(w + 4, w + 3, "model call: scripted/scripted", "model", t + 0.0001,
                       t + 0.0005, usage={"input_tokens": 12, "output_tokens": 40},
                       chunks=18),
                 _span(w + 5, w + 3, "output stream processor: guard", "processor",
                       t + 0.0002, t + 0.0006, chunks=18),
                 _span(w + 6, w, "tool-calls", "step", t + 0.0006, t + 0.0009,
                       "agent-step.tool-calls"),
                 _span(w + 7, w + 6, "tool call: lookup", "tool", t + 0.0006, t + 0.0008),
                 _span(w + 8, w, "output-step", "step", t + 0.0009, t + 0.001,
                       "agent-step.output-step", attempts=2)]
    return TraceRecord("big-run", "big", "success", 0.0, rows[0]["end"], rows)


def _render_trace(trace: TraceRecord) -> None:
    console = Console(file=io.StringIO(), width=120)
    console.print(TraceView(trace))


async def inc(ctx: Any) -> Any:
    return ctx.input_data + 1


def _chain(*, tracing: bool) -> Workflow:
    wf = create_workflow(id=f"chain-{'on' if tracing else 'off'}", tracing=tracing)
    for i in range(CHAIN):
        wf.then(create_step(id=f"s{i}", execute=inc))
    return wf.commit()


async def tracing_cost(repeats: int = 15) -> tuple[float, float]:
    """Best µs per step of the chain with tracing off and on, alternating the two."""
    workflows = {False: _chain(tracing=False), True: _chain(tracing=True)}
    best = {False: float("inf"), True: float("inf")}
    for wf in workflows.values():  # warm-up
        await wf.create_run(storage=InMemoryStorage()).start(input_data=0)
    for _ in range(repeats):
        for tracing, wf in workflows.items():
            run = wf.create_run(storage=InMemoryStorage())
            start = time.perf_counter()
            result = await run.start(input_data=0)
            best[tracing] = min(best[tracing], time.perf_counter() - start)
            assert result.result == CHAIN, result
    return best[False] / CHAIN * 1e6, best[True] / CHAIN * 1e6


if __name__ == "__main__":
    sys.exit(main())
