"""Running one processor's hook for one phase, and applying what it returned.

The return-value rules of the seed live here, once, for the runner and for
processor steps alike: a list of messages replaces the phase's messages (ids that
are missing are removed, the others keep their source), result objects override,
``None`` leaves things as they were. A ``TripWire`` gets the processor's id and fires
``on_violation`` before it propagates; any other wrong return is a ``ProcessorError``
naming the processor and the hook.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from procflow.errors import ProcessorError, ProcflowError, TripWire
from procflow.messages import Message, MessageList, MessageSource
from procflow.processors.args import (
    OutputResult,
    ProcessAPIErrorArgs,
    ProcessInputArgs,
    ProcessInputResult,
    ProcessInputStepArgs,
    ProcessInputStepResult,
    ProcessLLMRequestArgs,
    ProcessLLMRequestResult,
    ProcessLLMResponseArgs,
    ProcessorArgs,
    ProcessorContext,
    ProcessorViolation,
    ProcessOutputResultArgs,
    ProcessOutputStepArgs,
    ProcessToolResultArgs,
    ProcessToolResultResult,
)
from procflow.processors.base import Processor
from procflow.runtime.tracing import Span, Tracer

_now = time.time
_ASYNC = Processor._async_cache

__all__ = [
    "StepInfo",
    "StepOverrides",
    "apply_api_error",
    "apply_input",
    "apply_input_step",
    "apply_llm_request",
    "apply_llm_response",
    "apply_output_result",
    "apply_output_step",
    "apply_tool_result",
    "call_hook",
]


@dataclass(slots=True)
class StepInfo:
    """Where the agent loop is: the step number and the steps done so far."""

    step_number: int = 0
    steps: list[Any] | None = None


@dataclass(slots=True)
class StepOverrides:
    """A step's settings after the input-step processors ran (each sees the last's)."""

    model: Any = None
    tools: Any = None
    tool_choice: Any = None


_ArgsT = TypeVar("_ArgsT", bound=ProcessorArgs)


def _args(
    cls: type[_ArgsT], p: Processor, ml: MessageList | None, ctx: ProcessorContext, *fields: Any
) -> _ArgsT:
    """A hook's args: the fields every hook shares, then the hook's own ``fields`` in the
    order its class declares them.

    Positional on purpose: this runs for every hook call, and a dataclass takes
    fourteen positional arguments about three times faster than fourteen keywords.
    """
    states = ctx.states
    state = states.get(p.id)
    if state is None:
        state = states[p.id] = {}
    return cls(ml, state, ctx.retry_count, ctx.request_context, ctx.writer, p, ctx, *fields)


SPAN_LABELS: dict[str, str] = {
    "process_input": "input processor",
    "process_input_step": "input step processor",
    "process_llm_request": "llm request processor",
    "process_llm_response": "llm response processor",
    "process_output_stream": "output stream processor",
    "process_output_step": "output step processor",
    "process_output_result": "output result processor",
    "process_tool_result": "tool result processor",
    "process_api_error": "api error processor",
}
"""Hook -> the span name prefix of its calls ("input processor: <id>")."""


async def call_hook(p: Processor, hook: str, args: ProcessorArgs) -> Any:
    """Call ``p.<hook>(args)`` (sync or async); a TripWire is tagged and reported."""
    fn: Callable[[Any], Any] = getattr(p, hook)
    ctx = args.context
    tracer = ctx.tracer
    started = _now() if tracer is not None else 0.0
    try:
        out = fn(args)
        is_async = _ASYNC.get((type(p), hook))  # hook_is_async's cache, read inline
        if is_async is None:
            is_async = p.hook_is_async(hook)
        if is_async or inspect.isawaitable(out):
            out = await out
    except TripWire as trip:
        span = _failed_span(tracer, ctx.span, p.id, hook, started)
        if trip.processor_id is None:
            trip.processor_id = p.id
        p.report_violation(ProcessorViolation(p.id, trip.reason, dict(trip.metadata)), args.context)
        if span is not None:
            Tracer.end(
                span,
                "tripwire",
                error=trip.reason,
                tripwire={
                    "reason": trip.reason,
                    "processor_id": trip.processor_id,
                    "retry": trip.retry,
                    "metadata": trip.metadata,
                },
            )
        raise
    except BaseException as exc:
        span = _failed_span(tracer, ctx.span, p.id, hook, started)
        if span is not None:
            Tracer.end(span, "failed" if isinstance(exc, Exception) else "canceled", error=exc)
        if isinstance(exc, Exception) and not isinstance(exc, ProcflowError):
            # A bug in a processor: say which processor and hook (the original is the cause).
            raise ProcessorError(f"processor '{p.id}': {hook}() raised {type(exc).__name__}: "
                                 f"{exc}", processor_id=p.id, hook=hook) from exc
        raise
    if tracer is not None:
        tracer.leaf(hook_span_name(p.id, hook), "processor", ctx.span, started)
    return out


def _failed_span(tracer: Tracer | None, parent: Span | None, processor_id: str, hook: str,
                 started: float) -> Span | None:
    """A full span for a hook call that did not return (it carries the error)."""
    if tracer is None:
        return None
    return tracer.open(hook_span_name(processor_id, hook), "processor", parent, None, started)


_NAMES: dict[tuple[str, str], str] = {}


def hook_span_name(processor_id: str, hook: str) -> str:
    """The span name of a hook call, e.g. "input processor: pii" (cached)."""
    key = (processor_id, hook)
    name = _NAMES.get(key)
    if name is None:
        if len(_NAMES) >= 4096:  # ids made per request must not grow this forever
            _NAMES.clear()
        name = _NAMES[key] = f"{SPAN_LABELS[hook]}: {processor_id}"
    return name


def _wrong(p: Processor, hook: str, out: Any, expected: str) -> ProcessorError:
    return ProcessorError(
        f"processor '{p.id}': {hook}() returned {type(out).__name__}; expected {expected}",
        processor_id=p.id,
        hook=hook,
    )


def _as_messages(p: Processor, hook: str, items: Sequence[Any]) -> list[Message]:
    out: list[Message] = []
    for i, item in enumerate(items):
        if isinstance(item, Message):
            out.append(item)
            continue
        try:
            out.append(Message.from_input(item))
        except Exception as exc:
            raise ProcessorError(
                f"processor '{p.id}': {hook}() returned a list whose item {i} is not a message "
                f"({type(item).__name__}: {exc})",
                processor_id=p.id,
                hook=hook,
            ) from exc
    return out


def replace_view(
    ml: MessageList, view: list[Message], returned: list[Message], default: MessageSource
) -> None:
    """Make ``returned`` take the place of ``view`` in ``ml``: missing ids are removed,
    the others keep their source, new ones get ``default``; system-role ones go to the
    system list."""
    sources = {m.id: _source(ml, m.id) for m in view}
    ml.remove_by_ids([m.id for m in view])
    for msg in returned:
        if msg.role == "system":
            ml.add_system(msg)
        else:
            ml.add(msg, source=sources.get(msg.id) or _source(ml, msg.id) or default)


def _source(ml: MessageList, id: str) -> MessageSource | None:
    try:
        return ml.source_of(id)
    except KeyError:
        return None


def _replace_system(ml: MessageList, system: list[Message]) -> None:
    ml.remove_by_ids([m.id for m in ml.system()])
    for msg in system:
        ml.add_system(msg)


def _apply_messages(
    p: Processor, hook: str, ml: MessageList, out: Any, view: list[Message], default: MessageSource
) -> bool:
    """Apply a message-list-shaped return; ``False`` when ``out`` is not one."""
    if out is None or out is ml:
        return True
    if isinstance(out, MessageList):
        raise ProcessorError(
            f"processor '{p.id}': {hook}() returned a different MessageList; edit "
            "args.message_list in place or return a list of messages",
            processor_id=p.id,
            hook=hook,
        )
    if isinstance(out, list | tuple):
        replace_view(ml, view, _as_messages(p, hook, out), default)
        return True
    return False


async def apply_input(p: Processor, ml: MessageList, ctx: ProcessorContext) -> None:
    """``process_input``: once, on the input messages."""
    hook = "process_input"
    view = ml.input()
    # messages, system_messages
    args = _args(ProcessInputArgs, p, ml, ctx, list(view), ml.system())
    out = await call_hook(p, hook, args)
    if _apply_messages(p, hook, ml, out, view, "input"):
        return
    if isinstance(out, ProcessInputResult):
        if out.messages is not None:
            replace_view(ml, view, _as_messages(p, hook, out.messages), "input")
        if out.system_messages is not None:
            _replace_system(ml, _as_messages(p, hook, out.system_messages))
        return
    raise _wrong(p, hook, out, "a list of messages, ProcessInputResult, the MessageList or None")


async def apply_input_step(
    p: Processor, ml: MessageList, ctx: ProcessorContext, info: StepInfo, current: StepOverrides
) -> StepOverrides:
    """``process_input_step``: before a model call; returns the step's settings."""
    hook = "process_input_step"
    view = ml.all()
    # messages, system_messages, step_number, steps, model, tools, tool_choice
    args = _args(ProcessInputStepArgs, p, ml, ctx, list(view), ml.system(), info.step_number,
                 list(info.steps or []), current.model, current.tools, current.tool_choice)
    out = await call_hook(p, hook, args)
    if _apply_messages(p, hook, ml, out, view, "input"):
        return current
    if isinstance(out, ProcessInputStepResult):
        if out.messages is not None:
            replace_view(ml, view, _as_messages(p, hook, out.messages), "input")
        if out.system_messages is not None:
            _replace_system(ml, _as_messages(p, hook, out.system_messages))
        return StepOverrides(
            model=out.model if out.model is not None else current.model,
            tools=out.tools if out.tools is not None else current.tools,
            tool_choice=out.tool_choice if out.tool_choice is not None else current.tool_choice,
        )
    raise _wrong(
        p, hook, out, "ProcessInputStepResult, a list of messages, the MessageList or None"
    )


