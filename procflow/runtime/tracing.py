"""Traces: ``Tracer`` collects the spans of one run (run, steps, containers, processors,
model and tool calls). The span and trace records themselves live in
``procflow.records`` (storage reads them too) and are re-exported here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, NamedTuple

from procflow.records import (
    DEFAULT_TRUNCATE,
    Leaf,
    Span,
    SpanEntry,
    SpanKind,
    SpanRows,
    SpanStatus,
    TraceRecord,
    as_span,
    redact_secrets,
    span_id,
)

__all__ = [
    "DEFAULT_TRUNCATE",
    "Entry",
    "Leaf",
    "ParentSpan",
    "Span",
    "SpanKind",
    "SpanRows",
    "SpanStatus",
    "TraceRecord",
    "Tracer",
    "as_span",
    "current_step_span",
    "finished_trace_hooks",
    "redact_secrets",
]

Entry = SpanEntry
"""What a tracer's list holds (a ``Span`` or a light ``Leaf``)."""

_now = time.time

finished_trace_hooks: list[Callable[[TraceRecord], None]] = []
"""Functions called with each finished run's trace once it is stored (empty unless
something such as ``procflow.instrument()`` registers one; a hook's error is logged,
never raised into the run)."""


class Tracer:
    """Collects the spans of one run (``Span`` objects, and ``Leaf`` tuples).

    A span's id is its 1-based position in ``spans`` (``span_id(len(spans) + 1)`` when it is
    added): ``leaf`` and ``open`` append that way, and so may a hot caller that builds its
    ``Span`` itself (the step runner does for each step) — append it at once.
    """

    __slots__ = ("spans",)

    def __init__(self, spans: list[Entry] | None = None) -> None:
        self.spans: list[Entry] = spans if spans is not None else []

    def leaf(self, name: str, kind: SpanKind, parent: Span | None, start: float,
             status: SpanStatus = "success", attributes: dict[str, Any] | None = None,
             end: float | None = None) -> None:
        """Record a span that has no children and has ended, as a light ``Leaf``.

        The fast path for hot callers (processor hook calls, stream totals): pass the
        arguments positionally; ``end`` defaults to now.
        """
        spans = self.spans
        spans.append((len(spans) + 1, None if parent is None else parent.span_id, name, kind,
                      start, _now() if end is None else end, status, attributes))

    def open(self, name: str, kind: SpanKind, parent: Span | None, path: str | None,
             start: float, input: Any = None) -> Span:
        """Open a span under ``parent`` that started at ``start`` (close it with ``ok`` or
        ``end``).

        The fast path for hot callers: every argument positional, the clock read by the
        caller (who usually needs it too).
        """
        spans = self.spans
        span = Span(span_id(len(spans) + 1), None if parent is None else parent.span_id, name,
                    kind, path, start, None, "running", input)
        spans.append(span)
        return span

    def start(self, name: str, kind: SpanKind, parent: Span | None,
              path: str | None = None, input: Any = None) -> Span:
        """Open a span under ``parent``, starting now."""
        return self.open(name, kind, parent, path, _now(), input)

    @staticmethod
    def ok(span: Span, output: Any) -> None:
        """Close a span successfully (the hot path: no keyword handling)."""
        span.end = time.time()
        span.status = "success"
        span.output = output

    @staticmethod
    def end(span: Span, status: SpanStatus, *, output: Any = None,
            error: BaseException | str | None = None, **attributes: Any) -> None:
        """Close a span."""
        span.end = time.time()
        span.status = status
        if output is not None:
            span.output = output
        if error is not None:
            span.error = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        if attributes:
            span.set(**attributes)


class ParentSpan(NamedTuple):
    """Where a run's spans go inside another run's trace: under ``span``, recorded by
    ``tracer`` (``Workflow.create_run(parent_span=...)``)."""

    tracer: Tracer
    span: Span

    @classmethod
    def of(cls, tracer: Tracer | None, span: Span | None) -> ParentSpan | None:
        """The parent for a caller that may not be traced (``None`` when either is)."""
        if tracer is None or span is None:
            return None
        return cls(tracer, span)


current_step_span: ContextVar[ParentSpan | None] = ContextVar("procflow_step_span",
                                                             default=None)
"""The span of the step whose code the current task runs, with its tracer (set by the
executor around each traced step). Tasks copy their context when they start, so
concurrent branches each see their own step here, never a sibling's: work recorded
from inside a step (processor hook calls) takes its parent from this, not from state
the branches share."""
