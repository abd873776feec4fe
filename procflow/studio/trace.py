"""``TraceView``: a stored run's spans drawn as a tree with a waterfall.

A ``TraceRecord`` holds flat span rows; the view arranges them by ``parent_id``
(children by start time) and draws one line per span: status symbol, name, kind,
notable attributes, duration and a bar placing the span inside the run's time.
Tripwires and errors get a line of their own under their span (``TraceDiff``, in
``procflow.studio.diff``, compares two runs).

The view writes its span lines as plain segments, one per line, so a trace of 10,000
spans renders in well under a second; symbols carry the meaning, colour only helps.
"""

from __future__ import annotations

import json
import math
import re
import textwrap
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from rich import box
from rich.cells import cell_len, chop_cells
from rich.console import Group, RenderableType
from rich.highlighter import JSONHighlighter
from rich.panel import Panel
from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Text

from procflow.studio.graph import _STATUS, format_duration
from procflow.studio.output import format_cost

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

    from procflow.runtime.tracing import TraceRecord

__all__ = ["Line", "Row", "TraceView"]

Row: TypeAlias = dict[str, Any]
Line: TypeAlias = list[Segment]

_SYMBOLS: dict[str, tuple[str, Style]] = {
    status: (symbol, Style.parse(style)) for status, (symbol, style) in _STATUS.items()}
_SYMBOLS["tripwire"] = ("⚡", Style.parse("bold yellow"))
_UNKNOWN = ("?", Style())
_DIM, _CYAN, _RED = Style(dim=True), Style(color="cyan"), Style(color="red")
_TRIPWIRE, _BOLD = Style.parse("bold yellow"), Style(bold=True)
_DURATION_CELLS = 8
_MIN_LABEL_CELLS = 24
_MIN_BAR_CELLS = 16
_MAX_BAR_CELLS = 60
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _symbol(status: str) -> tuple[str, Style]:
    return _SYMBOLS.get(status, _UNKNOWN)


def _duration(row: Row) -> float | None:
    start, end = row.get("start"), row.get("end")
    return None if end is None else max(0.0, end - (end if start is None else start))


def _start(row: Row, default: float) -> float:
    start = row.get("start")
    return default if start is None else float(start)


def _label(row: Row) -> str:
    """The span's name, with its foreach index ("each[2]") when the path has one."""
    name, path = str(row.get("name")), str(row.get("path") or "")
    if path.endswith("]") and "[" in path and not name.endswith("]"):
        return name + path[path.rindex("["):]
    return name


def _kind_tag(row: Row) -> str:
    kind, name = row.get("kind"), str(row.get("name"))
    if kind in ("step", "run", None) or name == kind:
        return ""
    return f" [{kind}]"


def _notes(attributes: dict[str, Any]) -> list[str]:
    """Notable attributes, short: retries, cache, tokens, chunks, items, iterations."""
    notes: list[str] = []
    attempts = attributes.get("attempts")
    if isinstance(attempts, int) and attempts > 1:
        notes.append(f"retry {attempts - 1}")
    if attributes.get("from_cache"):
        notes.append("cached")
    if attributes.get("parked"):
        notes.append("parked: continued by a later execution")
    note = attributes.get("note")  # e.g. "attempt 2 after worker loss"
    if isinstance(note, str) and note:
        notes.append(note)
    fallbacks = attributes.get("fallbacks")
    if isinstance(fallbacks, list) and fallbacks:
        failed = ", ".join(f"{f.get('model')} ({_failure(f)})" for f in fallbacks
                           if isinstance(f, dict))
        answered = attributes.get("answered_by")
        notes.append(f"answered by {answered} after {failed} failed" if answered
                     else f"failed: {failed}")
    usage = attributes.get("usage")
    if isinstance(usage, dict) and ("input_tokens" in usage or "output_tokens" in usage):
        note = f"in {usage.get('input_tokens', 0)} / out {usage.get('output_tokens', 0)} tok"
        cost = usage.get("cost")
        notes.append(f"{note} · {format_cost(cost)}" if isinstance(cost, int | float)
                     else note)
    for key, one, many in (("chunks", "chunk", "chunks"), ("items", "item", "items"),
                           ("iterations", "iteration", "iterations")):
        count = attributes.get(key)
        if isinstance(count, int):
            notes.append(f"{count} {one if count == 1 else many}")
    return notes


def _failure(fallback: dict[str, Any]) -> str:
    status = fallback.get("status_code")
    return f"HTTP {status}" if isinstance(status, int) else str(fallback.get("error"))[:60]


def _error_of(row: Row) -> Any:
    return row.get("error")