async def apply_llm_request(
    p: Processor,
    prompt: list[dict[str, Any]],
    ml: MessageList | None,
    ctx: ProcessorContext,
    info: StepInfo,
    model: Any,
) -> ProcessLLMRequestResult:
    """``process_llm_request``: may rewrite this call's prompt or answer from cache."""
    hook = "process_llm_request"
    # prompt, model, step_number, steps
    args = _args(ProcessLLMRequestArgs, p, ml, ctx, prompt, model, info.step_number,
                 list(info.steps or []))
    out = await call_hook(p, hook, args)
    if out is None:
        return ProcessLLMRequestResult()
    if isinstance(out, ProcessLLMRequestResult):
        return out
    if isinstance(out, list) and all(isinstance(e, dict) for e in out):
        return ProcessLLMRequestResult(prompt=out)
    raise _wrong(p, hook, out, "ProcessLLMRequestResult, a prompt (list of dicts) or None")


async def apply_llm_response(
    p: Processor,
    chunks: list[Any],
    ml: MessageList | None,
    ctx: ProcessorContext,
    info: StepInfo,
    model: Any,
    from_cache: bool,
) -> None:
    """``process_llm_response``: side effects only (e.g. writing a cache)."""
    # chunks, model, step_number, steps, from_cache
    args = _args(ProcessLLMResponseArgs, p, ml, ctx, chunks, model, info.step_number,
                 list(info.steps or []), from_cache)
    await call_hook(p, "process_llm_response", args)


