"""Traces: the spans of one run (run, steps, containers, processors, model and tool calls).

Recording is cheap on purpose: a span is a slotted record holding references to its
input and output; nothing is serialised while the run goes. When the run ends, the
spans become JSON-ready dicts — inputs and outputs truncated, secrets redacted — and
are stored as one ``TraceRecord`` through ``Storage.save_trace``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_core import to_jsonable_python

__all__ = [
    "DEFAULT_TRUNCATE",
    "Entry",
    "Leaf",
    "Span",
    "SpanKind",
    "SpanRows",
    "SpanStatus",
    "TraceRecord",
    "Tracer",
    "as_span",
    "redact_secrets",
]

SpanKind = Literal["run", "step", "workflow", "parallel", "branch", "foreach", "loop", "sleep",
                   "processor", "model", "tool"]
SpanStatus = Literal["running", "success", "failed", "suspended", "skipped", "tripwire",
                     "canceled"]

_now = time.time

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

Entry = Span | Leaf
"""What a tracer's list holds."""


def as_span(entry: Entry) -> Span:
    """The ``Span`` of a tracer entry (a ``Leaf`` is expanded)."""
    if type(entry) is tuple:
        number, parent_id, name, kind, start, end, status, attributes = entry
        return Span(str(number), parent_id, name, kind, None, start, end, status,
                    attributes=attributes)
    return entry  # type: ignore[return-value]


class Tracer:
    """Collects the spans of one run (``Span`` objects, and ``Leaf`` tuples)."""

    __slots__ = ("_append", "_next", "spans")

    def __init__(self, spans: list[Entry] | None = None) -> None:
        self.spans: list[Entry] = spans if spans is not None else []
        self._append = self.spans.append
        self._next = len(self.spans)

    def leaf(self, name: str, kind: SpanKind, parent: Span | None, start: float,
             status: SpanStatus = "success", attributes: dict[str, Any] | None = None,
             end: float | None = None) -> None:
        """Record a span that has no children and has ended, as a light ``Leaf``.

        The fast path for hot callers (processor hook calls, stream totals): pass the
        arguments positionally; ``end`` defaults to now.
        """
        self._next = n = self._next + 1
        self._append((n, None if parent is None else parent.span_id, name, kind, start,
                      _now() if end is None else end, status, attributes))

    def open(self, name: str, kind: SpanKind, parent: Span | None, path: str | None,
             start: float, input: Any = None) -> Span:
        """Open a span under ``parent`` that started at ``start`` (close it with ``ok`` or
        ``end``).

        The fast path for hot callers (a traced step): every argument positional, the
        clock read by the caller (who usually needs it too).
        """
        self._next = n = self._next + 1
        span = Span(str(n), None if parent is None else parent.span_id, name, kind, path,
                    start, None, "running", input)
        self._append(span)
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


class SpanRows(Sequence[dict[str, Any]]):
    """Spans as JSON-ready dicts, converted on first access.

    A run hands its spans over as they are; the conversion (truncating inputs and
    outputs, redacting secrets) happens only when something reads them — a
    persistent backend encoding them, or the studio — so recording stays cheap.
    """

    __slots__ = ("_rows", "_secrets", "_spans", "_truncate")

    def __init__(self, spans: list[Entry], *, truncate: int = DEFAULT_TRUNCATE,
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
    def from_spans(cls, run_id: str, workflow_id: str, status: str, spans: list[Entry], *,
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


_SECRET_KEY = re.compile(r"key|token|secret|password|passwd|authorization|credential",
                         re.IGNORECASE)
_SECRET_VALUE = re.compile(
    r"(sk-[A-Za-z0-9_\-]{12,}|sk_(?:live|test)_[A-Za-z0-9]{10,}|AKIA[0-9A-Z]{16}|"
    r"gh[pousr]_[A-Za-z0-9]{20,}|xox[baprs]-[A-Za-z0-9\-]{10,}|AIza[0-9A-Za-z_\-]{30,}|"
    r"(?i:bearer)\s+[A-Za-z0-9._\-]{12,})")


def redact_secrets(value: Any, secrets: tuple[str, ...] = ()) -> Any:
    """A copy of JSON-ready ``value`` with secrets replaced by "***": string values of
    keys named like key/token/secret/password/authorization (numbers such as token
    counts stay), API-key-shaped strings anywhere, and the given literal ``secrets``."""
    if isinstance(value, Mapping):
        return {k: "***" if isinstance(v, str) and v and isinstance(k, str)
                and _SECRET_KEY.search(k) else redact_secrets(v, secrets)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_secrets(v, secrets) for v in value]
    if isinstance(value, str):
        text = _SECRET_VALUE.sub("***", value)
        for secret in secrets:
            if secret:
                text = text.replace(secret, "***")
        return text
    return value


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
