"""``TraceDiff``: where two runs of one workflow diverged, span by span.

Spans are matched by their place in the tree (parent, kind, path or name, and which
occurrence among siblings); inputs, outputs and errors are compared as JSON, ignoring
run ids and object addresses. The first divergence is called out on its own line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len, chop_cells
from rich.console import RenderableType
from rich.segment import Segment
from rich.text import Text

from procflow.studio.graph import format_duration
from procflow.studio.trace import (
    _ADDRESS,
    _BOLD,
    _DIM,
    _RED,
    _TRIPWIRE,
    Line,
    Row,
    _duration,
    _kind_tag,
    _label,
    _SpanTree,
    _symbol,
)

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

    from procflow.runtime.tracing import TraceRecord

__all__ = ["TraceDiff"]


class _Side:
    """One trace's spans keyed for matching: (parent key, kind, path or name, occurrence)."""

    def __init__(self, trace: TraceRecord, keys: dict[tuple[int, str, str, int], int],
                 parents: dict[int, int], depths: dict[int, int]) -> None:
        tree = _SpanTree(trace.spans)
        self.rows: dict[int, Row] = {}
        self.order: list[int] = []
        key_of: dict[int, int] = {}
        seen: dict[tuple[int, str, str], int] = {}
        for i, parent, depth, _, _ in tree.walk():
            row = tree.rows[i]
            parent_key = key_of.get(parent, -1)
            ident = (parent_key, str(row.get("kind")), str(row.get("path") or row.get("name")))
            occurrence = seen[ident] = seen.get(ident, -1) + 1
            key = keys.setdefault((*ident, occurrence), len(keys))
            parents[key], depths[key] = parent_key, depth
            key_of[i] = key
            self.rows[key] = row
            self.order.append(key)
        self.run_id = trace.run_id
        self.reused = _reused(trace)

    def canonical(self, value: Any) -> str:
        """JSON text compared across runs: run ids and object addresses blanked."""
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)
        if len(self.run_id) >= 8:
            text = text.replace(self.run_id, "<run>")
        return _ADDRESS.sub("", text)


def _reused(trace: TraceRecord) -> tuple[str, ...]:
    """The step paths a replay kept from the run it replayed (its run span says)."""
    for row in trace.spans:
        if row.get("kind") == "run" and row.get("parent_id") is None:
            reused = (row.get("attributes") or {}).get("reused")
            if isinstance(reused, list):
                return tuple(str(p) for p in reused)
    return ()


def _within(row: Row, paths: tuple[str, ...]) -> bool:
    path = row.get("path")
    if not paths or not isinstance(path, str):
        return False
    return any(path == p or path.startswith((p + ".", p + "[")) for p in paths)


def _changes(a: Row | None, b: Row | None, side_a: _Side, side_b: _Side) -> tuple[str, ...]:
    if a is None:
        return ("reused by A",) if b is not None and _within(b, side_a.reused) \
            else ("only in B",)
    if b is None:
        return ("reused by B",) if _within(a, side_b.reused) else ("only in A",)
    changes = ["status"] if a.get("status") != b.get("status") else []
    for field in ("input", "output", "error"):
        if side_a.canonical(a.get(field)) != side_b.canonical(b.get(field)):
            changes.append(field)
    return tuple(changes)


def _merge(a: list[int], b: list[int]) -> list[int]:
    """A's order, with spans only in B inserted before the next span both share."""
    in_a, position = set(a), {key: n for n, key in enumerate(b)}
    merged: list[int] = []
    j = 0
    for key in a:
        n = position.get(key)
        if n is not None and n >= j:
            merged.extend(k for k in b[j:n] if k not in in_a)
            j = n + 1
        merged.append(key)
    merged.extend(k for k in b[j:] if k not in in_a)
    return merged