async def apply_output_step(
    p: Processor,
    ml: MessageList,
    ctx: ProcessorContext,
    info: StepInfo,
    *,
    finish_reason: str | None,
    tool_calls: list[dict[str, Any]],
    text: str,
    usage: dict[str, Any] | None,
) -> None:
    """``process_output_step``: after a model step."""
    hook = "process_output_step"
    view = ml.all()
    # messages, system_messages, step_number, steps, finish_reason, tool_calls, text, usage
    args = _args(ProcessOutputStepArgs, p, ml, ctx, list(view), ml.system(), info.step_number,
                 list(info.steps or []), finish_reason, tool_calls, text, usage)
    out = await call_hook(p, hook, args)
    if not _apply_messages(p, hook, ml, out, view, "response"):
        raise _wrong(p, hook, out, "a list of messages, the MessageList or None")


async def apply_output_result(
    p: Processor, ml: MessageList, ctx: ProcessorContext, result: OutputResult
) -> None:
    """``process_output_result``: once, on the response messages."""
    hook = "process_output_result"
    view = ml.response()
    # messages, result
    args = _args(ProcessOutputResultArgs, p, ml, ctx, list(view), result)
    out = await call_hook(p, hook, args)
    if not _apply_messages(p, hook, ml, out, view, "response"):
        raise _wrong(p, hook, out, "a list of messages, the MessageList or None")


async def apply_tool_result(
    p: Processor,
    ml: MessageList | None,
    ctx: ProcessorContext,
    info: StepInfo,
    *,
    tool_name: str,
    tool_call_id: str,
    args: dict[str, Any],
    result: Any,
) -> Any:
    """``process_tool_result``: returns the (possibly replaced) tool result."""
    hook = "process_tool_result"
    # tool_name, tool_call_id, args, result, step_number, steps
    hook_args = _args(ProcessToolResultArgs, p, ml, ctx, tool_name, tool_call_id, args, result,
                      info.step_number, list(info.steps or []))
    out = await call_hook(p, hook, hook_args)
    if out is None:
        return result
    if isinstance(out, ProcessToolResultResult):
        return out.result
    if ml is not None and _apply_messages(p, hook, ml, out, ml.all(), "response"):
        return result
    raise _wrong(p, hook, out, "ProcessToolResultResult, a list of messages or None")


async def apply_api_error(
    p: Processor, error: BaseException, ml: MessageList, ctx: ProcessorContext, info: StepInfo
) -> bool:
    """``process_api_error``: whether this processor asks for a retry."""
    from procflow.processors.args import APIErrorResult

    hook = "process_api_error"
    # error, messages, step_number, steps
    args = _args(ProcessAPIErrorArgs, p, ml, ctx, error, ml.all(), info.step_number,
                 list(info.steps or []))
    out = await call_hook(p, hook, args)
    if out is None:
        return False
    if isinstance(out, APIErrorResult):
        return out.retry
    raise _wrong(p, hook, out, "APIErrorResult or None")
