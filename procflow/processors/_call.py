"""What calling a processor hook needs besides the call (``ProcessorRunner.run``): span
names, and errors named.

A ``TripwireError`` gets the processor's id and fires ``on_violation`` before it
propagates; any other exception from a hook is a bug in the processor and becomes a
``ProcessorError`` naming the processor and the hook (the original is the cause).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from procflow.errors import ProcessorError, ProcflowError, TripwireError
from procflow.messages import Message
from procflow.processors.args import ProcessorContext, ProcessorViolation
from procflow.runtime.tracing import Span, Tracer

if TYPE_CHECKING:
    from procflow.processors._hooks import Hook
    from procflow.processors.base import Processor

__all__ = ["NO_VIEW", "SPAN_NAMES", "hook_error", "span_name", "stream_bad_return",
           "stream_hook_failed"]

_now = time.time


NO_VIEW: list[Message] = []
"""The view of a hook that sees no messages."""


def hook_error(exc: BaseException, hook: Hook, p: Processor, ctx: ProcessorContext,
               started: float) -> BaseException:
    """What a hook call that raised ``exc`` raises, its failed span recorded: a
    ``TripwireError`` tagged with ``p.id`` (``on_violation`` has run), a procflow error or a
    cancellation as it is, anything else as a ``ProcessorError`` caused by it."""
    span = _failed_span(ctx.tracer, ctx.span, p.id, hook, started)
    if isinstance(exc, TripwireError):
        if exc.processor_id is None:
            exc.processor_id = p.id
        p.report_violation(ProcessorViolation(p.id, exc.reason, dict(exc.metadata)), ctx)
        if span is not None:
            Tracer.end(span, "tripwire", error=exc.reason, tripwire=exc.to_dict())
        return exc
    if span is not None:
        Tracer.end(span, "failed" if isinstance(exc, Exception) else "canceled", error=exc)
    if isinstance(exc, Exception) and not isinstance(exc, ProcflowError):
        err = ProcessorError(f"processor '{p.id}': {hook.name}() raised {type(exc).__name__}: "
                             f"{exc}", processor_id=p.id, hook=hook.name)
        err.__cause__ = exc
        return err
    return exc


def _failed_span(tracer: Tracer | None, parent: Span | None, processor_id: str, hook: Hook,
                 started: float) -> Span | None:
    """A full span for a hook call that did not return (it carries the error)."""
    if tracer is None:
        return None
    return tracer.open(span_name(processor_id, hook), "processor", parent, None, started)


SPAN_NAMES: dict[tuple[str, str], str] = {}
"""(processor id, hook) -> span name: ``span_name``'s cache, read inline on hot paths."""


def span_name(processor_id: str, hook: Hook) -> str:
    """The span name of a hook call, e.g. "input processor: pii" (cached)."""
    key = (processor_id, hook.name)
    name = SPAN_NAMES.get(key)
    if name is None:
        if len(SPAN_NAMES) >= 4096:  # ids made per request must not grow this forever
            SPAN_NAMES.clear()
        name = SPAN_NAMES[key] = f"{hook.label}: {processor_id}"
    return name


def stream_hook_failed(processor_id: str, exc: Exception) -> ProcessorError:
    """The error for a ``process_output_stream`` hook that raised (not a TripwireError)."""
    err = ProcessorError(f"processor '{processor_id}': process_output_stream() raised "
                         f"{type(exc).__name__}: {exc}", processor_id=processor_id,
                         hook="process_output_stream")
    err.__cause__ = exc
    return err


def stream_bad_return(processor_id: str, out: Any) -> ProcessorError:
    """The error for a ``process_output_stream`` hook that returned something unusable."""
    return ProcessorError(
        f"processor '{processor_id}': process_output_stream() returned "
        f"{type(out).__name__}; expected a Chunk, a list of chunks, or None to drop the "
        "chunk", processor_id=processor_id, hook="process_output_stream")
