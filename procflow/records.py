"""The records a run produces and storage keeps: step results, run snapshots, spans, traces.

They sit at the bottom of the package so that ``storage`` and ``runtime`` both import
them and neither imports the other. ``StepResult``, ``RunSnapshot`` and ``Span`` are
built for every step, so they are slotted but not frozen (a frozen dataclass's
``__init__`` costs ~5x more); treat them as read-only once made. Persistent backends
turn them into JSON with ``procflow.storage.codec``.

Trace recording is cheap on purpose: a span is a slotted record holding references to
its input and output; nothing is serialised while the run goes. When the run ends, the
spans become JSON-ready dicts — inputs and outputs truncated, secrets redacted — and
are stored as one ``TraceRecord`` through ``Storage.save_trace``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic_core import to_jsonable_python

from procflow._secrets import mask_secrets

__all__ = [
    "DEFAULT_TRUNCATE",
    "TERMINAL_STATUSES",
    "Leaf",
    "Lease",
    "RunSnapshot",
    "RunStatus",
    "Span",
    "SpanEntry",
    "SpanKind",
    "SpanRows",
    "SpanStatus",
    "StepResult",
    "StepStatus",
    "TraceRecord",
    "as_span",
    "redact_secrets",
]

RunStatus = Literal["pending", "running", "success", "failed", "suspended", "tripwire",
                    "canceled"]
"""A run's status. "pending" and "running" are never final."""

StepStatus = Literal["success", "failed", "suspended", "skipped", "running"]
"""A step's status."""

TERMINAL_STATUSES: frozenset[str] = frozenset({"success", "failed", "tripwire", "canceled"})


@dataclass(slots=True)
class StepResult:
    """What one step of a run produced.

    Attributes:
        status: How the step ended (or "running" while it runs).
        output: Its output; a pydantic instance when the step has an output schema.
        error: The exception of a failed step.
        started_at: Wall-clock start, seconds since the epoch.
        ended_at: Wall-clock end, or ``None`` while running.
        attempts: How many attempts were made (1 without retries).
        suspend_payload: What the step passed to ``ctx.suspend()``.
        resume_data: The data the step was last resumed with.
        iterations: Loop iterations completed (for a ``dowhile``/``dountil`` body).
        partial: For a suspended ``foreach``: outputs of the items that finished, by index.
    """

    status: StepStatus
    output: Any = None
    error: BaseException | None = None
    started_at: float = 0.0
    ended_at: float | None = None
    attempts: int = 1
    suspend_payload: Any = None
    resume_data: Any = None
    iterations: int = 0
    partial: dict[int, Any] | None = None


@dataclass(slots=True)
class RunSnapshot:
    """A run's header as stored; the step results are stored beside it, one row each.

    Attributes:
        workflow_id: The workflow the run belongs to.
        run_id: The run.
        status: The run's status when the snapshot was taken.
        input: The run's (validated) input.
        state: The shared state.
        result: The final output, once successful.
        error: The failure, once failed.
        suspended: Paths of suspended steps.
        tripwire: Abort details, for status "tripwire".
        request_context: The JSON-serialisable entries of the request context.
        created_at: When the run was created (seconds since the epoch).
        updated_at: When this snapshot was taken.
    """

    workflow_id: str
    run_id: str
    status: RunStatus
    input: Any = None
    state: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    error: BaseException | None = None
    suspended: list[list[str]] = field(default_factory=list)
    tripwire: dict[str, Any] | None = None
    request_context: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0
    updated_at: float = 0.0


@dataclass(frozen=True, slots=True)
class Lease:
    """Who executes a run, until when (``Storage.acquire_lease``).

    A run being executed holds a lease that its executor renews (a heartbeat) while it
    runs. A "running" run without a live lease is *stalled*: the process that ran it
    stopped, and anyone may ``restart()`` it.

    Attributes:
        owner: The holder's id (host, process and a random part).
        expires_at: Wall-clock expiry, seconds since the epoch.
    """

    owner: str
    expires_at: float


SpanKind = Literal["run", "step", "workflow", "parallel", "branch", "foreach", "loop", "sleep",
                   "processor", "model", "tool"]
SpanStatus = Literal["running", "success", "failed", "suspended", "skipped", "tripwire",
                     "canceled"]

DEFAULT_TRUNCATE = 2000
"""Characters kept of each span's serialised input and output."""


@dataclass(slots=True)
class Span:
    """One timed unit of a run.

    Attributes:
        span_id: Unique within the trace.
        parent_id: The enclosing span (``None`` for the run span).
        name: What it is, e.g. "double", "input processor: pii-detector",
            "model call: openai/gpt-4o".
        kind: The span's kind.
        path: The step path, for step-like spans.
        start: Seconds since the epoch.
        end: When it ended (``None`` while open).
        status: How it ended.
        input: The input (truncated when stored).
        output: The output (truncated when stored).
        error: The error message, when it failed.
        attributes: Retries, tripwire, usage, chunk counts, latency... (``None``: none)
    """

    span_id: str
    parent_id: str | None
    name: str
    kind: SpanKind
    path: str | None = None
    start: float = 0.0
    end: float | None = None
    status: SpanStatus = "running"
    input: Any = None
    output: Any = None
    error: str | None = None
    attributes: dict[str, Any] | None = None

    def set(self, **attributes: Any) -> None:
        """Add attributes to the span (the dict is made on first use: most spans have none)."""
        if self.attributes is None:
            self.attributes = attributes
        else:
            self.attributes.update(attributes)


