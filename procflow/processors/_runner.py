"""``ProcessorRunner``: runs one processor array, phase by phase, for one request.

Each phase runs the array in order; every processor sees the previous one's result.
A processor workflow (input and output schema ``ProcessorStepSchema``) stands
anywhere a processor can: it runs as a transient workflow run (never persisted) on
the phase's envelope, and its result is applied to the live message list. On the
output stream a processor workflow (linear, parallel or branching) is compiled once
into stages of the in-process fast path (``_compile``): no workflow run per chunk.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from procflow.context import RequestContext
from procflow.errors import (
    ProcessorError,
    StepValidationError,
    TripwireError,
    WorkflowDefinitionError,
)
from procflow.messages import Chunk, MessageList
from procflow.processors._call import (
    NO_VIEW,
    SPAN_NAMES,
    hook_error,
    span_name,
)
from procflow.processors._compile import StreamNode, compile_stream
from procflow.processors._hooks import (
    PHASES,
    TABLE,
    Hook,
    HookCall,
    StepInfo,
    StepOverrides,
)
from procflow.processors._stream import StreamPipeline
from procflow.processors.args import (
    OutputResult,
    ProcessLLMRequestResult,
    ProcessorContext,
)
from procflow.processors.base import ASYNC_HOOKS, Processor
from procflow.processors.step import (
    PROCESSOR_CONTEXT_KEY,
    ProcessorStepSchema,
    is_processor_workflow,
    processor_workflow_hooks,
)
from procflow.runtime.tracing import ParentSpan

if TYPE_CHECKING:
    from procflow.workflows.workflow import Workflow

__all__ = ["RUNS_IN", "ProcessorLike", "ProcessorRunner", "check_processors",
           "run_processor_workflow"]

_INPUT = TABLE["process_input"]
_INPUT_STEP = TABLE["process_input_step"]
_LLM_REQUEST = TABLE["process_llm_request"]
_LLM_RESPONSE = TABLE["process_llm_response"]
_OUTPUT_STEP = TABLE["process_output_step"]
_OUTPUT_RESULT = TABLE["process_output_result"]
_TOOL_RESULT = TABLE["process_tool_result"]
_API_ERROR = TABLE["process_api_error"]

logger = logging.getLogger("procflow.processors")
_now = time.time

ProcessorLike: TypeAlias = "Processor | Workflow"


def check_processors(items: Sequence[Any], *, where: str = "processors") -> list[Any]:
    """Validate a processor array: processors with ids, or processor workflows, ids unique.

    Raises:
        ProcessorError: Naming the offending item.
    """
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise ProcessorError(f"{where} must be a list of processors, got {type(items).__name__}")
    seen: set[str] = set()
    out: list[Any] = []
    for i, item in enumerate(items):
        if isinstance(item, Processor):
            pid = item.id
            if not isinstance(pid, str) or not pid:
                raise ProcessorError(
                    f"{where}[{i}]: {type(item).__name__} has no id; give the class an id "
                    "attribute, e.g. id = \"my-processor\"")
        elif is_processor_workflow(item):
            pid = item.id
            if where == "output_processors":
                compile_stream(item)  # a shape the stream cannot run fails here, not later
        elif getattr(item, "kind", None) == "workflow":
            raise ProcessorError(
                f"{where}[{i}]: workflow '{item.id}' cannot be a processor: its input_schema "
                "and output_schema must both be ProcessorStepSchema")
        else:
            raise ProcessorError(
                f"{where}[{i}]: expected a Processor or a processor workflow, got "
                f"{type(item).__name__}")
        _check_place(item, where)
        if pid in seen:
            raise ProcessorError(f"{where}: two processors have the id '{pid}'; ids must be "
                                 "unique within one array", processor_id=pid)
        seen.add(pid)
        out.append(item)
    return out


RUNS_IN: dict[str, frozenset[str]] = {
    "input_processors": frozenset({"process_input", "process_input_step",
                                   "process_llm_request", "process_llm_response",
                                   "process_tool_result", "process_api_error"}),
    "output_processors": frozenset({"process_output_stream", "process_output_step",
                                    "process_output_result", "process_tool_result",
                                    "process_api_error"}),
    "error_processors": frozenset({"process_api_error", "process_llm_request"}),
}
"""Which hooks an agent runs for each of its processor arrays."""


def _check_place(item: Any, where: str) -> None:
    """A processor none of whose hooks runs in ``where`` is a definition error."""
    runs = RUNS_IN.get(where)
    if runs is None or not isinstance(item, Processor):
        return
    hooks = item.implemented_hooks()
    if not hooks or hooks & runs:
        return
    places = sorted({w for w, h in RUNS_IN.items() if hooks & h})
    raise WorkflowDefinitionError(
        f"{where}: processor '{item.id}' implements {sorted(hooks)}, none of which runs in "
        f"{where}; put it in {' or '.join(places)}")


async def run_processor_workflow(wf: Workflow, env: ProcessorStepSchema,
                                 ctx: ProcessorContext) -> ProcessorStepSchema:
    """Run a processor workflow on an envelope, transiently (nothing is stored).

    Raises:
        TripwireError: A processor inside aborted (with its processor id).
        ProcessorError: The workflow failed, suspended, or returned no envelope.
    """
    rc = RequestContext(ctx.request_context.to_dict())
    rc[PROCESSOR_CONTEXT_KEY] = ctx
    run = wf.create_run(ephemeral=True, tracing=False,
                        parent_span=ParentSpan.of(ctx.tracer, ctx.span))
    result = await run.start(input_data=env, request_context=rc)
    if result.status == "tripwire":
        error = result.error
        if isinstance(error, TripwireError):
            raise error
        raise TripwireError.from_dict(result.tripwire.to_dict() if result.tripwire else {})
    if (result.status == "failed" and isinstance(result.error, StepValidationError)
            and result.error.step_id is None):
        raise ProcessorError(
            f"processor workflow '{wf.id}' must return the ProcessorStepSchema envelope (did a "
            ".map() forget to pick a branch? merge_processor_results joins them all): "
            f"{result.error}", processor_id=wf.id) from result.error
    if result.status != "success":
        raise ProcessorError(f"processor workflow '{wf.id}' ended {result.status!r}: "
                             f"{result.error}", processor_id=wf.id) from result.error
    out = result.result
    if out is None:
        return env
    if not isinstance(out, ProcessorStepSchema):
        raise ProcessorError(f"processor workflow '{wf.id}' returned {type(out).__name__}; "
                             "it must return the ProcessorStepSchema envelope (did a .map() "
                             "forget to pick a branch?)", processor_id=wf.id)
    return out


class ProcessorRunner:
    """Runs a processor array's hooks for each phase of one request.

    Args:
        processors: Processors and processor workflows, in order.
        context: The request's ``ProcessorContext`` (state, writer, retry count); one
            context is shared by the input, output and error runners of a request.
        max_processor_retries: How many ``abort(retry=True)`` retries are allowed.
        validate: Check the array (skip only for an array checked before).

    Attributes:
        hooks: The hooks some item of the array runs (a phase none runs may be skipped:
            each ``run_*`` method returns at once for it).
    """

    def __init__(self, processors: Sequence[Any] = (), *,
                 context: ProcessorContext | None = None, max_processor_retries: int = 0,
                 where: str = "processors", validate: bool = True) -> None:
        if not isinstance(max_processor_retries, int) or max_processor_retries < 0:
            raise ProcessorError(
                f"max_processor_retries must be an int >= 0, got {max_processor_retries!r}")
        self.items: list[Any] = (check_processors(processors, where=where) if validate
                                 else list(processors))
        self.context = context if context is not None else ProcessorContext()
        self.max_processor_retries = max_processor_retries
        self.hooks, self._item_hooks = _hooks_of(self.items)

    # -- retries --------------------------------------------------------------------

    def can_retry(self, trip: TripwireError) -> bool:
        """Whether a ``retry=True`` abort may re-run the step (budget left)."""
        return trip.retry and self.context.retry_count < self.max_processor_retries

    def note_retry(self) -> None:
        """Count one processor-requested retry."""
        self.context.retry_count += 1

    # -- phases ---------------------------------------------------------------------

    async def run(self, hook: Hook, call: HookCall, only: Processor | None = None,
                  ) -> HookCall:
        """Run ``hook`` of every processor, in order, on ``call`` (each sees the last's
        changes); a processor workflow runs on the hook's envelope, when it has one.

        The one place a processor hook is called and traced (``only``: of that
        processor alone, as an error processor or a processor step is).

        Raises:
            TripwireError: A hook aborted (tagged with its processor's id; ``on_violation``
                has run).
            ProcessorError: A hook raised something that is not a procflow error, or
                returned something its rule does not accept.
        """
        ctx = self.context
        name = hook.name
        ml = call.ml
        view_of = hook.view if ml is not None else None
        make, fields, apply = hook.args, hook.fields, hook.apply
        states = ctx.states
        # Traced, a hook call's span starts where the previous one's ended (it covers
        # building its arguments too): one clock read and one stored float per call.
        ended: float | None = None
        items = (zip(self.items, self._item_hooks, strict=True) if only is None
                 else ((only, None),))
        for item, hooks in items:
            if hooks is not None:  # a processor whose hooks are its class's
                if name not in hooks:
                    continue
            elif not isinstance(item, Processor):
                if hook.phase is not None and ml is not None and _acts(item, name):
                    await self._through(item, hook, call, ml)
                    ended = None  # the workflow's own spans cover it
                continue
            elif name not in item.implemented_hooks():
                continue
            # Inline, not a call per processor: no coroutine per hook call. Positional
            # on purpose: a dataclass takes fourteen positional arguments about three
            # times faster than fourteen keywords.
            view = NO_VIEW if view_of is None else view_of(ml)  # type: ignore[arg-type]
            state = states.get(item.id)
            if state is None:
                state = states[item.id] = {}
            args = make(ml, state, ctx.retry_count, ctx.request_context, ctx.writer_for(item),
                        item, ctx, *fields(call, ml, view))  # type: ignore[arg-type]
            tracer = ctx.tracer
            started = (_now() if ended is None else ended) if tracer is not None else 0.0
            try:
                out = getattr(item, name)(args)
                is_async = ASYNC_HOOKS.get((type(item), name))
                if is_async is None:
                    is_async = item.hook_is_async(name)
                if is_async or inspect.isawaitable(out):
                    out = await out
            except BaseException as exc:
                raise hook_error(exc, hook, item, ctx, started)  # noqa: B904 - cause set
            if tracer is not None:
                ended = _now()
                tracer.leaf(SPAN_NAMES.get((item.id, name)) or span_name(item.id, hook),
                            "processor", ctx.span, started, "success", None, ended)
            if out is not None:  # None leaves everything as it was, for every hook
                apply(item, hook, call, view, out)
        return call

    async def _through(self, wf: Any, hook: Hook, call: HookCall, ml: MessageList) -> None:
        env = ProcessorStepSchema(
            phase=hook.phase, messages=hook.messages(ml), message_list=ml,
            system_messages=ml.system(), retry_count=self.context.retry_count,
            **{f: getattr(call, f) for f in hook.env_in})
        out = await run_processor_workflow(wf, env, self.context)
        if out.message_list is not None and out.message_list is not ml:
            ml.assign(out.message_list)
        for f in hook.env_out:
            setattr(call, f, getattr(out, f))

    async def run_input(self, ml: MessageList) -> None:
        """``process_input`` of every processor, in order, on ``ml``."""
        if _INPUT.name not in self.hooks:
            return
        await self.run(_INPUT, HookCall(ml))

    async def run_input_step(self, ml: MessageList, info: StepInfo,
                             current: StepOverrides) -> StepOverrides:
        """``process_input_step`` of every processor; returns the step's settings."""
        if _INPUT_STEP.name not in self.hooks:
            return current
        call = HookCall(ml, info.step_number, _steps(info))
        call.model, call.tools, call.tool_choice = (current.model, current.tools,
                                                    current.tool_choice)
        await self.run(_INPUT_STEP, call)
        return StepOverrides(call.model, call.tools, call.tool_choice)

    async def run_llm_request(self, prompt: list[dict[str, Any]], ml: MessageList | None,
                              info: StepInfo, model: Any) -> ProcessLLMRequestResult:
        """``process_llm_request``: the final prompt, and cached chunks if one answered."""
        if _LLM_REQUEST.name not in self.hooks:
            return ProcessLLMRequestResult(prompt=prompt)
        call = HookCall(ml, info.step_number, _steps(info))
        call.model, call.prompt = model, prompt
        await self.run(_LLM_REQUEST, call)
        return ProcessLLMRequestResult(prompt=call.prompt, response=call.response)

    async def run_llm_response(self, chunks: list[Chunk], ml: MessageList | None,
                               info: StepInfo, model: Any, *, from_cache: bool) -> None:
        """``process_llm_response`` of every processor (side effects only)."""
        if _LLM_RESPONSE.name not in self.hooks:
            return
        call = HookCall(ml, info.step_number, _steps(info))
        call.model, call.chunks, call.from_cache = model, chunks, from_cache
        await self.run(_LLM_RESPONSE, call)

    def output_stream(self, ml: MessageList | None = None) -> StreamPipeline:
        """The stream fast path for this array, for one model call: processor workflows
        run compiled (``compile_stream``: once per workflow), never as workflow runs."""
        items: list[Processor | StreamNode] = []
        origins: list[int] = []  # each item's place in the array
        for i, item in enumerate(self.items):
            nodes = [item] if isinstance(item, Processor) else compile_stream(item)
            items += nodes
            origins += [i] * len(nodes)
        return StreamPipeline(items, self.context, ml, origins)

    async def run_output_step(self, ml: MessageList, info: StepInfo, *,
                              finish_reason: str | None, tool_calls: list[dict[str, Any]],
                              text: str, usage: dict[str, Any] | None) -> None:
        """``process_output_step`` of every processor, after a model step."""
        if _OUTPUT_STEP.name not in self.hooks:
            return
        call = HookCall(ml, info.step_number, _steps(info))
        call.finish_reason, call.tool_calls, call.text, call.usage = (finish_reason, tool_calls,
                                                                      text, usage)
        await self.run(_OUTPUT_STEP, call)

    async def run_output_result(self, ml: MessageList, result: OutputResult) -> None:
        """``process_output_result`` of every processor, once at the end."""
        if _OUTPUT_RESULT.name not in self.hooks:
            return
        call = HookCall(ml)
        call.result = result
        await self.run(_OUTPUT_RESULT, call)

    async def run_tool_result(self, ml: MessageList | None, info: StepInfo, *,
                              tool_name: str, tool_call_id: str, args: dict[str, Any],
                              result: Any) -> Any:
        """``process_tool_result`` of every processor; returns the final tool result."""
        if _TOOL_RESULT.name not in self.hooks:
            return result
        call = HookCall(ml, info.step_number, _steps(info))
        call.tool_name, call.tool_call_id, call.args, call.result = (tool_name, tool_call_id,
                                                                     args, result)
        await self.run(_TOOL_RESULT, call)
        return call.result

    async def run_api_error(self, error: BaseException, ml: MessageList,
                            info: StepInfo) -> bool:
        """``process_api_error``: the first processor asking for a retry wins.

        An error processor that raises (other than a TripwireError) is logged and skipped.
        """
        if _API_ERROR.name not in self.hooks:
            return False
        call = HookCall(ml, info.step_number, _steps(info))
        call.error = error
        name = _API_ERROR.name
        for p in self.items:
            if not (isinstance(p, Processor) and name in p.implemented_hooks()):
                continue
            try:
                await self.run(_API_ERROR, call, p)
            except TripwireError:
                raise
            except ProcessorError as err:
                if err.__cause__ is None:  # a wrong return value: the processor is broken
                    raise
                logger.error("error processor %r raised; ignored", p.id, exc_info=err.__cause__)
            except Exception:
                logger.exception("error processor %r raised; ignored", p.id)
            if call.retry:
                return True
        return False


