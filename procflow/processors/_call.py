"""Calling one processor hook: its args built, the call traced as a leaf span, errors
named, and its return value applied (by the hook table's rule).

A ``TripwireError`` gets the processor's id and fires ``on_violation`` before it
propagates; any other exception from a hook is a bug in the processor and becomes a
``ProcessorError`` naming the processor and the hook (the original is the cause).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from procflow.errors import ProcessorError, ProcflowError, TripwireError
from procflow.messages import Message
from procflow.processors.args import ProcessorContext, ProcessorViolation
from procflow.processors.base import ASYNC_HOOKS
from procflow.runtime.tracing import Span, Tracer

if TYPE_CHECKING:
    from procflow.processors._hooks import Hook, HookCall
    from procflow.processors.base import Processor

__all__ = ["NO_VIEW", "SPAN_NAMES", "hook_error", "run_hook", "span_name", "stream_bad_return",
           "stream_hook_failed"]

_now = time.time


async def run_hook(hook: Hook, p: Processor, call: HookCall, ctx: ProcessorContext) -> None:
    """Run processor ``p``'s ``hook`` on ``call`` and apply what it returned.

    Raises:
        TripwireError: The hook aborted (tagged with ``p.id``; ``on_violation`` has run).
        ProcessorError: The hook raised something that is not a procflow error, or
            returned something its rule does not accept.
    """
    ml = call.ml
    view = hook.view(ml) if hook.view is not None and ml is not None else NO_VIEW
    states = ctx.states
    state = states.get(p.id)
    if state is None:
        state = states[p.id] = {}
    # Positional on purpose: this runs for every hook call, and a dataclass takes
    # fourteen positional arguments about three times faster than fourteen keywords.
    args = hook.args(ml, state, ctx.retry_count, ctx.request_context, ctx.writer, p, ctx,
                     *hook.fields(call, ml, view))  # type: ignore[arg-type]
    name = hook.name
    fn: Callable[[Any], Any] = getattr(p, name)
    tracer = ctx.tracer
    started = _now() if tracer is not None else 0.0
    try:
        out = fn(args)
        is_async = ASYNC_HOOKS.get((type(p), name))  # hook_is_async's cache, read inline
        if is_async is None:
            is_async = p.hook_is_async(name)
        if is_async or inspect.isawaitable(out):
            out = await out
    except BaseException as exc:
        raise hook_error(exc, hook, p, ctx, started)  # noqa: B904 - its cause is set
    if tracer is not None:
        name = SPAN_NAMES.get((p.id, name)) or span_name(p.id, hook)  # the lookup inline
        tracer.leaf(name, "processor", ctx.span, started)
    if out is not None:  # None leaves everything as it was, for every hook
        hook.apply(p, hook, call, view, out)


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
