"""``GraphView``: a committed workflow (or an agent's loop) drawn top to bottom with Rich.

The view reads the workflow's plan entries, not its networkx graph, so the picture
follows what the builder was told: ``then`` steps one per line, ``parallel`` and
``branch`` as lanes side by side, ``foreach`` and loops as boxes around their body,
nested workflows as boxes of their own (or one line when deeper than ``depth``).
Given ``states`` (step path → ``NodeState``), each node also shows its status
symbol, time and retries — the symbols carry the meaning, colour only helps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeAlias, assert_never

from rich import box
from rich.console import Group, RenderableType
from rich.measure import Measurement
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from procflow.studio.export import (
    acting_hooks,
    holds_configured,
    short_hooks,
    stage_hooks,
    steps_count,
    workflow_of,
)
from procflow.workflows.plan import (
    LanesLayout,
    Layout,
    NodeLayout,
    StepLike,
    UnitLayout,
)
from procflow.workflows.workflow import Workflow

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

    from procflow.agent.agent import Agent

__all__ = ["GraphView", "NodeState", "NodeStatus", "format_duration"]

NodeStatus: TypeAlias = Literal["pending", "running", "success", "failed", "suspended",
                                "skipped", "canceled"]

_STATUS: dict[str, tuple[str, str]] = {
    "pending": ("○", "dim"),
    "running": ("◐", "yellow"),
    "success": ("●", "green"),
    "failed": ("✖", "red"),
    "suspended": ("⏸", "magenta"),
    "skipped": ("⊘", "dim"),
    "canceled": ("■", "dim red"),
}
_KIND_GLYPH = {"step": "□", "processor": "◆", "agent": "◈"}
_EXPANDED, _COLLAPSED, _MAP, _SLEEP = "▾", "▸", "ƒ", "◷"
_NODE_GLYPH = {"map": _MAP, "sleep": _SLEEP, "sleep_until": _SLEEP}
_ARROW = Text("│\n▼", style="dim")


@dataclass(frozen=True, slots=True)
class NodeState:
    """What a run knows about one node, for drawing.

    Attributes:
        status: pending, running, success, failed, suspended, skipped or canceled.
        duration: Seconds the node took (or has been running), if known.
        retries: Retries so far (attempts after the first).
        detail: A short note shown after the time (an error, a suspend reason).
    """

    status: NodeStatus
    duration: float | None = None
    retries: int = 0
    detail: str | None = None


def format_duration(seconds: float) -> str:
    """A short human duration: "0.4 ms", "12 ms", "1.25 s", "2m 05s"."""
    ms = seconds * 1000
    if ms < 1:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if seconds < 60:
        return f"{seconds:.2f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m {rest:02d}s"


class GraphView:
    """A Rich renderable drawing a committed workflow (or an agent's loop) top to bottom.

    Example::

        Console().print(GraphView(wf, depth=2))

    Args:
        target: A committed ``Workflow``, or an ``Agent`` (its ``agent.workflow``).
        depth: How many levels of nested workflows to draw expanded; deeper ones are
            one line "▸ workflow <id> (N steps)". 0 collapses every nested workflow.
        states: Optional step path ("outer.inner") → ``NodeState``; when given, every
            node shows its status symbol (a node without an entry is pending), its
            time and its retries.
    """

    def __init__(self, target: Workflow | Agent, *, depth: int | None = None,
                 states: Mapping[str, NodeState] | None = None) -> None:
        self.workflow = workflow_of(target)
        self.depth = depth
        self.states = states

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        depth = 1 if self.depth is None else self.depth
        yield _Drawing(depth, self.states, reveal=self.depth is None).top(self.workflow)


class _Drawing:
    """Builds the renderables of one view (depth and states fixed). With ``reveal``, a
    nested workflow holding a processor or a tool is expanded at any depth: what the
    user configured is always drawn."""

    def __init__(self, depth: int, states: Mapping[str, NodeState] | None, *,
                 reveal: bool = False) -> None:
        self.depth = depth
        self.states = states
        self.reveal = reveal
        self.acting: frozenset[str] | None = None  # the hooks of the stage drawn

    def top(self, wf: Workflow) -> RenderableType:
        # one line, never cut or wrapped (past the width, a terminal wraps it)
        header = Text.assemble((f"workflow {wf.id}", "bold"), no_wrap=True, overflow="ignore")
        if wf.description:
            header.append(f"  {wf.description}", style="dim")
        return Group(header, _ARROW, *self.body(wf, "", 0))

    def body(self, wf: Workflow, prefix: str, level: int) -> list[RenderableType]:
        items: list[RenderableType] = []
        for entry in wf.entries:
            layout = entry.layout()
            if items:
                items.append(_ARROW)
            items.append(self.entry(layout, prefix, level))
        return items

    def entry(self, layout: Layout, prefix: str, level: int) -> RenderableType:
        if isinstance(layout, UnitLayout):
            unit = self.unit(layout.step, prefix, level)
            return unit if layout.frame is None else self.around(layout.frame, unit)
        if isinstance(layout, LanesLayout):
            return self.lanes(layout.kind, layout.lanes, prefix, level)
        if isinstance(layout, NodeLayout):
            # a node without a result of its own (a map): no "pending" symbol unless told
            return self.line(_NODE_GLYPH.get(layout.kind, _MAP), layout.label,
                             prefix + layout.id, implied=layout.has_result)
        assert_never(layout)

    def unit(self, step: StepLike, prefix: str, level: int) -> RenderableType:
        path = prefix + step.id
        if isinstance(step, Workflow):
            count = f"({steps_count(len(step.step_ids()))})"
            if level >= self.depth and not (self.reveal and holds_configured(step)):
                return self.line(_COLLAPSED, f"workflow {step.id} {count}", path)
            title = self.line(_EXPANDED, f"workflow {step.id} {count}", path)
            outer = self.acting
            self.acting = stage_hooks(step, outer)
            try:
                inner = Group(*self.body(step, path + ".", level + 1))
            finally:
                self.acting = outer
            return Panel(inner, title=title, title_align="left", box=box.SQUARE,
                         expand=False)
        hooks = short_hooks(acting_hooks(step.metadata.get("hooks") or [], self.acting))
        extra = f"[{', '.join(hooks)}]" if hooks else None
        return self.line(_KIND_GLYPH.get(step.kind, "□"), step.id, path, extra)

    def lanes(self, kind: str, lanes: Sequence[tuple[str | None, StepLike]], prefix: str,
              level: int) -> RenderableType:
        cells = [Panel(self.unit(step, prefix, level), title=title, title_align="left",
                       box=box.ROUNDED, expand=False) for title, step in lanes]
        if kind == "branch" and len(cells) == 1:
            return cells[0]  # a step run only when its condition holds: no lanes to frame
        count = f"{len(lanes)} lane" + ("" if len(lanes) == 1 else "s")
        return self.around(f"{kind} ({count})", _Lanes(cells), style=box.HEAVY)

    @staticmethod
    def around(title: str, inner: RenderableType, *, style: box.Box = box.DOUBLE,
               ) -> RenderableType:
        return Panel(inner, title=title, title_align="left", box=style, expand=False)

    def line(self, glyph: str, label: str, path: str, extra: str | None = None, *,
             implied: bool = True) -> Text:
        """One node: [status] kind glyph, label, [hooks], [time · retries · detail].

        Args:
            implied: Whether a node missing from ``states`` is drawn as pending.
        """
        text = Text()
        state = self.state(path, implied=implied)
        label_style = ""
        if state is not None:
            symbol, label_style = _STATUS.get(state.status, ("?", ""))
            text.append(f"{symbol} ", style=label_style)
        elif self.states is not None:
            text.append("  ")
        text.append(f"{glyph} ")
        text.append(label, style=label_style)
        if extra:
            text.append(f"  {extra}", style="cyan")
        if state is not None:
            notes = [format_duration(state.duration)] if state.duration is not None else []
            if state.retries:
                notes.append(f"retry {state.retries}")
            if state.detail:
                notes.append(state.detail)
            if notes:
                text.append("  " + " · ".join(notes), style="dim")
        return text

    def state(self, path: str, *, implied: bool = True) -> NodeState | None:
        if self.states is None:
            return None
        return self.states.get(path, NodeState("pending") if implied else None)


class _Lanes:
    """Lanes side by side; lanes that do not fit flow onto the next row, like words."""

    GAP = 1

    def __init__(self, cells: Sequence[RenderableType]) -> None:
        self.cells = list(cells)

    def _rows(self, console: Console, options: ConsoleOptions,
              ) -> tuple[list[list[RenderableType]], int]:
        """The lanes of each row, and the widest row's width."""
        rows: list[list[RenderableType]] = []
        widest = used = 0
        for cell in self.cells:
            width = Measurement.get(console, options, cell).maximum
            if rows and used + self.GAP + width <= options.max_width:
                rows[-1].append(cell)
                used += self.GAP + width
            else:
                rows.append([cell])
                used = width
            widest = max(widest, used)
        return rows, min(widest, options.max_width)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        _, width = self._rows(console, options)
        return Measurement(width, width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        rows, _ = self._rows(console, options)
        for row in rows:
            grid = Table.grid(padding=(0, self.GAP, 0, 0))
            for _ in row:
                grid.add_column()
            grid.add_row(*row)
            yield grid
