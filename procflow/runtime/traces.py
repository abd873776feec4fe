"""Reading a stored trace back as typed spans: ``load_trace(run_id)``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from procflow.records import SpanKind, SpanStatus, TraceRecord

if TYPE_CHECKING:
    from procflow.storage.base import Storage

__all__ = ["Trace", "TraceSpan", "load_trace"]


@dataclass(frozen=True, slots=True)
class TraceSpan:
    """One stored span of a run, with the spans under it.

    Attributes:
        span_id: Unique within the trace.
        parent_id: The enclosing span's id (``None`` for the run span).
        name: What it is, e.g. "double", "model call: openai/gpt-4o".
        kind: "run", "step", "workflow", "model", "tool", "processor"...
        path: The step path (dotted for nested steps), for step-like spans.
        start: Seconds since the epoch.
        end: When it ended (``None`` if it never did).
        status: How it ended: "success", "failed", "suspended", "skipped"...
        input: Its input, as stored (truncated, secrets masked).
        output: Its output, as stored (truncated, secrets masked).
        error: The error message, when it failed.
        attributes: Retries, tripwire, usage, chunk counts, latency...
        children: The spans directly under it, in the order they started.
    """

    span_id: str
    parent_id: str | None
    name: str
    kind: SpanKind
    path: str | None = None
    start: float = 0.0
    end: float | None = None
    status: SpanStatus = "success"
    input: Any = None
    output: Any = None
    error: str | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)
    children: tuple[TraceSpan, ...] = ()

    @property
    def duration(self) -> float | None:
        """Seconds from start to end (``None`` when it has no end)."""
        return None if self.end is None else self.end - self.start

    def walk(self) -> Iterator[TraceSpan]:
        """This span, then every span under it, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()


@dataclass(frozen=True, slots=True)
class Trace:
    """A run's stored trace.

    Attributes:
        run_id: The run.
        workflow_id: Its workflow (``"agent:<id>"`` for an agent call).
        status: The run's status when the trace was stored.
        started_at: When the run started (seconds since the epoch).
        ended_at: When it ended, if it did.
        roots: The top spans (normally one, the run span), each holding its children.
    """

    run_id: str
    workflow_id: str
    status: str
    started_at: float
    ended_at: float | None
    roots: tuple[TraceSpan, ...]

    @property
    def spans(self) -> list[TraceSpan]:
        """Every span, depth first from the roots."""
        return [span for root in self.roots for span in root.walk()]

    def find(self, *, name: str | None = None, kind: str | None = None,
             path: str | None = None) -> list[TraceSpan]:
        """The spans matching every criterion given, depth first."""
        return [s for s in self.spans if (name is None or s.name == name)
                and (kind is None or s.kind == kind) and (path is None or s.path == path)]

    @classmethod
    def from_record(cls, record: TraceRecord) -> Trace:
        """The typed form of a ``TraceRecord`` (what ``Storage.load_trace`` returns)."""
        return cls(record.run_id, record.workflow_id, record.status, record.started_at,
                   record.ended_at, _tree(record.spans))


def _tree(rows: Sequence[Mapping[str, Any]]) -> tuple[TraceSpan, ...]:
    ids = {str(row["span_id"]) for row in rows}
    under: dict[str | None, list[Mapping[str, Any]]] = {}
    for row in rows:
        parent = row.get("parent_id")
        under.setdefault(parent if parent in ids else None, []).append(row)

    def build(row: Mapping[str, Any]) -> TraceSpan:
        span_id = str(row["span_id"])
        children = sorted(under.get(span_id, ()), key=lambda r: float(r["start"]))
        return TraceSpan(
            span_id, row.get("parent_id"), str(row["name"]), cast(SpanKind, row["kind"]),
            row.get("path"), float(row["start"]), row.get("end"),
            cast(SpanStatus, row["status"]), row.get("input"), row.get("output"),
            row.get("error"), dict(row.get("attributes") or {}),
            tuple(build(child) for child in children))

    return tuple(build(row) for row in under.get(None, ()))


async def load_trace(run_id: str, *, storage: Storage | None = None) -> Trace | None:
    """The stored trace of a run, as typed spans, or ``None`` when none is stored.

    Example::

        out = await agent.generate("hi")
        trace = await load_trace(out.run_id)
        for span in trace.spans:
            print(span.kind, span.name, span.status, span.duration)

    Args:
        run_id: The run (``WorkflowResult.run_id``, ``FullOutput.run_id``).
        storage: Where to look; by default where runs go when none is named: the
            storage set with ``set_default_storage``, else ``PROCFLOW_DB`` or the
            project's ``.procflow/procflow.db``, else the in-process store of recent runs.

    Raises:
        SnapshotCorruptedError: The stored trace cannot be decoded.
    """
    from procflow.runtime.defaults import current_storage

    record = await (storage or current_storage()).load_trace(run_id)
    return None if record is None else Trace.from_record(record)
