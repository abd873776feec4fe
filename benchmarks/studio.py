"""How long the studio takes to draw a big workflow.

Run: ``python benchmarks/studio.py``. Builds a workflow of 1,008 nodes (252 entries
mixing ``then``, ``foreach``, ``parallel`` of 3 and nested workflows of 10 steps),
then times rendering ``GraphView`` to an in-memory ``Console`` (width 120) and
``to_mermaid``. Target: each < 1000 ms.
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console

from procflow import Workflow, create_step, create_workflow
from procflow.steps.step import Step
from procflow.studio import GraphView, to_mermaid

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

    return 0


if __name__ == "__main__":
    sys.exit(main())
