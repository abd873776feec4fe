"""The committed plan as a networkx ``DiGraph``, for drawing and analysis.

Nodes are step paths ("double", "outer.inner"); each carries ``kind`` (step,
processor, agent, workflow, map, foreach, loop, sleep, sleep_until, start, end),
``step_id``, ``label``, ``workflow`` (the workflow that owns it), ``parent`` (the
nested-workflow node it sits in, or ``None``) and, for parallel/branch lanes,
``group`` (e.g. "parallel-2") and ``group_kind``. Edges are the data flow; an edge into
a branch's lane has ``conditional=True`` and ``condition`` ("if <its name>"). A nested
workflow's node also carries its own graph as ``subgraph``, and its steps appear in
the outer graph under the prefixed path, between the container node and its successors.
Only the studio and users import this; the runtime never does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import networkx as nx

from procflow.workflows.plan import LanesLayout, NodeLayout, StepLike, UnitLayout

if TYPE_CHECKING:
    from procflow.workflows.workflow import Workflow

__all__ = ["END", "START", "build_graph"]

START = "__start__"
END = "__end__"


def build_graph(wf: Workflow) -> nx.DiGraph:
    """Build the data-flow graph of a committed workflow (nested workflows included)."""
    graph = nx.DiGraph(workflow_id=wf.id)
    graph.add_node(START, kind="start", step_id=START, label="start", workflow=wf.id,
                   parent=None)
    frontier = _add_entries(graph, wf, "", None, [START])
    graph.add_node(END, kind="end", step_id=END, label="end", workflow=wf.id, parent=None)
    for node in frontier:
        graph.add_edge(node, END)
    return graph


def _add_entries(graph: nx.DiGraph, wf: Workflow, prefix: str, parent: str | None,
                 frontier: list[str]) -> list[str]:
    for index, entry in enumerate(wf.entries, start=1):
        layout = entry.layout()
        if isinstance(layout, UnitLayout):
            frontier = _add_unit(graph, wf, layout.step, prefix, parent, frontier,
                                 kind=layout.kind, **layout.attributes)
        elif isinstance(layout, LanesLayout):
            group = f"{prefix}{layout.kind}-{index}"
            ends: list[str] = []
            for title, unit in layout.lanes:
                ends += _add_unit(graph, wf, unit, prefix, parent, frontier, group=group,
                                  group_kind=layout.kind, conditional=layout.conditional,
                                  condition=title if layout.conditional else None)
            frontier = ends
        elif isinstance(layout, NodeLayout):
            frontier = _add_simple(graph, wf, prefix + layout.id, layout.id, layout.kind,
                                   parent, frontier)
    return frontier


def _add_simple(graph: nx.DiGraph, wf: Workflow, path: str, step_id: str, kind: str,
                parent: str | None, frontier: list[str]) -> list[str]:
    graph.add_node(path, kind=kind, step_id=step_id, label=step_id, workflow=wf.id,
                   parent=parent)
    for node in frontier:
        graph.add_edge(node, path)
    return [path]


def _add_unit(graph: nx.DiGraph, wf: Workflow, unit: StepLike, prefix: str,
              parent: str | None, frontier: list[str], *, kind: str | None = None,
              conditional: bool = False, condition: str | None = None,
              **attrs: Any) -> list[str]:
    path = prefix + unit.id
    own_kind = unit.kind
    graph.add_node(path, kind=kind or own_kind, step_kind=own_kind, step_id=unit.id,
                   label=unit.id, workflow=wf.id, parent=parent,
                   description=getattr(unit, "description", None),
                   hooks=list(getattr(unit, "metadata", {}).get("hooks", [])), **attrs)
    for node in frontier:
        if condition is None:
            graph.add_edge(node, path, conditional=conditional)
        else:
            graph.add_edge(node, path, conditional=conditional, condition=condition)
    if own_kind != "workflow":
        return [path]
    nested: Workflow = unit  # type: ignore[assignment]
    graph.nodes[path]["subgraph"] = nested.graph
    return _add_entries(graph, nested, path + ".", path, [path])
