"""The timeline of a run: its spans as bars on one time axis (a Gantt view), where
time went seen at a glance; and SVG pictures of any studio drawing.

``TimelineView`` draws in the terminal (and in SVG through ``to_svg``); piped, the
``procflow trace --timeline`` command prints ``timeline_lines`` instead: one
tab-separated line per span with its offset from the start and its duration.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len, set_cell_size
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from procflow.studio.graph import format_duration
from procflow.studio.output import masked, plain_duration
from procflow.studio.trace import _bar, _label, _SpanTree, _start, _symbol

if TYPE_CHECKING:
    from rich.console import ConsoleOptions, RenderableType, RenderResult

    from procflow.runtime.tracing import TraceRecord

__all__ = ["TimelineView", "timeline_lines", "to_svg"]

_DIM = Style(dim=True)
_TICKS = 4
_MIN_BAR_CELLS = 20


class TimelineView:
    """A Rich renderable: one row per span (tree order, indented), its bar placed on a
    time axis shared by every row, ticks above.

    Example::

        Console().print(TimelineView(await storage.load_trace(run_id)))

    Args:
        trace: The stored trace.
        max_depth: Draw spans this deep at most (the run is depth 0).
    """

    def __init__(self, trace: TraceRecord, *, max_depth: int | None = None) -> None:
        self.trace = trace
        self.tree = _SpanTree(trace.spans)
        self.max_depth = max_depth
        rows = self.tree.rows
        starts = [_start(row, trace.started_at) for row in rows]
        ends = [row.get("end") for row in rows]
        self.t0 = min([trace.started_at, *starts]) if rows else trace.started_at
        last = max([e for e in ends if isinstance(e, int | float)]
                   + [trace.ended_at or self.t0, *starts])
        self.total = max(0.0, last - self.t0)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        trace = self.trace
        symbol, style = _symbol(trace.status)
        yield Text.assemble(("timeline ", _DIM), (trace.workflow_id, "bold"), ("  run ", _DIM),
                            trace.run_id, "  ", (f"{symbol} {trace.status}", style),
                            f"  {format_duration(self.total)}")
        walked = list(self.tree.walk(self.max_depth))
        labels = [f"{'  ' * depth}{_label(self.tree.rows[i])}" for i, _, depth, _, _ in walked]
        widest = max((cell_len(x) for x in labels), default=8) + 2
        label_cells = max(8, min(widest, options.max_width - _MIN_BAR_CELLS - 11))
        bars = max(_MIN_BAR_CELLS, options.max_width - label_cells - 11)
        yield from self._axis(label_cells + 2, bars)
        for (i, _, _, _, _), label in zip(walked, labels, strict=True):
            row = self.tree.rows[i]
            mark, mark_style = _symbol(str(row.get("status")))
            start = _start(row, self.t0)
            end = row.get("end")
            took = "" if end is None else format_duration(max(0.0, end - start))
            yield Segment(f"{mark} ", mark_style)
            yield Segment(set_cell_size(label, label_cells))
            yield Segment(_bar(start, end, self.t0, self.total, bars).ljust(bars), mark_style)
            yield Segment(f" {took:>8}", _DIM)
            yield Segment.line()

    def _axis(self, lead: int, bars: int) -> Iterator[Segment]:
        ticks = [" "] * bars
        for n in range(_TICKS + 1):
            at = min(bars - 1, round(n * (bars - 1) / _TICKS))
            ticks[at] = "┬" if n < _TICKS else "┐"
        labels = [" "] * (bars + 12)
        for n in range(_TICKS + 1):
            text = "0" if n == 0 else format_duration(self.total * n / _TICKS)
            at = min(bars - 1, round(n * (bars - 1) / _TICKS))
            at = max(0, min(at - len(text) // 2, len(labels) - len(text)))
            if n == _TICKS:
                at = max(0, bars - len(text))
            if all(c == " " for c in labels[max(0, at - 1):at + len(text) + 1]):
                labels[at:at + len(text)] = list(text)
        yield Segment(" " * lead + "".join(labels).rstrip(), _DIM)
        yield Segment.line()
        yield Segment(" " * lead + "".join(ticks), _DIM)
        yield Segment.line()


def timeline_lines(trace: TraceRecord) -> Iterator[str]:
    """``procflow trace --timeline`` piped: a header, then one tab-separated line per span
    in tree order: status, offset from the run's start and duration (seconds), kind,
    name (indented two spaces a level)."""
    view = TimelineView(trace)
    yield (f"# timeline {trace.workflow_id}\trun {trace.run_id}\t{trace.status}\t"
           f"{plain_duration(view.total)}\t{len(trace.spans)} spans")
    for i, _, depth, _, _ in view.tree.walk():
        row = view.tree.rows[i]
        start = _start(row, view.t0)
        end = row.get("end")
        yield "\t".join([str(row.get("status")), plain_duration(start - view.t0),
                         plain_duration(None if end is None else end - start),
                         str(row.get("kind")), "  " * depth + masked(_label(row))])


def to_svg(renderable: RenderableType | Any, *, width: int, title: str = "procflow") -> str:
    """A standalone SVG of a drawing, as the terminal shows it (Rich's own export)."""
    console = Console(record=True, width=width, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", highlight=False)
    console.print(renderable)
    return console.export_svg(title=title)
