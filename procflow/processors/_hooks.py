"""The hook table: everything procflow knows about each processor hook, in one place.

One ``Hook`` row per hook says which args type it takes and how its fields are laid
out, which messages it sees (its *view*), how its return value is applied, the span
label of its calls, whether it runs on the stream, and — for hooks a processor
workflow can run — the envelope phase, the envelope fields that phase requires, and
which fields go into and come back out of the envelope.

The runner, the processor-step adapter, the stream pipeline and the span names all
read this table, so a new hook is one new row (and its no-op method on
``Processor``). The value threaded through one phase is a ``HookCall``: the message
list plus the phase's data; each processor's return is applied to it in turn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from procflow.errors import ProcessorError
from procflow.messages import Chunk, Message, MessageList, MessageSource
from procflow.processors.args import (
    APIErrorResult,
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
    ProcessOutputResultArgs,
    ProcessOutputStepArgs,
    ProcessOutputStreamArgs,
    ProcessToolResultArgs,
    ProcessToolResultResult,
)

if TYPE_CHECKING:
    from procflow.processors.base import Processor

__all__ = ["HOOKS", "PHASES", "TABLE", "Hook", "HookCall", "StepInfo", "StepOverrides",
           "replace_view"]


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


class HookCall:
    """One phase's data, threaded through a processor array; each processor's return
    value is applied to it before the next processor runs.

    The field names are the envelope's (``ProcessorStepSchema``), so a phase moves
    between the two by name. One is made per phase per request, so making one is kept
    cheap: the constructor sets the message list and the step, every other field
    starts at its class-level default and a phase sets the ones it uses.
    (The list and dict defaults are shared: assign new values, never mutate them.)
    """

    step_number: int = 0
    steps: Sequence[Any] = ()
    model: Any = None
    tools: Any = None
    tool_choice: Any = None
    prompt: list[dict[str, Any]] | None = None
    response: list[Chunk] | None = None
    chunks: list[Chunk] | None = None
    from_cache: bool = False
    finish_reason: str | None = None
    tool_calls: list[dict[str, Any]] = []  # noqa: RUF012 - replaced, never mutated
    text: str = ""
    usage: dict[str, Any] | None = None
    result: Any = None
    tool_name: str = ""
    tool_call_id: str = ""
    args: dict[str, Any] = {}  # noqa: RUF012 - replaced, never mutated
    error: BaseException | None = None
    retry: bool = False

    def __init__(self, ml: MessageList | None, step_number: int = 0,
                 steps: Sequence[Any] = ()) -> None:
        self.ml = ml
        self.step_number = step_number
        self.steps = steps


View: TypeAlias = "Callable[[MessageList], list[Message]] | None"
Fields: TypeAlias = "Callable[[HookCall, MessageList, list[Message]], tuple[Any, ...]]"
Apply: TypeAlias = "Callable[[Processor, Hook, HookCall, list[Message], Any], None]"


@dataclass(frozen=True, slots=True)
class Hook:
    """One hook's rules.

    Attributes:
        name: The method name, e.g. "process_input".
        args: Its args type.
        fields: The hook's own args fields (after the shared ones), positionally, in the
            order the args type declares them: ``fields(call, ml, view)``.
        view: The messages the hook sees and may replace (``None``: no message view;
            the hook gets an empty view).
        apply: Applies the hook's return value to the call (raises ``ProcessorError`` on
            a return it does not accept); not called for ``None``, which leaves
            everything as it was for every hook.
        label: The span name prefix of its calls ("input processor: <id>").
        stream: Runs per chunk on the stream fast path.
        phase: Its ``ProcessorStepSchema`` phase, or ``None`` when processor
            workflows cannot run it.
        messages: The envelope's ``messages`` for the phase (all of them by default).
        source: The source of messages a hook adds, and of an envelope's messages
            when it brings no message list.
        required: Envelope fields the phase needs.
        env_in: ``HookCall`` fields copied into the envelope.
        env_out: ``HookCall`` fields read back from the returned envelope.
    """

    name: str
    args: type[ProcessorArgs]
    fields: Fields
    view: View
    apply: Apply
    label: str
    stream: bool = False
    phase: str | None = None
    messages: Callable[[MessageList], list[Message]] = MessageList.all
    source: MessageSource = "input"
    required: tuple[str, ...] = ()
    env_in: tuple[str, ...] = ()
    env_out: tuple[str, ...] = ()


# -- how return values are applied --------------------------------------------------


def _wrong(p: Processor, hook: Hook, out: Any, expected: str) -> ProcessorError:
    return ProcessorError(f"processor '{p.id}': {hook.name}() returned {type(out).__name__}; "
                          f"expected {expected}", processor_id=p.id, hook=hook.name)


def _as_messages(p: Processor, hook: Hook, items: Sequence[Any]) -> list[Message]:
    out: list[Message] = []
    for i, item in enumerate(items):
        if isinstance(item, Message):
            out.append(item)
            continue
        try:
            out.append(Message.from_input(item))
        except Exception as exc:
            raise ProcessorError(
                f"processor '{p.id}': {hook.name}() returned a list whose item {i} is not a "
                f"message ({type(item).__name__}: {exc})", processor_id=p.id,
                hook=hook.name) from exc
    return out


def replace_view(ml: MessageList, view: list[Message], returned: list[Message],
                 default: MessageSource) -> None:
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


def _messages(p: Processor, hook: Hook, ml: MessageList | None, out: Any,
              view: list[Message]) -> bool:
    """Apply a message-list-shaped return; ``False`` when ``out`` is not one."""
    if out is None or out is ml:
        return True
    if isinstance(out, MessageList):
        raise ProcessorError(f"processor '{p.id}': {hook.name}() returned a different "
                             "MessageList; edit args.message_list in place or return a list "
                             "of messages", processor_id=p.id, hook=hook.name)
    if isinstance(out, list | tuple) and ml is not None:
        replace_view(ml, view, _as_messages(p, hook, out), hook.source)
        return True
    return False


def _input_result(p: Processor, hook: Hook, call: HookCall, out: Any,
                  view: list[Message]) -> None:
    """Replace the view's messages and the system messages a result object carries."""
    ml = call.ml
    if ml is None:  # input hooks always have a message list
        return
    if out.messages is not None:
        replace_view(ml, view, _as_messages(p, hook, out.messages), hook.source)
    if out.system_messages is not None:
        _replace_system(ml, _as_messages(p, hook, out.system_messages))


