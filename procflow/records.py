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
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from pydantic_core import to_jsonable_python

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
    "ToolCallRecord",
    "ToolResultRecord",
    "TraceRecord",
    "Tripwire",
    "Usage",
    "as_span",
    "redact_secrets",
    "span_id",
]

RunStatus = Literal["pending", "running", "success", "failed", "suspended", "tripwire",
                    "canceled", "corrupted"]
"""A run's status. "pending" and "running" are never final; "corrupted" is only listed
(``Storage.list_runs``) for a run whose stored header cannot be decoded."""

StepStatus = Literal["success", "failed", "suspended", "skipped", "running"]
"""A step's status."""

TERMINAL_STATUSES: frozenset[str] = frozenset({"success", "failed", "tripwire", "canceled"})

_USAGE_FIELDS: Final = ("input_tokens", "output_tokens", "total_tokens", "reasoning_tokens",
                        "cached_input_tokens")


@dataclass(frozen=True, slots=True, repr=False)
class Usage:
    """Tokens spent by one or more model calls, and what they cost; ``a + b`` sums them.

    Counts are the provider's own: what it bills is what it reports.

    Attributes:
        input_tokens: Prompt tokens.
        output_tokens: Completion tokens.
        total_tokens: Both (``input_tokens + output_tokens`` when a provider gives no total).
        reasoning_tokens: Of the output, the tokens spent reasoning (when reported).
        cached_input_tokens: Of the input, the tokens read from the provider's cache
            (when reported).
        cost: What the calls cost in USD, from the model's price
            (``procflow.models.prices``); ``None`` when no call's price is known. A sum
            counts the calls whose price is known.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    reasoning_tokens: int = 0
    cached_input_tokens: int = 0
    cost: float | None = None

    def __repr__(self) -> str:
        cost = "" if self.cost is None else f", cost={self.cost!r}"
        return (f"Usage(input_tokens={self.input_tokens}, output_tokens={self.output_tokens}, "
                f"total_tokens={self.total_tokens}, reasoning_tokens={self.reasoning_tokens}, "
                f"cached_input_tokens={self.cached_input_tokens}{cost})")

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        cost = other.cost if self.cost is None else (
            self.cost if other.cost is None else self.cost + other.cost)
        return Usage(self.input_tokens + other.input_tokens,
                     self.output_tokens + other.output_tokens,
                     self.total_tokens + other.total_tokens,
                     self.reasoning_tokens + other.reasoning_tokens,
                     self.cached_input_tokens + other.cached_input_tokens, cost)

    def to_dict(self) -> dict[str, Any]:
        """The counts by name (the three main ones always, the others when non-zero),
        and ``cost`` when known."""
        out: dict[str, Any] = {"input_tokens": self.input_tokens,
                               "output_tokens": self.output_tokens,
                               "total_tokens": self.total_tokens}
        if self.reasoning_tokens:
            out["reasoning_tokens"] = self.reasoning_tokens
        if self.cached_input_tokens:
            out["cached_input_tokens"] = self.cached_input_tokens
        if self.cost is not None:
            out["cost"] = self.cost
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Usage:
        """Counts (and ``cost``) from a mapping (unknown keys ignored; a missing total
        is the sum).

        Raises:
            TypeError: ``data`` is not a mapping.
            ValueError: A count is not a non-negative whole number, or the cost is not a
                non-negative number.
        """
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise TypeError(f"Usage.from_dict() takes a mapping, got {type(data).__name__}")
        counts: dict[str, int] = {}
        for name in _USAGE_FIELDS:
            value = data.get(name)
            if value is None:
                continue
            if type(value) is int and value >= 0:  # the usual case
                counts[name] = value
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 \
                    or value != int(value):
                raise ValueError(f"usage {name} must be a non-negative whole number, got "
                                 f"{value!r}")
            counts[name] = int(value)
        if not counts.get("total_tokens"):
            counts["total_tokens"] = counts.get("input_tokens", 0) + counts.get(
                "output_tokens", 0)
        cost = data.get("cost")
        if cost is None:
            return cls(**counts)
        if isinstance(cost, bool) or not isinstance(cost, int | float) \
                or not math.isfinite(cost) or cost < 0:
            raise ValueError(f"usage cost must be a non-negative number, got {cost!r}")
        return cls(**counts, cost=float(cost))

    @classmethod
    def of(cls, value: Usage | Mapping[str, Any] | None) -> Usage:
        """``value`` as a ``Usage`` (a ``Usage`` as is, a mapping through ``from_dict``)."""
        return value if isinstance(value, Usage) else cls.from_dict(value)


@dataclass(frozen=True, slots=True)
class Tripwire:
    """Why a request was aborted (``FullOutput.tripwire``), as a value.

    Attributes:
        reason: Why it aborted.
        processor_id: The processor (or step) that aborted, when known.
        retry: Whether a retry with the reason added for the model was asked for.
        metadata: Structured details.
    """

    reason: str
    processor_id: str | None = None
    retry: bool = False
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """``{"reason", "processor_id", "retry", "metadata"}`` (as traces and chunks carry it)."""
        return {"reason": self.reason, "processor_id": self.processor_id,
                "retry": self.retry, "metadata": dict(self.metadata)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Tripwire:
        """The inverse of ``to_dict()`` (a missing reason reads "blocked")."""
        return cls(str(data.get("reason", "blocked")), data.get("processor_id"),
                   bool(data.get("retry")), dict(data.get("metadata") or {}))


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """A tool call the model made (``FullOutput.tool_calls``).

    Attributes:
        tool_call_id: The call's id.
        tool_name: The tool.
        args: The model's arguments.
    """

    tool_call_id: str
    tool_name: str
    args: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCallRecord:
        """From ``{"tool_call_id", "tool_name", "args"}``."""
        return cls(str(data["tool_call_id"]), str(data["tool_name"]),
                   dict(data.get("args") or {}))


@dataclass(frozen=True, slots=True)
class ToolResultRecord:
    """What a tool call returned (``FullOutput.tool_results``).

    Attributes:
        tool_call_id: The call's id.
        tool_name: The tool.
        result: Its result (the error's text when it failed).
        is_error: Whether the tool failed.
    """

    tool_call_id: str
    tool_name: str
    result: Any = None
    is_error: bool = False

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolResultRecord:
        """From ``{"tool_call_id", "tool_name", "result", "is_error"}``."""
        return cls(str(data["tool_call_id"]), str(data["tool_name"]), data.get("result"),
                   bool(data.get("is_error")))


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
        lost: Attempts begun in a process that stopped before they ended (a worker lost
            mid-step): the trace notes "attempt N after worker loss".
        encoded: The stored form a persistent backend's codec made of it (a cache, set
            when the step ends so the value is checked and encoded once).
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
    lost: int = 0
    encoded: Any = field(default=None, init=False, repr=False, compare=False)


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
        encoded: The stored form the runtime made of it, with the blobs still to write
            (a cache: see ``procflow.storage.codec.dump_run``).
    """

    workflow_id: str
    run_id: str
    status: RunStatus
    input: Any = None
    state: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    error: BaseException | None = None
    suspended: list[list[str]] = field(default_factory=list)
    tripwire: Tripwire | None = None
    request_context: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0
    updated_at: float = 0.0
    encoded: Any = field(default=None, init=False, repr=False, compare=False)


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

_MASK_MARGIN = 512  # characters masked past a truncated preview's end


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
        """Add attributes to the span (the dict is made on first use: most spans have none).

        The span's dict is replaced, never updated in place: hot callers may give spans
        one shared attribute dict (stream processors with the same chunk count), and a
        stored trace keeps them for a hundred runs, so sharing saves memory.
        """
        if self.attributes is None:
            self.attributes = attributes
        else:
            self.attributes = {**self.attributes, **attributes}


_SPAN_IDS: Final = tuple(str(number) for number in range(1024))


def span_id(number: int) -> str:
    """The id of the span at 1-based position ``number`` of its trace.

    The ids of the first thousand positions are made once and shared by every trace: a
    stored run holds tens of spans, and the fallback store keeps a hundred runs.
    """
    return _SPAN_IDS[number] if number < 1024 else str(number)


Leaf = tuple[int, str | None, str, SpanKind, float, float, SpanStatus, dict[str, Any] | None]
"""A finished span with nothing under it, kept light: (number, parent_id, name, kind,
start, end, status, attributes). Processor hook calls and stream-processor totals are
recorded so (most spans of an agent run); ``as_span`` makes one a ``Span`` when the
trace is read."""

SpanEntry = Span | Leaf
"""What a tracer's list holds."""


def as_span(entry: SpanEntry) -> Span:
    """The ``Span`` of a tracer entry (a ``Leaf`` is expanded, with its own copy of the
    attributes: leaves may share one dict)."""
    if type(entry) is tuple:
        number, parent_id, name, kind, start, end, status, attributes = entry
        return Span(span_id(number), parent_id, name, kind, None, start, end, status,
                    attributes=None if attributes is None else dict(attributes))
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
            # A value met again (a step's output is the next step's input) is converted
            # once: by identity, while the spans hold it.
            seen: dict[int, tuple[Any, Any]] = {}
            self._rows = [_row(as_span(s), self._truncate, self._secrets, seen)
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
        settle_parked(spans)
        if ended is None:
            ended = max((s.end for s in map(as_span, spans)
                         if s.kind == "run" and s.end is not None), default=None)
        return cls(run_id, workflow_id, status, started, ended,
                   SpanRows(spans, truncate=truncate, secrets=secrets))


def settle_parked(spans: list[SpanEntry]) -> None:
    """Give the spans of an execution that parked the outcome of the work they handed on.

    A step that sends distributed jobs parks the run: its span (``parked`` attribute)
    and its execution's run span stay "running" while workers run the jobs, and a later
    execution of the run joins them under a span of the same path. Once that span ends,
    the parked one takes its status (it finished, or failed, as the joined work did),
    and so does the parked execution's run span, from the run span that followed it.
    """
    parked = [s for s in spans if type(s) is Span and s.status == "running"
              and s.attributes is not None and s.attributes.get("parked")]
    if not parked:
        return
    whole = [s for s in spans if type(s) is Span]
    by_id = {s.span_id: s for s in whole}
    roots = [s for s in whole if s.parent_id is None and s.kind == "run"]
    for span in parked:
        later = [s for s in whole if s.path == span.path and s.kind == span.kind
                 and s.start >= span.start and s is not span and s.status != "running"]
        if later:
            span.status, span.error = later[0].status, later[0].error
        root = span
        while root.parent_id is not None and root.parent_id in by_id:
            root = by_id[root.parent_id]
        if root.status == "running" and root in roots:
            after = [r for r in roots[roots.index(root) + 1:] if r.status != "running"]
            if after:
                root.status = after[0].status
                root.set(parked=True)


def redact_secrets(value: Any, secrets: tuple[str, ...] = ()) -> Any:
    """A copy of JSON-ready ``value`` with secrets replaced by "***".

    The rules are ``PIIDetector``'s "api-key" rules (``procflow._secrets``): every string
    under a key named like a credential (``password``, ``auth``, ``cookie``, ``api_keys``,
    ...; numbers such as token counts stay), every secret-shaped part of any other string
    or mapping key, and the given literal ``secrets``.
    """
    from procflow._secrets import mask_secrets  # its ~25 patterns compile on first use

    return mask_secrets(value, secrets)


def _converted(value: Any, truncate: int, secrets: tuple[str, ...],
               seen: dict[int, tuple[Any, Any]]) -> Any:
    """``_jsonable(value)``, made once per value object of a trace (``seen``)."""
    if value is None:
        return None
    known = seen.get(id(value))
    if known is not None and known[0] is value:
        return known[1]
    data = _jsonable(value, truncate, secrets)
    seen[id(value)] = (value, data)
    return data


def _jsonable(value: Any, truncate: int, secrets: tuple[str, ...]) -> Any:
    # (looked up on the class: a pydantic model's instance __getattr__ is slow to fail)
    if value is None or getattr(type(value), "__procflow_untraced__", False):
        return None  # e.g. the agent loop's state object: mutable, internal, not data
    try:
        data = to_jsonable_python(value, fallback=repr, serialize_unknown=True)
    except Exception:  # anything unencodable is shown as its repr
        data = repr(value)
    budget = [truncate + _MASK_MARGIN]
    clipped = _clip(data, budget)
    if budget[0] > 0:  # small: serialised whole
        data = redact_secrets(data, secrets)
        text = json.dumps(data, default=repr, ensure_ascii=False)
        if len(text) <= truncate:
            return data
        return {"truncated": True, "chars": len(text), "preview": text[:truncate]}
    # Only the preview is kept, so only what it can show is serialised and masked (with
    # a margin, for a secret cut at its end): megabytes never stored would cost seconds.
    preview = json.dumps(redact_secrets(clipped, secrets), default=repr, ensure_ascii=False)
    return {"truncated": True, "chars": _chars(data), "preview": preview[:truncate]}


def _chars(data: Any) -> int:
    """About how many characters ``data`` takes as JSON (string escapes not counted)."""
    if isinstance(data, str):
        return len(data) + 2
    if isinstance(data, dict):
        return 2 + sum(len(str(k)) + 4 + _chars(v) for k, v in data.items())
    if isinstance(data, list):
        return 2 + sum(_chars(item) + 2 for item in data)
    return len(str(data))


def _clip(data: Any, budget: list[int]) -> Any:
    """JSON-ready ``data`` cut to about ``budget[0]`` characters of text (the budget is
    spent as the walk goes; what comes after it is dropped)."""
    if isinstance(data, str):
        kept = data[:max(budget[0], 0)]
        budget[0] -= len(kept) + 4
        return kept
    if isinstance(data, dict):
        out: dict[Any, Any] = {}
        for key, item in data.items():
            if budget[0] <= 0:
                break
            budget[0] -= len(str(key)) + 4
            out[key] = _clip(item, budget)
        return out
    if isinstance(data, list):
        items: list[Any] = []
        for item in data:
            if budget[0] <= 0:
                break
            items.append(_clip(item, budget))
        return items
    budget[0] -= 8
    return data


def _row(span: Span, truncate: int, secrets: tuple[str, ...],
         seen: dict[int, tuple[Any, Any]]) -> dict[str, Any]:
    attributes = span.attributes
    return {
        "span_id": span.span_id, "parent_id": span.parent_id, "name": span.name,
        "kind": span.kind, "path": span.path, "start": span.start, "end": span.end,
        "status": span.status, "input": _converted(span.input, truncate, secrets, seen),
        "output": _converted(span.output, truncate, secrets, seen),
        "error": redact_secrets(span.error, secrets) if span.error else None,
        "attributes": redact_secrets(to_jsonable_python(attributes, fallback=repr), secrets)
        if attributes else {},
    }
