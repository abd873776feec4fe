"""Text exports of a committed workflow's graph: Mermaid flowcharts and Graphviz DOT.

Both read ``wf.graph`` (the networkx graph built at commit) and write plain text in
the graph's insertion order, so the same workflow always gives the same text. The
label helpers here are shared with the terminal view (``procflow.studio.graph``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeAlias

from procflow.processors.base import HOOKS
from procflow.workflows.plan import condition_name
from procflow.workflows.workflow import Workflow

if TYPE_CHECKING:
    import networkx as nx

    from procflow.agent.agent import Agent

__all__ = ["STAGE_HOOKS", "acting_hooks", "condition_name", "holds_configured", "node_label",
           "short_hooks", "stage_hooks", "steps_count", "to_dot", "to_mermaid",
           "workflow_of"]

_MARKERS = ("map", "sleep", "sleep_until")
_INDENT = "    "

_Box: TypeAlias = tuple[str, str | None]
"""A drawn container: ("group", group name) or ("wf", nested-workflow path | None)."""


def workflow_of(target: Workflow | Agent) -> Workflow:
    """The committed workflow to draw: the target itself, or an agent's loop workflow.

    Raises:
        TypeError: ``target`` is neither a workflow nor has a ``workflow`` attribute.
    """
    if isinstance(target, Workflow):
        return target
    wf = getattr(target, "workflow", None)
    if isinstance(wf, Workflow):
        return wf
    raise TypeError(f"expected a Workflow or an Agent, got {type(target).__name__}")


def short_hooks(hooks: Iterable[str]) -> list[str]:
    """Hook names in lifecycle order without their ``process_`` prefix."""
    order = {name: i for i, name in enumerate(HOOKS)}
    ranked = sorted(set(hooks), key=lambda h: (order.get(h, len(order)), h))
    return [h.removeprefix("process_") for h in ranked]


STAGE_HOOKS: dict[str, frozenset[str]] = {
    "input-processors": frozenset({"process_input"}),
    "input-step": frozenset({"process_input_step"}),
    "llm-call": frozenset({"process_llm_request", "process_llm_response",
                           "process_output_stream", "process_api_error"}),
    "output-step": frozenset({"process_output_step"}),
    "output-processors": frozenset({"process_output_result"}),
    "tool-calls": frozenset({"process_tool_result"}),
}
"""The hooks that act in each stage of an agent's loop (a processor drawn in a stage is
labelled with these of its hooks only)."""


def stage_hooks(wf: Any, outer: frozenset[str] | None) -> frozenset[str] | None:
    """The hooks acting inside ``wf``: its own when it is an agent loop's stage, else
    those of the stage around it (``outer``)."""
    from procflow.agent.loop import ProcessorStage

    if isinstance(wf, ProcessorStage):
        return STAGE_HOOKS.get(wf.id, outer)
    return outer


def acting_hooks(hooks: Iterable[str], acting: frozenset[str] | None) -> list[str]:
    """The hooks of a processor node that act where it is drawn."""
    return [h for h in hooks if acting is None or h in acting]


def holds_configured(wf: Any) -> bool:
    """Whether a workflow holds, at any depth, a processor or a tool (something the
    user configured, drawn however deep it is)."""
    for step_id in wf.step_ids():
        if step_id.startswith(("processor:", "tool:")):
            return True
        step = wf.get_step(step_id)
        if getattr(step, "kind", None) == "workflow" and holds_configured(step):
            return True
    return False


def steps_count(count: int) -> str:
    """ "1 step", "3 steps"."""
    return f"{count} step" if count == 1 else f"{count} steps"


def node_label(graph: nx.DiGraph, node: str, *, collapsed: bool = False) -> str:
    """The text label of one graph node (kind marker, id, processor hooks)."""
    attrs: dict[str, Any] = graph.nodes[node]
    kind = attrs["kind"]
    label = str(attrs["label"])
    if kind in ("start", "end"):
        return label
    if kind in _MARKERS:
        return f"{kind.replace('_', ' ')}: {label}"
    hooks = short_hooks(attrs.get("hooks") or [])
    if hooks:
        label = f"{label} [{', '.join(hooks)}]"
    if attrs.get("step_kind") == "workflow" and collapsed:
        label = f"workflow {label} ({steps_count(_count_steps(graph, node))})"
    if kind == "foreach":
        return f"for each (concurrency {attrs['concurrency']}): {label}"
    if kind == "loop":
        return f"{_loop_marker(attrs)}: {label}"
    return label


def _loop_marker(attrs: dict[str, Any]) -> str:
    mode = "while" if attrs["loop"] == "dowhile" else "until"
    limit = attrs.get("max_iterations")
    return f"do … {mode}" + (f" (max {limit})" if limit else "")


def _count_steps(graph: nx.DiGraph, container: str) -> int:
    return sum(1 for _, a in graph.nodes(data=True)
               if a.get("parent") == container and a["kind"] not in _MARKERS)


# -- the nesting tree shared by both formats ---------------------------------------


class _Layout:
    """Which nodes are visible at a depth, which are expanded containers, and where each
    node and container sits."""

    def __init__(self, graph: nx.DiGraph, depth: int | None) -> None:
        self.graph = graph
        self.level: dict[str, int] = {}
        self.groups: dict[str, list[str]] = {}
        for node, attrs in graph.nodes(data=True):
            parent = attrs.get("parent")
            self.level[node] = 0 if parent is None else self.level[parent] + 1
        self.limit = float("inf") if depth is None else depth
        self.visible = [n for n in graph.nodes if self.level[n] <= self.limit]
        self.position = {n: i for i, n in enumerate(self.visible)}
        for node in self.visible:
            group = graph.nodes[node].get("group")
            if group is not None:
                self.groups.setdefault(group, []).append(node)
        self.expanded = {n for n in self.visible
                         if graph.nodes[n].get("step_kind") == "workflow"
                         and self.level[n] < self.limit}

    def home(self, node: str) -> _Box:
        """The container a node is drawn in: ("group", name) or ("wf", container|None)."""
        attrs = self.graph.nodes[node]
        group = attrs.get("group")
        if group is not None:
            return ("group", group)
        return ("wf", attrs.get("parent"))

    def parent_of(self, box: _Box) -> _Box | None:
        """The container a container is drawn in (``None`` for the top level)."""
        kind, name = box
        if name is None:
            return None
        if kind == "wf":
            return self.home(name)
        return ("wf", self.graph.nodes[self.groups[name][0]].get("parent"))

    def first(self, item: str | _Box) -> int:
        """Where a node, or a container by its first node, comes in graph order."""
        if not isinstance(item, tuple):
            return self.position[item]
        kind, name = item
        assert name is not None
        return self.position[name if kind == "wf" else self.groups[name][0]]

    def visible_of(self, node: str) -> str:
        """The node itself, or its ancestor that stands for it when collapsed."""
        while self.level[node] > self.limit:
            node = self.graph.nodes[node]["parent"]
        return node

    @staticmethod
    def inside(node: str, container: str) -> bool:
        """Whether ``node`` is within ``container``'s nested workflow."""
        return node.startswith(container + ".")

    def loop_exits(self, loop: str) -> list[str]:
        """The nodes of a loop body that lead out of it (where the back edge starts)."""
        if self.graph.nodes[loop].get("step_kind") != "workflow":
            return [loop]
        body = [n for n in self.graph.nodes if self.inside(n, loop)]
        return [n for n in body
                if any(not self.inside(s, loop) for s in self.graph.successors(n))]

    def edges(self) -> Iterator[tuple[str, str, bool, str | None]]:
        """Visible edges ``(u, v, conditional, condition)`` in graph order, without
        duplicates (``condition``: a branch lane's "if ..." title)."""
        seen: set[tuple[str, str]] = set()
        for u, v, attrs in self.graph.edges(data=True):
            if self.inside(v, u):
                continue  # container -> its first inner steps: drawn as the container
            a, b = self.visible_of(u), self.visible_of(v)
            if a == b or (a, b) in seen:
                continue
            seen.add((a, b))
            yield a, b, bool(attrs.get("conditional")), attrs.get("condition")

    def back_edges(self) -> Iterator[tuple[str, str, str]]:
        """Loop back edges ``(exit, loop, "while"|"until")``."""
        for node in self.visible:
            attrs = self.graph.nodes[node]
            if attrs["kind"] != "loop":
                continue
            mode = "while" if attrs["loop"] == "dowhile" else "until"
            seen: list[str] = []
            for exit_ in self.loop_exits(node):
                vis = self.visible_of(exit_)
                if vis not in seen:
                    seen.append(vis)
                    yield vis, node, mode


