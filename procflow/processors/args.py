"""What processor hooks receive (one args type per hook) and what they may return."""

from __future__ import annotations

import html
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from procflow.context import RequestContext
from procflow.errors import ProcessorError, TripwireError
from procflow.messages import Chunk, DataChunk, Message, MessageList
from procflow.runtime.tracing import current_step_span
from procflow.storage.values import register_type

if TYPE_CHECKING:
    from procflow.processors.base import Processor
    from procflow.runtime.tracing import Span, Tracer

__all__ = [
    "APIErrorResult",
    "OutputResult",
    "ProcessAPIErrorArgs",
    "ProcessInputArgs",
    "ProcessInputResult",
    "ProcessInputStepArgs",
    "ProcessInputStepResult",
    "ProcessLLMRequestArgs",
    "ProcessLLMRequestResult",
    "ProcessLLMResponseArgs",
    "ProcessOutputResultArgs",
    "ProcessOutputStepArgs",
    "ProcessOutputStreamArgs",
    "ProcessToolResultArgs",
    "ProcessToolResultResult",
    "ProcessorArgs",
    "ProcessorContext",
    "ProcessorViolation",
    "ProcessorWriter",
    "Signal",
]

Emit = Callable[[Chunk], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ProcessorViolation:
    """A policy violation a processor detected (an abort, or a warning).

    Attributes:
        processor_id: Who detected it.
        message: A readable description.
        detail: Processor-specific data (PII types found, categories, scores...).
    """

    processor_id: str
    message: str
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The violation as JSON-ready data (``detail`` as it is)."""
        return {"processor_id": self.processor_id, "message": self.message,
                "detail": self.detail}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProcessorViolation:
        """The violation ``to_json`` gave ``data`` for.

        Raises:
            ValueError: ``data`` lacks a str ``processor_id`` or ``message``, or its
                ``detail`` is not a mapping.
        """
        pid, message, detail = data.get("processor_id"), data.get("message"), \
            data.get("detail") or {}
        if not isinstance(pid, str) or not isinstance(message, str) \
                or not isinstance(detail, Mapping):
            raise ValueError(f"a stored ProcessorViolation needs a str processor_id and "
                             f"message and a mapping detail, got {dict(data)!r:.120}")
        return cls(pid, message, dict(detail))


# a processor workflow run on a durable storage keeps each step's envelope, the
# violations found so far with it
register_type(ProcessorViolation, ProcessorViolation.to_json, ProcessorViolation.from_json,
              name="procflow.ProcessorViolation")


@dataclass(frozen=True, slots=True)
class Signal:
    """A reminder for the model, delivered as a ``<system-reminder ...>`` user message
    before the next model call.

    Attributes:
        type: "reactive".
        contents: The reminder's text.
        attributes: Rendered as XML attributes of the tag.
        transient: Only for the current call: never stored in memory, and re-sending it
            replaces the previous copy instead of stacking another.
        tag_name: The XML tag (default "system-reminder").
        id: The message id to use (default: fresh, or a stable slot for transient ones).
    """

    type: Literal["reactive"] = "reactive"
    contents: str = ""
    attributes: Mapping[str, Any] = field(default_factory=dict)
    transient: bool = False
    tag_name: str = "system-reminder"
    id: str | None = None

    def render(self) -> str:
        """The text the model sees, e.g. ``<system-reminder reason="x">...</system-reminder>``."""
        attrs = "".join(f' {k}="{html.escape(str(v), quote=True)}"'
                        for k, v in self.attributes.items())
        return f"<{self.tag_name}{attrs}>{self.contents}</{self.tag_name}>"

    def to_message(self, processor_id: str) -> Message:
        """The user message carrying this signal (marked hidden from UI and recall)."""
        message_id = self.id or (f"transient:{processor_id}:{self.tag_name}" if self.transient
                                 else None)
        msg = (Message.user(self.render(), id=message_id) if message_id
               else Message.user(self.render()))
        msg.content.metadata["signal"] = {
            "type": self.type, "processor_id": processor_id, "transient": self.transient,
            "tag_name": self.tag_name, "attributes": dict(self.attributes), "hidden": True,
        }
        return msg


class ProcessorWriter:
    """Sends custom "data-*" chunks to the caller's stream, from any phase."""

    __slots__ = ("_emit",)

    def __init__(self, emit: Emit | None = None) -> None:
        self._emit = emit

    async def custom(self, chunk: Chunk | Mapping[str, Any] | str, data: Any = None) -> None:
        """Emit a custom chunk.

        Args:
            chunk: A ``Chunk``, a ``{"type": "data-...", "data": ...}`` mapping, or the
                type as a string (with ``data`` beside it).
            data: The data, when ``chunk`` is a type string.

        Raises:
            ProcessorError: The type does not start with "data-".
        """
        if isinstance(chunk, str):
            made = _data_chunk(chunk, data)
        elif isinstance(chunk, Mapping):
            made = _data_chunk(str(chunk.get("type", "")), chunk.get("data"))
        elif isinstance(chunk, Chunk):
            made = chunk if isinstance(chunk, DataChunk) else _data_chunk(chunk.type, None)
        else:
            raise ProcessorError(f"writer.custom() takes a Chunk, a mapping or a type string, "
                                 f"got {type(chunk).__name__}")
        if self._emit is not None:
            await self._emit(made)


def _data_chunk(type_: str, data: Any) -> Chunk:
    if not type_.startswith("data-") or len(type_) <= 5:
        raise ProcessorError(f"custom chunk types must start with 'data-' (e.g. "
                             f"'data-status'), got {type_!r}")
    return DataChunk(type_[5:], data)


class ProcessorContext:
    """Per-request processor bookkeeping shared by every phase of one call.

    Attributes:
        request_context: The request's context.
        writer: Where custom chunks go.
        states: Processor id -> that processor's state dict (fresh per request).
        retry_count: Processor-requested retries so far in this request.
        violations: Every violation reported so far.
        tracer: The trace processor spans are recorded in, if any.
        span: The parent of the next processor spans: the span of the step the calling
            task runs (``current_step_span``, per task, so parallel branches never see
            each other's), else the span last set here.
        writers: ``id(processor)`` -> that processor's own writer, where its custom
            chunks go elsewhere than ``writer`` (an agent's output processors: through
            the stream processors after them).
        on_accepted: Callbacks the agent awaits once the request ended with neither a
            tripwire nor an error (after the output-result processors): what must not
            outlive a rejected answer waits for it (``ResponseCache``'s writes).
    """

    __slots__ = ("_span", "on_accepted", "request_context", "retry_count", "states", "tracer",
                 "violations", "writer", "writers")

    def __init__(self, *, request_context: RequestContext | None = None,
                 writer: ProcessorWriter | None = None) -> None:
        self.request_context = request_context if request_context is not None \
            else RequestContext()
        self.writer = writer if writer is not None else ProcessorWriter()
        self.states: dict[str, dict[str, Any]] = {}
        self.retry_count = 0
        self.violations: list[ProcessorViolation] = []
        self.tracer: Tracer | None = None
        self._span: Span | None = None
        self.on_accepted: list[Callable[[], Awaitable[None]]] = []
        self.writers: dict[int, ProcessorWriter] = {}

    @property
    def span(self) -> Span | None:
        """Where the next processor span goes (see the class docstring)."""
        here = current_step_span.get()
        if here is not None and here.tracer is self.tracer:
            return here.span
        return self._span

    @span.setter
    def span(self, span: Span | None) -> None:
        self._span = span

    def writer_for(self, processor: object) -> ProcessorWriter:
        """The writer ``processor``'s hooks get (``writers``, else ``writer``)."""
        writers = self.writers
        return writers.get(id(processor), self.writer) if writers else self.writer

    def state_for(self, processor_id: str) -> dict[str, Any]:
        """The state dict of one processor for this request."""
        state = self.states.get(processor_id)
        if state is None:
            state = self.states[processor_id] = {}
        return state


@dataclass(slots=True)
class ProcessorArgs:
    """What every hook receives.

    Attributes:
        message_list: The live message list (``None`` in stream hooks without one).
        state: This processor's state for the request (shared by all its hooks).
        retry_count: Processor-requested retries so far in this request.
        request_context: The request's context.
        writer: ``await args.writer.custom({"type": "data-...", "data": ...})``.
    """

    message_list: MessageList | None
    state: dict[str, Any]
    retry_count: int
    request_context: RequestContext
    writer: ProcessorWriter
    processor: Processor
    context: ProcessorContext

    def abort(self, reason: str = "", retry: bool = False,
              metadata: Mapping[str, Any] | None = None) -> NoReturn:
        """Stop the request (a tripwire), or with ``retry=True`` ask for the step to be
        re-run with ``reason`` given to the model as feedback.

        Raises:
            TripwireError: Always.
        """
        pid = self.processor.id
        raise TripwireError(reason or f"blocked by processor '{pid}'", retry=retry,
                       metadata=metadata, processor_id=pid)

    async def send_signal(self, signal: Signal | Mapping[str, Any]) -> None:
        """Add a ``<system-reminder>`` user message for the next model call."""
        if isinstance(signal, Mapping):
            signal = Signal(**signal)
        if self.message_list is None:
            raise ProcessorError("send_signal() needs a message list; this phase has none",
                                 processor_id=self.processor.id)
        msg = signal.to_message(self.processor.id)
        if signal.transient:
            self.message_list.remove_by_ids([msg.id])
        self.message_list.add(msg, source="input")

    def warn(self, message: str, detail: Mapping[str, Any] | None = None) -> None:
        """Report a violation without stopping (the "warn" strategy)."""
        self.processor.report_violation(
            ProcessorViolation(self.processor.id, message, dict(detail or {})), self.context)


@dataclass(slots=True)
class ProcessInputArgs(ProcessorArgs):
    """``process_input``: once, before the loop. ``messages`` are the input messages."""

    messages: list[Message]
    system_messages: list[Message]


@dataclass(slots=True)
class ProcessInputStepArgs(ProcessorArgs):
    """``process_input_step``: before every model call."""

    messages: list[Message]
    system_messages: list[Message]
    step_number: int
    steps: list[Any]
    model: Any
    tools: Any
    tool_choice: Any


@dataclass(slots=True)
class ProcessLLMRequestArgs(ProcessorArgs):
    """``process_llm_request``: the provider-facing prompt, just before the call."""

    prompt: list[dict[str, Any]]
    model: Any
    step_number: int
    steps: list[Any]


@dataclass(slots=True)
class ProcessLLMResponseArgs(ProcessorArgs):
    """``process_llm_response``: the step's chunks, after the call (or a cache replay)."""

    chunks: list[Chunk]
    model: Any
    step_number: int
    steps: list[Any]
    from_cache: bool


@dataclass(slots=True)
class ProcessOutputStreamArgs(ProcessorArgs):
    """``process_output_stream``: one streamed chunk (``part``), and those seen so far.

    For a processor with ``stream_window = True`` a text delta's text is a window
    segment (see ``Processor.hold_back``): ``text_before`` is the raw text streamed
    just before it (up to ``WINDOW_CONTEXT`` characters) and ``text_after`` the raw
    text held back after it, so a detector can look at ``text_before + text +
    text_after`` and change only ``text``.
    """

    part: Chunk
    stream_parts: list[Chunk]
    text_before: str = ""
    text_after: str = ""


@dataclass(slots=True)
class ProcessOutputStepArgs(ProcessorArgs):
    """``process_output_step``: after each model step, before tools run."""

    messages: list[Message]
    system_messages: list[Message]
    step_number: int
    steps: list[Any]
    finish_reason: str | None
    tool_calls: list[dict[str, Any]]
    text: str
    usage: dict[str, Any] | None


@dataclass(slots=True)
class OutputResult:
    """The whole generation, as ``process_output_result`` sees it."""

    text: str = ""
    usage: dict[str, Any] | None = None
    finish_reason: str | None = None
    steps: list[Any] = field(default_factory=list)


@dataclass(slots=True)
class ProcessOutputResultArgs(ProcessorArgs):
    """``process_output_result``: once, at the end. ``messages`` are the response messages."""

    messages: list[Message]
    result: OutputResult


@dataclass(slots=True)
class ProcessToolResultArgs(ProcessorArgs):
    """``process_tool_result``: after a tool succeeded, before its result is added."""

    tool_name: str
    tool_call_id: str
    args: dict[str, Any]
    result: Any
    step_number: int
    steps: list[Any]


@dataclass(slots=True)
class ProcessAPIErrorArgs(ProcessorArgs):
    """``process_api_error``: the provider rejected the call."""

    error: BaseException
    messages: list[Message]
    step_number: int
    steps: list[Any]


@dataclass(slots=True)
class ProcessInputResult:
    """Return from ``process_input`` to replace input and/or system messages."""

    messages: list[Message] | None = None
    system_messages: list[Message] | None = None


@dataclass(slots=True)
class ProcessInputStepResult:
    """Return from ``process_input_step`` to override this step (``None``: unchanged)."""

    model: Any = None
    tools: Any = None
    tool_choice: Any = None
    system_messages: list[Message] | None = None
    messages: list[Message] | None = None


@dataclass(slots=True)
class ProcessLLMRequestResult:
    """Return from ``process_llm_request``: a rewritten prompt for this call only, and/or
    a ``response`` of chunks that answers without calling the model (a cache hit)."""

    prompt: list[dict[str, Any]] | None = None
    response: list[Chunk] | None = None


@dataclass(slots=True)
class ProcessToolResultResult:
    """Return from ``process_tool_result`` to replace the tool's result."""

    result: Any


@dataclass(slots=True)
class APIErrorResult:
    """Return from ``process_api_error``; ``retry=True`` retries the call."""

    retry: bool = False
