"""``RunTrace``: a run's trace across its executions — where its spans go, how each
execution's run span is opened and how the trace is stored when it ends."""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from procflow.errors import SnapshotCorruptedError
from procflow.records import RunStatus, Span, SpanEntry, StepResult, TraceRecord, Tripwire
from procflow.runtime.defaults import resolve_storage
from procflow.runtime.execution import Execution
from procflow.runtime.tracing import ParentSpan, Tracer, finished_trace_hooks

if TYPE_CHECKING:
    from procflow.storage.base import Storage

__all__ = ["RunTrace", "earlier_spans", "saved"]


class RunTrace:
    """The trace of one run (one per ``Run``): its own spans, or a place in another
    run's trace."""

    __slots__ = ("enabled", "parent", "replay_of", "spans")

    def __init__(self, enabled: bool, parent: ParentSpan | None) -> None:
        self.enabled = enabled
        """Record a trace of its own (when it has no ``parent``)."""
        self.parent: tuple[Tracer, Span] | None = parent
        """Where this run's spans go inside another run's trace (instead of its own)."""
        self.spans: list[SpanEntry] = []
        self.replay_of: tuple[str, str] | None = None
        """(run id, step path) this run replays (``Run.replay_from``)."""

    def open(self, ex: Execution, data_input: Any, records: Mapping[str, StepResult]) -> None:
        """Give an execution its tracer and open its run span."""
        wf = ex.wf
        if self.parent is not None:
            tracer, parent = self.parent
            ex.tracer = tracer
            ex.top.span = tracer.start(wf.id, "workflow", parent,
                                       input=data_input if wf.trace_io else None)
        elif self.enabled:
            ex.tracer = Tracer(self.spans)
            # interned: one name for every stored trace of the workflow
            ex.top.span = ex.tracer.start(sys.intern(f"run: {wf.id}"), "run", None,
                                          input=data_input if wf.trace_io else None)
            if self.replay_of is not None:
                ex.top.span.set(replayed_from={"run_id": self.replay_of[0],
                                               "step": self.replay_of[1]},
                                reused=sorted(records))

    def end(self, ex: Execution, status: RunStatus, result: Any,
            error: BaseException | None, tripwire: Tripwire | None) -> TraceRecord | None:
        """End the execution's run span; the run's trace to store (``save``), or ``None``
        when it has no trace of its own."""
        span = ex.top.span
        if span is None:
            return None
        wf = ex.wf
        attributes = {"tripwire": tripwire.to_dict()} if tripwire else {}
        Tracer.end(span, "running" if status == "pending" or status == "corrupted" else status,
                   output=result if wf.trace_io else None, error=error, **attributes)
        if self.parent is not None or ex.tracer is None:
            return None
        # A resumed run's trace holds each execution's run span; this one ended last.
        return TraceRecord.from_spans(ex.run_id, wf.id, status, ex.tracer.spans,
                                      truncate=wf.trace_truncate, ended=span.end)

    @staticmethod
    async def save(ex: Execution, record: TraceRecord) -> None:
        """Store the run's trace (``end``'s record) on its own."""
        store = ex.storage if ex.storage.persistent else resolve_storage(None, ex.wf)
        await store.save_trace(record)
        saved(record)


def saved(record: TraceRecord) -> None:
    """A run's trace was stored: give it to the finished-trace hooks (OpenTelemetry
    export, when instrumented)."""
    if finished_trace_hooks:
        _call_trace_hooks(record)


def _call_trace_hooks(record: TraceRecord) -> None:
    for hook in list(finished_trace_hooks):
        try:
            hook(record)
        except Exception:  # an exporter's failure must not fail the run
            logging.getLogger("procflow").warning(
                "trace hook %r failed for run %s", hook, record.run_id, exc_info=True)


async def earlier_spans(store: Storage, run_id: str) -> list[SpanEntry]:
    """The spans of a run's stored trace; a damaged trace reads as missing (the run's
    snapshot is what loading and resuming need)."""
    try:
        trace = await store.load_trace(run_id)
        if trace is None:
            return []
        return [_span_from_row(row) for row in trace.spans]
    except (SnapshotCorruptedError, KeyError, TypeError, ValueError) as exc:
        # The message says what and where; a traceback would only bury it.
        reason = (str(exc) if isinstance(exc, SnapshotCorruptedError)
                  else f"the stored trace of run {run_id} cannot be read "
                       f"({type(exc).__name__}: {exc})")
        logging.getLogger("procflow").warning("%s; the run is loaded without its trace",
                                              reason.rstrip("."))
        return []


def _span_from_row(row: Mapping[str, Any]) -> Span:
    """A span of an earlier execution, from its stored row."""
    return Span(str(row["span_id"]), row.get("parent_id"), str(row["name"]), row["kind"],
                row.get("path"), float(row["start"]), row.get("end"), row["status"],
                row.get("input"), row.get("output"), row.get("error"),
                dict(row.get("attributes") or {}))
