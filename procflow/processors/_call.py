"""Calling one processor hook: sync or async, traced as a leaf span, errors named.

A ``TripWire`` gets the processor's id and fires ``on_violation`` before it
propagates; any other exception from a hook is a bug in the processor and becomes a
``ProcessorError`` naming the processor and the hook (the original is the cause).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from procflow.errors import ProcessorError, ProcflowError, TripWire
from procflow.processors.args import ProcessorArgs, ProcessorViolation
from procflow.runtime.tracing import Span, Tracer

if TYPE_CHECKING:
    from procflow.processors._hooks import Hook
    from procflow.processors.base import Processor

__all__ = ["call_hook", "span_name"]

_now = time.time


async def call_hook(p: Processor, hook: Hook, args: ProcessorArgs) -> Any:
    """Call ``p.<hook>(args)`` (sync or async) and return what it returned.

    Raises:
        TripWire: The hook aborted (tagged with ``p.id``; ``on_violation`` has run).
        ProcessorError: The hook raised something that is not a procflow error.
    """
    name = hook.name
    fn: Callable[[Any], Any] = getattr(p, name)
    ctx = args.context
    tracer = ctx.tracer
    started = _now() if tracer is not None else 0.0
    try:
        out = fn(args)
        if p.hook_is_async(name) or inspect.isawaitable(out):
            out = await out
    except TripWire as trip:
        span = _failed_span(tracer, ctx.span, p.id, hook, started)
        if trip.processor_id is None:
            trip.processor_id = p.id
        p.report_violation(ProcessorViolation(p.id, trip.reason, dict(trip.metadata)), ctx)
        if span is not None:
            Tracer.end(span, "tripwire", error=trip.reason, tripwire=trip.to_dict())
        raise
    except BaseException as exc:
        span = _failed_span(tracer, ctx.span, p.id, hook, started)
        if span is not None:
            Tracer.end(span, "failed" if isinstance(exc, Exception) else "canceled", error=exc)
        if isinstance(exc, Exception) and not isinstance(exc, ProcflowError):
            raise ProcessorError(f"processor '{p.id}': {name}() raised {type(exc).__name__}: "
                                 f"{exc}", processor_id=p.id, hook=name) from exc
        raise
    if tracer is not None:
        tracer.leaf(span_name(p.id, hook), "processor", ctx.span, started)
    return out


def _failed_span(tracer: Tracer | None, parent: Span | None, processor_id: str, hook: Hook,
                 started: float) -> Span | None:
    """A full span for a hook call that did not return (it carries the error)."""
    if tracer is None:
        return None
    return tracer.open(span_name(processor_id, hook), "processor", parent, None, started)


_NAMES: dict[tuple[str, str], str] = {}


def span_name(processor_id: str, hook: Hook) -> str:
    """The span name of a hook call, e.g. "input processor: pii" (cached)."""
    key = (processor_id, hook.name)
    name = _NAMES.get(key)
    if name is None:
        if len(_NAMES) >= 4096:  # ids made per request must not grow this forever
            _NAMES.clear()
        name = _NAMES[key] = f"{hook.label}: {processor_id}"
    return name