class TraceDiff:
    """A Rich renderable: where two runs of one workflow diverged, span by span.

    Spans are matched by their place in the tree (parent, kind, step path or name,
    occurrence among siblings), then compared by status and by input, output and error
    as JSON (run ids and ``at 0x…`` object addresses ignored). A container whose
    output or status differs only because a span inside it does is not "the" first
    divergence: the innermost, earliest difference is.

    Args:
        a: The first run's trace.
        b: The second run's trace (same workflow).
        changes_only: Show only the spans that differ (says how many were hidden).

    Attributes:
        first_divergence: Where the runs first diverged, e.g. "step 'b' — output
            differs", or ``None`` when every span matches.

    Raises:
        ValueError: The traces belong to different workflows.
    """

    def __init__(self, a: TraceRecord, b: TraceRecord, *, changes_only: bool = False) -> None:
        if a.workflow_id != b.workflow_id:
            raise ValueError(f"cannot diff runs of different workflows: {a.workflow_id!r} "
                             f"(run {a.run_id}) and {b.workflow_id!r} (run {b.run_id}); "
                             "pick two runs of the same workflow")
        self.a, self.b, self.changes_only = a, b, changes_only
        keys: dict[tuple[int, str, str, int], int] = {}
        self.parents: dict[int, int] = {}
        self.depths: dict[int, int] = {}
        side_a = _Side(a, keys, self.parents, self.depths)
        side_b = _Side(b, keys, self.parents, self.depths)
        self.names = {key: ident for ident, key in keys.items()}
        self.repeated = {(p, k, n) for (p, k, n, occurrence) in keys if occurrence}
        self.order = _merge(side_a.order, side_b.order)
        self.pairs = {key: (side_a.rows.get(key), side_b.rows.get(key)) for key in self.order}
        self.changes = {key: _changes(*self.pairs[key], side_a, side_b) for key in self.order}
        self.first = self._first_divergence()
        self.first_divergence: str | None = (
            None if self.first is None else self._describe(self.first))

    def _first_divergence(self) -> int | None:
        below: set[int] = set()  # keys with a differing span inside
        for key in self.order:
            if self.changes[key] and not self.changes[key][0].startswith("reused"):
                parent = self.parents[key]
                while parent >= 0 and parent not in below:
                    below.add(parent)
                    parent = self.parents[parent]
        differing = [key for key in self.order if self.changes[key]
                     and not self.changes[key][0].startswith("reused")]
        for key in differing:
            consequence = set(self.changes[key]) <= {"status", "output", "error"}
            if not (consequence and key in below):
                return key
        return differing[0] if differing else None

    def _describe(self, key: int) -> str:
        """ "step 'b' — output differs" for a matched key (where it sits when its name
        alone does not say: no path, or inside a repeated span)."""
        _, kind, ident, _ = self.names[key]
        where = f"{'step' if kind == 'step' else kind} '{ident}'{self._nth(key)}"
        crumbs, parent = [], self.parents[key]
        while parent >= 0 and self.parents[parent] >= 0:  # the run span says nothing
            crumbs.append(parent)
            parent = self.parents[parent]
        a, b = self.pairs[key]
        row = a if a is not None else b
        if crumbs and (not (row or {}).get("path") or any(self._nth(k) for k in crumbs)):
            names = [self._crumb(k) for k in reversed(crumbs)]
            # a loop and its iterations share a name: "agent-step #2", not twice
            names = [n for n, after in zip(names, [*names[1:], ""], strict=True)
                     if after.split(" #")[0] != n]
            where += " in " + " › ".join(names)
        changes = self.changes[key]
        if a is None or b is None:
            return f"{where} — {changes[0]}"
        if "status" in changes:  # a new status explains a changed output and error
            error = b.get("error") or a.get("error")
            return (f"{where} — status differs ({a.get('status')} → {b.get('status')}"
                    f"{f': {error}' if error else ''})")
        return f"{where} — {', '.join(f'{change} differs' for change in changes)}"

    def _nth(self, key: int) -> str:
        """ " #2" for the second of repeated siblings (a loop's iterations), else ""."""
        parent, kind, ident, occurrence = self.names[key]
        return f" #{occurrence + 1}" if (parent, kind, ident) in self.repeated else ""

    def _crumb(self, key: int) -> str:
        a, b = self.pairs[key]
        row = a if a is not None else b
        return (_label(row) if row is not None else self.names[key][2]) + self._nth(key)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self._header()
        marks = {key: _marker(self.changes[key]) for key in self.order}
        marker_cells = max((len(m) for m in marks.values()), default=1)
        # as wide as the longest label, within the width: a piped diff (plain output is
        # 1,000 columns wide so nothing is cut) is not padded out to the edge
        longest = max((cell_len(self._label_of(key)) for key in self.order), default=0)
        label_cells = max(12, min(options.max_width - marker_cells - 43, longest))
        head = (f"  {'':<{marker_cells}}  {'span':<{label_cells}} {'A':>10}  {'B':>10}  "
                f"{'Δ B−A':>14}")
        yield from (Segment(head.rstrip(), _DIM), Segment.line())
        hidden = 0
        for key in self.order:
            if self.changes_only and not self.changes[key]:
                hidden += 1
                continue
            line = self._row(key, marks[key], marker_cells, label_cells)
            yield from Segment.adjust_line_length(line, options.max_width, pad=False)
            yield Segment.line()
        if hidden:
            yield Text(f"… {hidden} identical span{'' if hidden == 1 else 's'} hidden "
                       "(changes_only=True)", style=_DIM)

    def _header(self) -> Iterator[RenderableType]:
        yield Text.assemble(("diff of workflow ", _DIM), (self.a.workflow_id, _BOLD))
        for tag, trace in (("A", self.a), ("B", self.b)):
            symbol, style = _symbol(trace.status)
            took = (format_duration(max(0.0, trace.ended_at - trace.started_at))
                    if trace.ended_at is not None else "not ended")
            yield Text.assemble(f"  {tag}  run {trace.run_id}  ", (f"{symbol} {trace.status}",
                                                                   style),
                                f"  {took}  {len(trace.spans)} spans")
        if self.first_divergence is None:
            yield Text("no divergence: every span matches in status, input, output and error",
                       style="green")
        else:
            yield Text(f"first divergence: {self.first_divergence}", style="bold yellow")
        marks = [_marker(c) for c in self.changes.values()]
        counts = [marks.count("="), sum(m.startswith("≠") for m in marks),
                  marks.count("only in A"), marks.count("only in B")]
        reused = sum(m.startswith("reused") for m in marks)
        yield Text(f"{len(self.order)} spans: {counts[0]} same, {counts[1]} differ, "
                   f"{counts[2]} only in A, {counts[3]} only in B"
                   + (f", {reused} reused by the replay" if reused else ""), style=_DIM)
        for tag, trace in (("A", self.a), ("B", self.b)):
            paths = _reused(trace)
            if paths:
                yield Text(f"{tag} is a replay: it reused the stored results of "
                           f"{', '.join(paths)} (not run again)", style=_DIM)

    def _label_of(self, key: int) -> str:
        """The span's label as its row shows it: indented, with its kind."""
        a, b = self.pairs[key]
        row = a if a is not None else b
        assert row is not None  # every key comes from one side at least
        return "  " * self.depths[key] + _label(row) + _kind_tag(row)

    def _row(self, key: int, mark: str, marker_cells: int, label_cells: int) -> Line:
        a, b = self.pairs[key]
        label = self._label_of(key)
        if cell_len(label) > label_cells:
            label = (chop_cells(label, label_cells - 1) or [""])[0] + "…"
        mark_style = (_DIM if mark == "=" or mark.startswith("reused") else
                      _RED if mark.startswith("only") else _TRIPWIRE)
        first = key == self.first
        return [Segment("▶ " if first else "  ", _TRIPWIRE),
                Segment(mark.ljust(marker_cells), mark_style + _BOLD if first else mark_style),
                Segment("  " + label.ljust(label_cells + len(label) - cell_len(label)) + " "),
                *_cell(a), Segment("  "), *_cell(b),
                Segment(("  " + _delta(a, b).rjust(14)).rstrip(), _DIM)]


def _marker(changes: tuple[str, ...]) -> str:
    if not changes:
        return "="
    if changes[0].startswith(("only", "reused")):
        return changes[0]
    return "≠ " + ", ".join(changes)


def _cell(row: Row | None) -> Line:
    if row is None:
        return [Segment("—".rjust(10), _DIM)]
    symbol, style = _symbol(str(row.get("status")))
    took = _duration(row)
    return [Segment(symbol, style),
            Segment(" " + ("—" if took is None else format_duration(took)).rjust(8))]


def _delta(a: Row | None, b: Row | None) -> str:
    took_a = None if a is None else _duration(a)
    took_b = None if b is None else _duration(b)
    if took_a is None or took_b is None:
        return ""
    change = took_b - took_a
    if change == 0:
        return "±0"
    text = ("-" if change < 0 else "+") + format_duration(abs(change))
    if took_a > 0 and took_b > 0 and f"{took_b / took_a:.1f}" != "1.0":
        text += f" ×{took_b / took_a:.1f}"
    return text