# -- Mermaid -----------------------------------------------------------------------


def _mermaid_text(text: str) -> str:
    """Escape a label for a quoted Mermaid label (entity codes, one line)."""
    out = text.replace("#", "#35;").replace('"', "#quot;").replace("<", "#lt;")
    out = out.replace(">", "#gt;").replace("`", "#96;")
    return " ".join(out.split())


def _mermaid_shape(kind: str, label: str) -> str:
    text = _mermaid_text(label)
    if kind in ("start", "end"):
        return f'(["{text}"])'
    if kind == "map":
        return f'[/"{text}"/]'
    if kind in ("sleep", "sleep_until"):
        return f'{{{{"{text}"}}}}'
    return f'["{text}"]'


def to_mermaid(target: Workflow | Agent, *, depth: int | None = None) -> str:
    """A Mermaid ``flowchart TD`` of a committed workflow (or an agent's loop).

    Nested workflows and parallel/branch groups become subgraphs; an edge to a nested
    workflow points at its subgraph. Branch edges are dotted; loops get a dotted back
    edge labelled "while"/"until".

    Args:
        target: A committed ``Workflow`` or an ``Agent``.
        depth: How many levels of nested workflows to expand (``None``: all; 0: none,
            each nested workflow is one node).

    Returns:
        The flowchart text, ending with a newline.
    """
    graph = workflow_of(target).graph
    layout = _Layout(graph, depth)
    ids: dict[str, str] = {}
    boxes: dict[_Box, str] = {}
    counts = {"n": 0, "g": 0, "w": 0}

    def new_id(prefix: str) -> str:
        counts[prefix] += 1
        return f"{prefix}{counts[prefix] - 1}"

    children: dict[_Box | None, list[str | _Box]] = {}
    for node in layout.visible:
        home = layout.home(node)
        if home[0] == "group" and home not in boxes:
            boxes[home] = new_id("g")
            children.setdefault(layout.parent_of(home), []).append(home)
        if node in layout.expanded:
            box: _Box = ("wf", node)
            boxes[box] = ids[node] = new_id("w")
            children.setdefault(home, []).append(box)
        else:
            ids[node] = new_id("n")
            children.setdefault(home, []).append(node)

    lines = ["flowchart TD"]

    def emit(owner: _Box, indent: str) -> None:
        for item in sorted(children.get(owner, []), key=layout.first):
            if isinstance(item, tuple):
                title = _mermaid_text(_box_title(graph, layout, item))
                lines.append(f'{indent}subgraph {boxes[item]}["{title}"]')
                emit(item, indent + _INDENT)
                lines.append(f"{indent}end")
            else:
                kind = graph.nodes[item]["kind"]
                label = node_label(graph, item, collapsed=True)
                lines.append(f"{indent}{ids[item]}{_mermaid_shape(kind, label)}")

    emit(("wf", None), _INDENT)
    for u, v, conditional, condition in layout.edges():
        arrow = "-.->" if conditional else "-->"
        if condition:
            arrow += f'|"{_mermaid_text(condition)}"|'
        lines.append(f"{_INDENT}{ids[u]} {arrow} {ids[v]}")
    for exit_, loop, mode in layout.back_edges():
        lines.append(f"{_INDENT}{ids[exit_]} -. {mode} .-> {ids[loop]}")
    return "\n".join(lines) + "\n"