def _tripwire_of(row: Row) -> Any:
    return (row.get("attributes") or {}).get("tripwire")


def _tripwire_text(tripwire: Any) -> str:
    if not isinstance(tripwire, dict):
        return f"⚡ tripwire: {tripwire}"
    text = f"⚡ tripwire: {tripwire.get('reason')}"
    if tripwire.get("processor_id"):
        text += f" (processor {tripwire['processor_id']})"
    if tripwire.get("retry"):
        text += " · retry requested"
    return text


def _bar(start: float, end: float | None, t0: float, total: float, cells: int) -> str:
    """``cells`` characters placing [start, end] inside [t0, t0 + total], to half a cell."""
    halves = 2 * cells
    if total <= 0:
        lo, hi = 0, halves
    else:
        stop = t0 + total if end is None else end
        lo = min(halves - 1, max(0, math.floor((start - t0) / total * halves + 1e-9)))
        hi = min(halves, max(lo + 1, math.ceil((stop - t0) / total * halves - 1e-9)))
    if end is None:  # still open: shaded, whole cells
        return " " * (lo // 2) + "░" * ((hi + 1) // 2 - lo // 2)
    first, last = lo // 2, (hi - 1) // 2
    if first == last:
        glyph = "█" if lo % 2 == 0 and hi % 2 == 0 else "▐" if lo % 2 else "▌"
        return " " * first + glyph
    return (" " * first + ("▐" if lo % 2 else "█") + "█" * (last - first - 1)
            + ("▌" if hi % 2 else "█"))


def _fold(prefix: str, text: str, style: Style, width: int) -> list[Line]:
    """``text`` under ``prefix`` (dim guides), folded to ``width`` cells, nothing dropped."""
    room = max(8, width - cell_len(prefix))
    lines: list[Line] = []
    for paragraph in text.splitlines() or [""]:
        for words in textwrap.wrap(paragraph, room, subsequent_indent="  ",
                                   break_on_hyphens=False) or [""]:
            for chunk in chop_cells(words, room) or [""]:  # wide characters
                lines.append([Segment(prefix, _DIM), Segment(chunk.rstrip(), style)])
    return lines


class _SpanTree:
    """Span rows arranged by ``parent_id``: O(n) dicts, children sorted by start."""

    def __init__(self, rows: Sequence[Row]) -> None:
        self.rows = list(rows)
        index = {row.get("span_id"): i for i, row in enumerate(self.rows)}
        self.children: dict[int, list[int]] = {}
        self.roots: list[int] = []
        for i, row in enumerate(self.rows):
            parent = index.get(row.get("parent_id"), -1)
            if parent < 0 or parent == i:
                self.roots.append(i)
            else:
                self.children.setdefault(parent, []).append(i)
        starts = [_start(row, 0.0) for row in self.rows]
        for kids in self.children.values():
            kids.sort(key=starts.__getitem__)  # stable: equal starts keep recording order
        self.roots.sort(key=starts.__getitem__)

    def walk(self, max_depth: int | None = None) -> Iterator[tuple[int, int, int, str, str]]:
        """(index, parent index or -1, depth, guides before the symbol, guides under it)
        in tree order. Spans caught in a parent cycle come last, as roots."""
        seen = bytearray(len(self.rows))
        for start in [*self.roots, *range(len(self.rows))]:
            stack = [(start, -1, 0, "", "")]
            while stack:
                item = stack.pop()
                i, _, depth, _, base = item
                if seen[i]:
                    continue
                seen[i] = 1
                if max_depth is None or depth <= max_depth:  # deeper ones: seen, not drawn
                    yield item
                kids = self.children.get(i)
                if not kids:
                    continue
                last = len(kids) - 1
                for n in range(last, -1, -1):
                    lead, under = ("└─ ", "   ") if n == last else ("├─ ", "│  ")
                    stack.append((kids[n], i, depth + 1, base + lead, base + under))

    def subtree_sizes(self) -> list[int]:
        sizes = [1] * len(self.rows)
        for i, parent, *_ in reversed(list(self.walk())):
            if parent >= 0:
                sizes[parent] += sizes[i]
        return sizes


class TraceView:
    """A Rich renderable: a run's span tree with timings, a waterfall, tripwires, errors.

    Example::

        Console().print(TraceView(await storage.load_trace(run_id), step="llm-call"))

    Args:
        trace: The stored trace.
        step: A step path or span name; when given, a detail panel follows the tree
            for every matching span (input, output, error and all attributes).
        width_bars: Characters of the waterfall column (default: what the names leave
            of the console's width; dropped rather than cutting names).
        max_depth: Draw spans this deep at most (the run is depth 0); a span whose
            children are hidden says "+N nested spans".
        max_spans: Draw this many spans at most, then "… N more spans".

    Raises:
        ValueError: ``step`` matches no span (the message lists what exists).
    """

    def __init__(self, trace: TraceRecord, *, step: str | None = None,
                 width_bars: int | None = None,
                 max_depth: int | None = None, max_spans: int | None = None) -> None:
        self.trace = trace
        self.tree = _SpanTree(trace.spans)
        self.width_bars = None if width_bars is None else max(1, width_bars)
        self.max_depth = max_depth
        self.max_spans = max_spans
        self.step = step
        self.selected = [] if step is None else _select(self.tree.rows, step, trace.run_id)
        rows = self.tree.rows
        self.t0 = min([trace.started_at, *(r["start"] for r in rows
                                           if r.get("start") is not None)])
        ends = [r["end"] for r in rows if r.get("end") is not None]
        self.t1 = trace.ended_at if trace.ended_at is not None else max(ends, default=self.t0)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        label_cells, bars = self._columns(width)
        yield self._header()
        if bars:
            total = format_duration(max(0.0, self.t1 - self.t0))
            axis = " " * (label_cells + _DURATION_CELLS + 3) + "0" + total.rjust(bars - 1)
            yield from (Segment(axis.rstrip(), _DIM), Segment.line())
        for line in self._lines(label_cells, bars, width):
            yield from line
            yield Segment.line()
        for row in self.selected:
            yield Text()
            yield self._detail(row)

    def _columns(self, width: int) -> tuple[int, int]:
        """(label cells, bar cells): labels as wide as the widest needs, the waterfall
        the rest (``width_bars`` when given); no waterfall before a name is cut."""
        needed = max((self._label_width(i, depth, lead) for i, _, depth, lead, _ in
                      self.tree.walk(self.max_depth)), default=_MIN_LABEL_CELLS)
        needed = max(needed, 8)
        room = width - _DURATION_CELLS - 3
        if self.width_bars is not None:
            bars = self.width_bars
            label_cells = room - bars
            if label_cells < min(needed, _MIN_LABEL_CELLS):
                return width - _DURATION_CELLS - 1, 0
            return label_cells, bars
        if room - needed >= _MIN_BAR_CELLS:
            return needed, min(_MAX_BAR_CELLS, room - needed)
        return width - _DURATION_CELLS - 1, 0

    def _label_width(self, i: int, depth: int, lead: str) -> int:
        row = self.tree.rows[i]
        notes = _notes(row.get("attributes") or {})
        if self.max_depth is not None and depth >= self.max_depth and i in self.tree.children:
            notes.append("+9999 nested spans")
        note_cells = cell_len("  " + " · ".join(notes)) if notes else 0
        mark = cell_len(_symbol(str(row.get("status")))[0]) + 1  # "⚡" takes two cells
        return (cell_len(lead) + mark + cell_len(_label(row)) + cell_len(_kind_tag(row))
                + min(note_cells, 40))

    def _header(self) -> Text:
        trace = self.trace
        symbol, style = _symbol(trace.status)
        took = (format_duration(max(0.0, trace.ended_at - trace.started_at))
                if trace.ended_at is not None else "not ended")
        count = len(self.tree.rows)
        return Text.assemble(("workflow ", _DIM), (trace.workflow_id, _BOLD),
                             ("  run ", _DIM), trace.run_id, "  ", (f"{symbol} {trace.status}",
                                                                    style),
                             f"  {took}  {count} span{'' if count == 1 else 's'}")

    def _lines(self, label_cells: int, bars: int, width: int) -> Iterator[Line]:
        tree, rows = self.tree, self.tree.rows
        sizes = tree.subtree_sizes() if self.max_depth is not None else None
        total = self.t1 - self.t0
        walk = tree.walk(self.max_depth)
        for shown, (i, _, depth, lead, base) in enumerate(walk):
            if self.max_spans is not None and shown >= self.max_spans:
                more = 1 + sum(1 for _ in walk)
                yield [Segment(f"… {more} more span{'' if more == 1 else 's'}"
                               f" (max_spans={self.max_spans})", _DIM)]
                return
            row = rows[i]
            kids = tree.children.get(i)
            drawn_kids = bool(kids) and (self.max_depth is None or depth < self.max_depth)
            notes = _notes(row.get("attributes") or {})
            if kids and not drawn_kids and sizes is not None:
                notes.append(f"+{sizes[i] - 1} nested spans")
            status = str(row.get("status"))
            symbol, style = _symbol(status)
            name, tag = _label(row), _kind_tag(row)
            note_text = "  " + " · ".join(notes) if notes else ""
            fixed = cell_len(lead) + cell_len(f"{symbol} ") + cell_len(tag)  # "⚡" is 2 wide
            under: list[tuple[str, Style]] = []
            if note_text and fixed + cell_len(name) + cell_len(note_text) > label_cells:
                under.append((note_text.strip(), _DIM))
                note_text = ""
            if fixed + cell_len(name) > label_cells:
                room = max(1, label_cells - fixed - 1)
                name = (chop_cells(name, room) or [""])[0] + "…"
            label = [Segment(lead, _DIM), Segment(f"{symbol} {name}", style),
                     Segment(tag, _CYAN), Segment(note_text, _DIM)]
            start, end = _start(row, self.t0), row.get("end")
            took = _duration(row)
            duration = ("running" if status == "running" else "—") if took is None else \
                format_duration(took)
            line = Segment.adjust_line_length(label, label_cells)
            line.append(Segment(" " + duration.rjust(_DURATION_CELLS), _DIM))
            if bars:
                line.append(Segment("  " + _bar(start, end, self.t0, total, bars), style))
            yield line
            tripwire = _tripwire_of(row)
            if tripwire:
                # at the run and where it was raised; the spans between pass it on
                if row.get("parent_id") is None or not (
                        drawn_kids and self._shown_below(i, _tripwire_of, tripwire)):
                    under.append((_tripwire_text(tripwire), _TRIPWIRE))
            elif row.get("error") and not self._shown_below(i, _error_of, row["error"]):
                under.append((f"✖ {row['error']}", _RED))
            prefix = base + ("│ " if drawn_kids else "  ")  # text under the name
            for text, text_style in under:
                yield from _fold(prefix, text, text_style, width)

    def _shown_below(self, i: int, read: Callable[[Row], Any], value: Any) -> bool:
        """Whether a child carries this same error or tripwire (``read`` from its row):
        shown there, nearer its origin."""
        rows = self.tree.rows
        return any(read(rows[k]) == value for k in self.tree.children.get(i, ()))

    def _detail(self, row: Row) -> Panel:
        symbol, style = _symbol(str(row.get("status")))
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(overflow="fold")
        grid.add_row("status", Text(f"{symbol} {row.get('status')}", style=style))
        grid.add_row("path", str(row.get("path") or "—"))
        grid.add_row("span", f"{row.get('span_id')} (parent {row.get('parent_id') or '—'})")
        start, took = _start(row, self.t0), _duration(row)
        when = f"+{format_duration(max(0.0, start - self.t0))}"
        grid.add_row("time", f"{when}, took {format_duration(took)}" if took is not None
                     else f"{when}, not ended")
        if row.get("error"):
            grid.add_row("error", Text(str(row["error"]), style=_RED))
        grid.add_row("input", _value(row.get("input")))
        grid.add_row("output", _value(row.get("output")))
        attributes = dict(row.get("attributes") or {})
        trace_text = attributes.pop("traceback", None)
        grid.add_row("attributes", _value(attributes))
        if isinstance(trace_text, str) and trace_text:
            grid.add_row("traceback", Text(trace_text.rstrip(), style=_DIM, overflow="fold"))
        title = Text.assemble((f"{symbol} ", style), (_label(row), _BOLD),
                              (_kind_tag(row), _CYAN))
        return Panel(grid, title=title, title_align="left", box=box.ROUNDED)


def _value(value: Any) -> RenderableType:
    """Pretty JSON; a truncated value shows its preview and how long it was."""
    if isinstance(value, dict) and value.get("truncated") is True and "preview" in value:
        return Group(Text(str(value["preview"]), overflow="fold"),
                     Text(f"(truncated, {value.get('chars')} chars)", style=_DIM))
    text = Text(json.dumps(value, indent=2, ensure_ascii=False, default=repr), overflow="fold")
    JSONHighlighter().highlight(text)
    return text


def _select(rows: list[Row], step: str, run_id: str) -> list[Row]:
    found = [row for row in rows if step in (row.get("path"), row.get("name"))]
    if found:
        return found
    known = list(dict.fromkeys([*(r["path"] for r in rows if r.get("path")),
                                *(str(r.get("name")) for r in rows)]))
    listed = ", ".join(known[:30]) + (f", … and {len(known) - 30} more" if len(known) > 30
                                      else "")
    raise ValueError(f"no span has the step path or name {step!r} in run {run_id}; "
                     f"available: {listed or 'none (the trace is empty)'}")


# --------------------------------------------------------------------------- diff