def _apply_input(p: Processor, hook: Hook, call: HookCall, view: list[Message],
                 out: Any) -> None:
    if _messages(p, hook, call.ml, out, view):
        return
    if not isinstance(out, ProcessInputResult):
        raise _wrong(p, hook, out,
                     "a list of messages, ProcessInputResult, the MessageList or None")
    _input_result(p, hook, call, out, view)


def _apply_input_step(p: Processor, hook: Hook, call: HookCall, view: list[Message],
                      out: Any) -> None:
    if _messages(p, hook, call.ml, out, view):
        return
    if not isinstance(out, ProcessInputStepResult):
        raise _wrong(p, hook, out,
                     "ProcessInputStepResult, a list of messages, the MessageList or None")
    _input_result(p, hook, call, out, view)
    if out.model is not None:
        call.model = out.model
    if out.tools is not None:
        call.tools = out.tools
    if out.tool_choice is not None:
        call.tool_choice = out.tool_choice


def _apply_llm_request(p: Processor, hook: Hook, call: HookCall, view: list[Message],
                       out: Any) -> None:
    if out is None:
        return
    if isinstance(out, list) and all(isinstance(e, dict) for e in out):
        out = ProcessLLMRequestResult(prompt=out)
    elif not isinstance(out, ProcessLLMRequestResult):
        raise _wrong(p, hook, out, "ProcessLLMRequestResult, a prompt (list of dicts) or None")
    if out.prompt is not None:
        call.prompt = out.prompt
    if out.response is not None and call.response is None:  # the first answer wins
        call.response = out.response


def _ignore(p: Processor, hook: Hook, call: HookCall, view: list[Message], out: Any) -> None:
    """Side effects only (e.g. writing a cache): the return value is not used."""


def _apply_messages(p: Processor, hook: Hook, call: HookCall, view: list[Message],
                    out: Any) -> None:
    if not _messages(p, hook, call.ml, out, view):
        raise _wrong(p, hook, out, "a list of messages, the MessageList or None")


def _apply_output_step(p: Processor, hook: Hook, call: HookCall, view: list[Message],
                       out: Any) -> None:
    """Like ``_apply_messages``, except that an empty list means "no change".

    The seed's validators (``ResponseValidator``, ``QualityChecker``) check the step,
    maybe ``abort(..., retry=True)``, and ``return []``: that must not erase the
    answer. A processor that wants messages gone removes them through
    ``args.message_list.remove_by_ids(...)``.
    """
    if isinstance(out, list | tuple) and not out:
        return
    _apply_messages(p, hook, call, view, out)