_PHASE_HOOKS = frozenset(h.name for h in PHASES.values())
_HOOKS_OF: dict[tuple[type, ...], tuple[frozenset[str], tuple[frozenset[str] | None, ...]]] = {}


def _hooks_of(items: list[Any]) -> tuple[frozenset[str], tuple[frozenset[str] | None, ...]]:
    """The hooks some item of an array runs, and each item's own hooks (``None`` for a
    processor workflow, and for a processor answering ``implemented_hooks()`` itself:
    asked at every phase). Cached by the items' classes: hooks are per class, and a
    runner is made per request."""
    key = tuple(map(type, items))
    found = _HOOKS_OF.get(key)
    if found is not None:
        return found
    hooks = frozenset().union(*(
        item.implemented_hooks() if isinstance(item, Processor) else _PHASE_HOOKS
        for item in items))
    per_item = tuple(item.implemented_hooks() if isinstance(item, Processor)
                     and type(item).implemented_hooks is _CLASS_RULE else None
                     for item in items)
    # Only the base rule (hooks a class overrides) is per class; a processor that
    # answers implemented_hooks() itself may differ from one instance to the next.
    if all(type(item).implemented_hooks is _CLASS_RULE for item in items
           if isinstance(item, Processor)):
        if len(_HOOKS_OF) >= 1024:  # arrays made per request must not grow this forever
            _HOOKS_OF.clear()
        _HOOKS_OF[key] = (hooks, per_item)
    return hooks, per_item


_CLASS_RULE = Processor.implemented_hooks


def _acts(wf: Any, hook: str) -> bool:
    """Whether a processor workflow has work at ``hook`` (else it is not run at all)."""
    hooks = processor_workflow_hooks(wf)
    return hooks is None or hook in hooks


def _steps(info: StepInfo) -> Sequence[Any]:
    return info.steps if info.steps is not None else ()