def _box_title(graph: nx.DiGraph, layout: _Layout, box: _Box) -> str:
    kind, name = box
    assert name is not None
    if kind == "group":
        return str(graph.nodes[layout.groups[name][0]]["group_kind"])
    attrs = graph.nodes[name]
    title = f"workflow {attrs['label']}"
    if attrs["kind"] == "foreach":
        return f"for each (concurrency {attrs['concurrency']}): {title}"
    if attrs["kind"] == "loop":
        return f"{_loop_marker(attrs)}: {title}"
    return title


# -- Graphviz DOT ------------------------------------------------------------------


def _dot_text(text: str) -> str:
    """A DOT double-quoted string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


_DOT_SHAPES = {"start": "oval", "end": "oval", "map": "parallelogram", "sleep": "hexagon",
               "sleep_until": "hexagon"}


def to_dot(target: Workflow | Agent) -> str:
    """A Graphviz DOT digraph of a committed workflow (or an agent's loop).

    Every nested workflow is a ``cluster_<path>`` subgraph holding its own node and
    steps; branch edges are dashed; loops get a dashed back edge.

    Args:
        target: A committed ``Workflow`` or an ``Agent``.

    Returns:
        The DOT text, ending with a newline.
    """
    wf = workflow_of(target)
    graph = wf.graph
    layout = _Layout(graph, None)
    members: dict[str | None, list[str | _Box]] = {}
    for node in graph.nodes:
        parent = graph.nodes[node].get("parent")
        if node in layout.expanded:
            members.setdefault(parent, []).append(("wf", node))
            members.setdefault(node, []).append(node)
        else:
            members.setdefault(parent, []).append(node)

    lines = [f"digraph {_dot_text(wf.id)} {{", f"{_INDENT}rankdir=TB;",
             f'{_INDENT}node [shape=box, fontname="Helvetica"];']

    def emit(owner: str | None, indent: str) -> None:
        for item in members.get(owner, []):
            if isinstance(item, tuple):
                inner = item[1]
                assert inner is not None
                title = _dot_text(_box_title(graph, layout, item))
                lines.append(f"{indent}subgraph {_dot_text('cluster_' + inner)} {{")
                lines.append(f"{indent}{_INDENT}label={title};")
                emit(inner, indent + _INDENT)
                lines.append(f"{indent}}}")
                continue
            shape: str | None
            if item in layout.expanded:  # the cluster's label carries its markers
                label, shape = str(graph.nodes[item]["label"]), "folder"
            else:
                label, shape = node_label(graph, item), _DOT_SHAPES.get(graph.nodes[item]["kind"])
            extra = f", shape={shape}" if shape else ""
            lines.append(f"{indent}{_dot_text(item)} [label={_dot_text(label)}{extra}];")

    emit(None, _INDENT)
    for u, v, attrs in graph.edges(data=True):
        style = ""
        if attrs.get("conditional"):
            condition = attrs.get("condition")
            style = (f" [style=dashed, label={_dot_text(condition)}]" if condition
                     else " [style=dashed]")
        lines.append(f"{_INDENT}{_dot_text(u)} -> {_dot_text(v)}{style};")
    for exit_, loop, mode in layout.back_edges():
        lines.append(f"{_INDENT}{_dot_text(exit_)} -> {_dot_text(loop)} "
                     f"[style=dashed, label={_dot_text(mode)}, constraint=false];")
    lines.append("}")
    return "\n".join(lines) + "\n"