Leaf = tuple[int, str | None, str, SpanKind, float, float, SpanStatus, dict[str, Any] | None]
"""A finished span with nothing under it, kept light: (number, parent_id, name, kind,
start, end, status, attributes). Processor hook calls and stream-processor totals are
recorded so (most spans of an agent run); ``as_span`` makes one a ``Span`` when the
trace is read."""

SpanEntry = Span | Leaf
"""What a tracer's list holds."""


def as_span(entry: SpanEntry) -> Span:
    """The ``Span`` of a tracer entry (a ``Leaf`` is expanded)."""
    if type(entry) is tuple:
        number, parent_id, name, kind, start, end, status, attributes = entry
        return Span(str(number), parent_id, name, kind, None, start, end, status,
                    attributes=attributes)
    return entry  # type: ignore[return-value]


class SpanRows(Sequence[dict[str, Any]]):
    """Spans as JSON-ready dicts, converted on first access.

    A run hands its spans over as they are; the conversion (truncating inputs and
    outputs, redacting secrets) happens only when something reads them — a
    persistent backend encoding them, or the studio — so recording stays cheap.
    """

    __slots__ = ("_rows", "_secrets", "_spans", "_truncate")

    def __init__(self, spans: list[SpanEntry], *, truncate: int = DEFAULT_TRUNCATE,
                 secrets: tuple[str, ...] = ()) -> None:
        self._spans = spans
        self._truncate = truncate
        self._secrets = secrets
        self._rows: list[dict[str, Any]] | None = None

    def _all(self) -> list[dict[str, Any]]:
        if self._rows is None:
            self._rows = [_row(as_span(s), self._truncate, self._secrets)
                          for s in self._spans]
        return self._rows

    def __getitem__(self, index: Any) -> Any:
        return self._all()[index]

    def __len__(self) -> int:
        return len(self._spans)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        return list(self) == list(other) if isinstance(other, Sequence) else NotImplemented

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """A stored trace.

    Attributes:
        run_id: The run (the trace's id).
        workflow_id: Its workflow.
        status: The run's final status.
        started_at: When the run started.
        ended_at: When it ended.
        spans: JSON-ready span dicts (see ``Span``), inputs/outputs truncated and
            secrets redacted.
    """

    run_id: str
    workflow_id: str
    status: str
    started_at: float
    ended_at: float | None
    spans: Sequence[dict[str, Any]]

    @classmethod
    def from_spans(cls, run_id: str, workflow_id: str, status: str, spans: list[SpanEntry], *,
                   truncate: int = DEFAULT_TRUNCATE, secrets: tuple[str, ...] = (),
                   ended: float | None = None) -> TraceRecord:
        """A record of ``spans`` (serialised lazily, truncating and redacting).

        ``ended`` defaults to the latest end of a run span (a caller that just closed
        the run span passes its end and spares the scan).
        """
        started = as_span(spans[0]).start if spans else time.time()
        if ended is None:
            ended = max((s.end for s in map(as_span, spans)
                         if s.kind == "run" and s.end is not None), default=None)
        return cls(run_id, workflow_id, status, started, ended,
                   SpanRows(spans, truncate=truncate, secrets=secrets))


def redact_secrets(value: Any, secrets: tuple[str, ...] = ()) -> Any:
    """A copy of JSON-ready ``value`` with secrets replaced by "***".

    The rules are ``PIIDetector``'s "api-key" rules (``procflow._secrets``): every string
    under a key named like a credential (``password``, ``auth``, ``cookie``, ``api_keys``,
    ...; numbers such as token counts stay), every secret-shaped part of any other string
    or mapping key, and the given literal ``secrets``.
    """
    return mask_secrets(value, secrets)


def _jsonable(value: Any, truncate: int, secrets: tuple[str, ...]) -> Any:
    if value is None or getattr(value, "__procflow_untraced__", False):
        return None  # e.g. the agent loop's state object: mutable, internal, not data
    try:
        data = to_jsonable_python(value, fallback=repr, serialize_unknown=True)
    except Exception:  # anything unencodable is shown as its repr
        data = repr(value)
    data = redact_secrets(data, secrets)
    text = json.dumps(data, default=repr, ensure_ascii=False)
    if len(text) <= truncate:
        return data
    return {"truncated": True, "chars": len(text), "preview": text[:truncate]}


def _row(span: Span, truncate: int, secrets: tuple[str, ...]) -> dict[str, Any]:
    return {
        "span_id": span.span_id, "parent_id": span.parent_id, "name": span.name,
        "kind": span.kind, "path": span.path, "start": span.start, "end": span.end,
        "status": span.status, "input": _jsonable(span.input, truncate, secrets),
        "output": _jsonable(span.output, truncate, secrets),
        "error": redact_secrets(span.error, secrets) if span.error else None,
        "attributes": redact_secrets(to_jsonable_python(span.attributes or {}, fallback=repr),
                                     secrets),
    }