def _apply_tool_result(p: Processor, hook: Hook, call: HookCall, view: list[Message],
                       out: Any) -> None:
    if out is None:
        return
    if isinstance(out, ProcessToolResultResult):
        call.result = out.result
        return
    ml = call.ml
    if ml is not None and _messages(p, hook, ml, out, ml.all()):
        return
    raise _wrong(p, hook, out, "ProcessToolResultResult, a list of messages or None")


def _apply_api_error(p: Processor, hook: Hook, call: HookCall, view: list[Message],
                     out: Any) -> None:
    if out is None:
        return
    if not isinstance(out, APIErrorResult):
        raise _wrong(p, hook, out, "APIErrorResult or None")
    call.retry = out.retry


def _apply_stream(p: Processor, hook: Hook, call: HookCall, view: list[Message],
                  out: Any) -> None:
    raise NotImplementedError("stream hooks run in StreamPipeline")


# -- the table -------------------------------------------------------------------------

_all = MessageList.all
_ANY_STEP = ("step_number", "steps")

TABLE: dict[str, Hook] = {hook.name: hook for hook in (
    Hook("process_input", ProcessInputArgs,
         # messages, system_messages
         lambda c, ml, v: (list(v), ml.system()),
         MessageList.input, _apply_input, "input processor",
         phase="input", messages=MessageList.input, required=("messages",)),
    Hook("process_input_step", ProcessInputStepArgs,
         # messages, system_messages, step_number, steps, model, tools, tool_choice
         lambda c, ml, v: (list(v), ml.system(), c.step_number, list(c.steps), c.model,
                           c.tools, c.tool_choice),
         _all, _apply_input_step, "input step processor",
         phase="input_step", required=("messages",),
         env_in=(*_ANY_STEP, "model", "tools", "tool_choice"),
         env_out=("model", "tools", "tool_choice")),
    Hook("process_llm_request", ProcessLLMRequestArgs,
         # prompt, model, step_number, steps
         lambda c, ml, v: (c.prompt, c.model, c.step_number, list(c.steps)),
         None, _apply_llm_request, "llm request processor"),
    Hook("process_llm_response", ProcessLLMResponseArgs,
         # chunks, model, step_number, steps, from_cache
         lambda c, ml, v: (c.chunks, c.model, c.step_number, list(c.steps), c.from_cache),
         None, _ignore, "llm response processor"),
    Hook("process_output_stream", ProcessOutputStreamArgs,
         # part, stream_parts (StreamPipeline builds these args itself, once per stream)
         lambda c, ml, v: (), None, _apply_stream, "output stream processor",
         stream=True, phase="output_stream"),
    Hook("process_output_step", ProcessOutputStepArgs,
         # messages, system_messages, step_number, steps, finish_reason, tool_calls, text,
         # usage
         lambda c, ml, v: (list(v), ml.system(), c.step_number, list(c.steps),
                           c.finish_reason, c.tool_calls, c.text, c.usage),
         _all, _apply_output_step, "output step processor",
         phase="output_step", source="response", required=("messages",),
         env_in=(*_ANY_STEP, "finish_reason", "tool_calls", "text", "usage")),
    Hook("process_output_result", ProcessOutputResultArgs,
         # messages, result
         lambda c, ml, v: (list(v), c.result if isinstance(c.result, OutputResult)
                           else OutputResult()),
         MessageList.response, _apply_messages, "output result processor",
         phase="output_result", messages=MessageList.response, source="response",
         required=("messages",), env_in=("result",)),
    Hook("process_tool_result", ProcessToolResultArgs,
         # tool_name, tool_call_id, args, result, step_number, steps
         lambda c, ml, v: (c.tool_name, c.tool_call_id, c.args, c.result, c.step_number,
                           list(c.steps)),
         None, _apply_tool_result, "tool result processor",
         phase="tool_result", source="response",
         required=("tool_name", "tool_call_id"),
         env_in=("step_number", "tool_name", "tool_call_id", "args", "result"),
         env_out=("result",)),
    Hook("process_api_error", ProcessAPIErrorArgs,
         # error, messages, step_number, steps
         lambda c, ml, v: (c.error, v, c.step_number, list(c.steps)),
         _all, _apply_api_error, "api error processor"),
)}
"""Hook name -> its rules, in the order the hooks run."""

HOOKS: tuple[str, ...] = tuple(TABLE)
"""The hook names, in the order they run."""

PHASES: dict[str, Hook] = {h.phase: h for h in TABLE.values() if h.phase is not None}
"""Envelope phase -> its hook."""
