"""The agent's loop as an ordinary workflow, built from builder calls::

    input-processors                       process_input, one node per processor
    dountil(agent-step, finished)          one iteration per model step:
      branch(open → input-step)            (an abort before ends the loop at once)
      branch(proceeds → llm-call)          (a processor retry ends the iteration early;
      branch(proceeds → output-step)        the dountil runs it again)
      branch(has tool calls → tool-calls)
    branch(not tripped → output-processors)
    outcome                                (a map: tripwire / error become the run's status)

The loop's state (``AgentState``) is what flows between the steps and is stored with
the run; the agent, model, tools and processor runners (``AgentDeps``) are handed to
the run by the call, never stored. Each processor stage is drawn as its processors
(``processor:<id>`` nodes; a processor workflow as a nested node; a processor array
given as a function of the request context as one ``dynamic`` node) but runs as one
fast pass of the call's processor runner, with one span per processor under the stage.

``AgentLoop`` is the public handle ``Agent(loop=fn)`` gives ``fn`` to rewire the loop.
"""

from __future__ import annotations

import re
import sys
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import anyio

from procflow.agent.output import StepRecord
from procflow.agent.state import AgentDeps, AgentState, as_state, token_usage
from procflow.agent.structured import check_output
from procflow.errors import APICallError, TripwireError, WorkflowDefinitionError
from procflow.messages import (
    Chunk,
    DataChunk,
    ErrorChunk,
    Finish,
    Message,
    StepFinish,
    StepStart,
    TextDelta,
    ToolCallChunk,
    ToolCallPart,
    ToolResultChunk,
    ToolResultPart,
    TripwireChunk,
)
from procflow.models.base import ModelRequest, model_name
from procflow.models.resolve import resolve_model
from procflow.processors._hooks import StepOverrides
from procflow.processors.args import OutputResult, ProcessorWriter
from procflow.processors.base import Processor
from procflow.processors.step import is_processor_workflow, processor_workflow_hooks
from procflow.records import Usage
from procflow.runtime.tracing import ParentSpan, Span, Tracer
from procflow.steps.context import StepContext
from procflow.steps.step import Step, create_step
from procflow.tools import Tool, ToolContext, ToolSuspended
from procflow.workflows.plan import Entry, StepEntry
from procflow.workflows.workflow import Workflow, create_workflow

if TYPE_CHECKING:
    from procflow.agent.agent import Agent
    from procflow.runtime.execution import Execution, Node, Scope

__all__ = ["LOOP_STEPS", "AgentLoop", "ProcessorStage", "build_loop", "deps_of", "live_deps"]

TOOL_CONCURRENCY = 8
LOOP_STEPS = ("input-processors", "agent-step", "input-step", "llm-call", "output-step",
              "tool-calls", "output-processors")
"""The ids of the loop's own steps and nested workflows."""

live_deps: dict[str, AgentDeps] = {}
"""The deps of the agent calls running in this process, by run id."""

StageFn = Callable[[AgentDeps, AgentState], Awaitable[None]]


def deps_of(ctx: Any, agent: Agent) -> AgentDeps:
    """The deps of the run ``ctx`` belongs to: the call's, or (a stored run continued
    by the studio, say) fresh ones from the agent's defaults."""
    deps = live_deps.get(ctx.run_id)
    if deps is None:
        deps = live_deps[ctx.run_id] = agent.default_deps()
    return deps


def _bind(deps: AgentDeps, tracer: Tracer | None, span: Span | None) -> None:
    deps.ctx.tracer = tracer
    deps.ctx.span = span


# -- stages ---------------------------------------------------------------------------

# A phase none of the call's processors runs is skipped here, not entered: each
# ``run_*`` of a runner is a coroutine, and most calls have few hooks.

async def _input(deps: AgentDeps, state: AgentState) -> None:
    if "process_input" not in deps.inputs.hooks:
        return
    try:
        await deps.inputs.run_input(state.messages)
    except TripwireError as trip:
        await deps.trip(state, trip)


async def _input_step(deps: AgentDeps, state: AgentState) -> None:
    state.retrying = False
    await deps.list_tools()
    current = StepOverrides(deps.model, list(deps.tools.values()), deps.tool_choice)
    if "process_input_step" not in deps.inputs.hooks:
        state.current = current
        return
    try:
        state.current = await deps.inputs.run_input_step(state.messages, state.info(),
                                                         current)
    except TripwireError as trip:
        await _retry_or_trip(deps, state, trip, deps.inputs)


async def _retry_or_trip(deps: AgentDeps, state: AgentState, trip: TripwireError,
                         runner: Any) -> None:
    if runner.can_retry(trip):
        runner.note_retry()
        state.feedback(trip)
        state.retrying = True
    else:
        await deps.trip(state, trip)


async def _output_step(deps: AgentDeps, state: AgentState) -> None:
    record = state.steps[-1]
    if "process_output_step" in deps.outputs.hooks:
        try:
            await deps.outputs.run_output_step(
                state.messages, state.info(), finish_reason=record.finish_reason,
                tool_calls=record.tool_calls, text=record.text, usage=record.usage)
        except TripwireError as trip:
            await _retry_or_trip(deps, state, trip, deps.outputs)
    if deps.output is not None and not (state.retrying or record.tool_calls
                                        or state.tripwire or state.error):
        check_output(deps.output, state, record.text)
    if not state.retrying and state.tripwire is None:
        done = StepFinish(state.step_number, state.finish_reason)
        pipe = deps.pipe
        for out in ((done,) if pipe is not None and pipe.empty
                    else await _through_stream(deps, state, done)):
            if deps.streaming:
                await deps.emit(out)


async def _output_result(deps: AgentDeps, state: AgentState) -> None:
    if "process_output_result" in deps.outputs.hooks:
        text = next((m.text for m in reversed(state.messages.response())
                     if m.role == "assistant"), "")
        try:
            await deps.outputs.run_output_result(state.messages, OutputResult(
                text=text, usage=dict(state.usage), finish_reason=state.finish_reason,
                steps=list(state.steps)))
        except TripwireError as trip:
            await deps.trip(state, trip)
    accepted = deps.ctx.on_accepted
    if accepted and state.tripwire is None and state.error is None:
        for callback in accepted:
            await callback()
        accepted.clear()


class _RunAsOne(Workflow):
    """A workflow drawn as its plan (processors, tools) but run as one node, ``run``."""

    def __init__(self, id: str, description: str, run: Node) -> None:
        super().__init__(id=id, description=description, trace_io=False)
        self._run = run

    def compile(self) -> Sequence[Node]:
        self.compiled = compiled = [self._run]
        return compiled


class ProcessorStage(_RunAsOne):
    """A stage of the loop: drawn as its processors, run as one pass of the call's runner.

    Its entries are the agent's processors for the stage (``processor:<id>`` steps,
    processor workflows as nested nodes, ``dynamic`` for a function of the request
    context), so graphs and exports show them; running it calls ``run`` once, with
    each processor's span under the stage's span.
    """

    def __init__(self, id: str, description: str, agent: Agent, run: StageFn | None,
                 units: Sequence[Any]) -> None:
        async def node(ex: Execution, data: Any, scope: Scope) -> Any:
            state = data if type(data) is AgentState else as_state(data)
            deps = deps_of(ex, agent)
            deps.state = state
            _bind(deps, ex.tracer, scope.span)
            if run is None:  # the model call: it reports its usage as a step does
                await _call_model(_StageContext(ex, scope.span), deps, state)
            else:
                await run(deps, state)
            return state

        # the drawn processors run through the runner's fast path
        super().__init__(id, description, node)
        for unit in units:
            self.then(unit)
        self.commit()


class _StageContext:
    """What the model call needs of a step's context, for a stage: the tracer, the
    stage's span and ``add_usage`` (the run's total and the span's ``usage``)."""

    __slots__ = ("_ex", "span", "tracer")

    def __init__(self, ex: Execution, span: Span | None) -> None:
        self._ex = ex
        self.tracer = ex.tracer
        self.span = span

    def add_usage(self, usage: Usage | Mapping[str, Any]) -> None:
        got = token_usage(usage)
        self._ex.add_usage(got)
        span = self.span
        if span is not None:
            before = (span.attributes or {}).get("usage")
            if before:
                span.set(usage=(got + token_usage(before)).to_dict())
            else:
                counts = got.to_dict()
                # the model call's dict when it says the same (its span holds it too)
                span.set(usage=usage if type(usage) is dict and usage == counts else counts)


def _stage(id: str, description: str, agent: Agent, run: StageFn, units: Sequence[Any],
           idle: Callable[[AgentDeps, AgentState], bool]) -> Step | Workflow:
    """The stage as a ``ProcessorStage`` when it has processors to draw, else one step;
    a call for which ``idle(deps, state)`` holds (no hook of the stage to run) does the
    step's bookkeeping inline, without a span (``Step.inline``)."""
    if units:
        return ProcessorStage(id, description, agent, run, units)
    step = _loop_step(id, description, agent, lambda ctx, deps, state: run(deps, state))

    def inline(ex: Any, data: Any) -> bool:
        deps = live_deps.get(ex.run_id)
        if deps is None or type(data) is not AgentState or not idle(deps, data):
            return False
        deps.state = data
        return True

    step.inline = inline
    return step


def _input_idle(deps: AgentDeps, state: AgentState) -> bool:
    return "process_input" not in deps.inputs.hooks


def _input_step_idle(deps: AgentDeps, state: AgentState) -> bool:
    """``_input_step`` without hooks or toolsets: its bookkeeping, done here."""
    if "process_input_step" in deps.inputs.hooks or deps.agent.toolsets:
        return False
    state.retrying = False
    state.current = StepOverrides(deps.model, list(deps.tools.values()), deps.tool_choice)
    return True


def _output_step_idle(deps: AgentDeps, state: AgentState) -> bool:
    """``_output_step`` with nothing to do: no hook, no answer to check, no "step-finish"
    to send (nobody streams, no stream processor to pass it through)."""
    if deps.streaming or deps.output is not None or "process_output_step" in deps.outputs.hooks:
        return False
    pipe = deps.pipe
    return pipe is None or pipe.empty


def _output_result_idle(deps: AgentDeps, state: AgentState) -> bool:
    return "process_output_result" not in deps.outputs.hooks and not deps.ctx.on_accepted


def _loop_step(id: str, description: str, agent: Agent,
               run: Callable[[StepContext, AgentDeps, AgentState], Awaitable[None]]) -> Step:
    """A step of the loop that runs ``run`` on the call's deps and the loop's state."""
    async def execute(ctx: StepContext) -> AgentState:
        state = as_state(ctx.input_data)
        deps = deps_of(ctx, agent)
        deps.state = state
        _bind(deps, ctx.tracer, ctx.span)
        await run(ctx, deps, state)
        return state

    return _step(id, execute, description)


async def _drawn(ctx: StepContext) -> Any:
    """The body of a node that is drawn but run by its stage (a processor, a tool)."""
    return ctx.input_data


def _units(agent: Agent, items: Any, hook: str, *also: str, workflows: bool = True,
           seen: set[str] | None = None) -> list[Any]:
    """What a stage draws: the processors implementing ``hook`` (or one of ``also``; each
    node lists the hooks of these it implements, the ones that act in the stage;
    processor workflows too unless ``workflows`` is false), or one "dynamic" node for a
    processor array chosen per request. ``seen`` (node ids already drawn in the stage)
    keeps a processor listed by two arrays to one node."""
    seen = set() if seen is None else seen
    if callable(items) and not isinstance(items, Sequence):
        if "dynamic" in seen:
            return []
        seen.add("dynamic")
        return [Step(id="dynamic", execute=_drawn, description="processors chosen per "
                     "request (a function of the request context)")]
    wanted = {hook, *also}
    units: list[Any] = []
    for item in items:
        if isinstance(item, Processor):
            hooks = item.implemented_hooks()
            node_id = f"processor:{item.id}"
            if hooks & wanted and node_id not in seen:
                seen.add(node_id)
                node = Step(id=node_id, execute=_drawn,
                            description=item.description or f"Processor {item.id}",
                            metadata={"hooks": sorted(hooks & wanted),  # those acting here
                                      "processor_id": item.id})
                node.kind = "processor"
                units.append(node)
        elif (workflows and is_processor_workflow(item) and item.id not in seen
              and _acts_in(item, wanted)):
            seen.add(item.id)
            units.append(item)
    return units


def _acts_in(wf: Any, wanted: set[str]) -> bool:
    """Whether a processor workflow has work in a stage (else it is neither drawn nor
    run there)."""
    hooks = processor_workflow_hooks(wf)
    return hooks is None or bool(hooks & wanted)


def _model_call_units(agent: Agent) -> list[Any]:
    """What the model call draws: the processors acting while it runs (llm request and
    response, the output stream, provider errors), each once."""
    seen: set[str] = set()
    return [*_units(agent, agent.input_processors, "process_llm_request",
                    "process_llm_response", "process_api_error", workflows=False, seen=seen),
            *_units(agent, agent.output_processors, "process_output_stream",
                    "process_api_error", workflows=False, seen=seen),
            *_units(agent, agent.error_processors, "process_llm_request",
                    "process_api_error", workflows=False, seen=seen)]


# -- the model call -------------------------------------------------------------------

def _current_tools(deps: AgentDeps, state: AgentState) -> dict[str, Tool]:
    tools = state.current.tools
    if tools is None:
        return deps.tools
    if isinstance(tools, dict):
        return dict(tools)
    return {t.id: t for t in tools}


def _llm_call(agent: Agent) -> Step | Workflow:
    """The model call: a stage drawn as the processors acting during it, else a step."""
    units = _model_call_units(agent)
    if units:
        return ProcessorStage("llm-call", "the model call through the stream processors",
                              agent, None, units)
    return _loop_step("llm-call", "the model call through the stream processors", agent,
                      _call_model)


async def _call_model(ctx: StepContext | _StageContext, deps: AgentDeps,
                      state: AgentState) -> None:
    current = state.current
    model = (deps.model if current.model is None or current.model is deps.model
             else resolve_model(current.model))
    tools = _current_tools(deps, state)
    choice = current.tool_choice
    ml = state.messages
    prompt: list[dict[str, Any]] | None = ml.to_prompt()
    cached: list[Chunk] | None = None
    try:
        for runner in (deps.inputs, deps.errors):
            if "process_llm_request" in runner.hooks and cached is None:
                request = await runner.run_llm_request(prompt or [], ml, state.info(), model)
                prompt, cached = request.prompt, request.response
            if deps.errors is deps.inputs:
                break
    except TripwireError as trip:
        await deps.trip(state, trip)
        return
    prompt = prompt or []
    while True:
        record = StepRecord(step_number=state.step_number,
                            from_cache=cached is not None)
        if deps.streaming:
            await deps.emit(StepStart(state.step_number))
        span = None if ctx.tracer is None else ctx.tracer.start(  # interned: stored traces
            sys.intern(f"model call: {model.provider}/{model.model_id}"), "model", ctx.span,
            input=prompt)
        call = ModelRequest(prompt=prompt, tools=[t.spec() for t in tools.values()] or None,
                            tool_choice=choice if tools else None,
                            output_schema=None if deps.output is None
                            else deps.output.spec.schema)
        try:
            chunks = await _consume(deps, state, record, model, cached, call)
        except APICallError as err:
            if span is not None:
                _trace_call(span, call)
                Tracer.end(span, "failed", error=err, status_code=err.status_code,
                           retryable=err.is_retryable)
            if deps.api_retries < deps.api_retry_budget and await _wants_retry(deps, state,
                                                                               err):
                deps.api_retries += 1
                prompt = ml.to_prompt()
                continue
            state.error = err
            state.finish_reason = "error"
            return
        record.model = call.answered_by or model_name(model)
        record.fallbacks = [f.to_dict() for f in call.fallbacks]
        if span is not None:
            _trace_call(span, call)
            Tracer.end(span, "tripwire" if state.tripwire else "success", output=record.text,
                       usage=record.usage, finish_reason=record.finish_reason,
                       from_cache=record.from_cache, tool_calls=len(record.tool_calls),
                       latency_ms=round((time.time() - span.start) * 1000, 3))
        if record.usage:  # a step's context reads any mapping; these counts are plain
            ctx.add_usage(record.usage if type(ctx) is _StageContext
                          else token_usage(record.usage))
        break
    if "process_llm_response" in deps.inputs.hooks:
        try:
            await deps.inputs.run_llm_response(chunks, ml, state.info(), model,
                                               from_cache=record.from_cache)
        except TripwireError as trip:
            await deps.trip(state, trip)
    _record_response(state, record)


def _trace_call(span: Span, call: ModelRequest) -> None:
    """Put the provider retries the model made, and the models that failed before
    one answered (``FallbackModel``), on the model-call span."""
    if call.retries:
        span.set(provider_retries=len(call.retries),
                 retry_delay=round(sum(r.delay for r in call.retries), 3),
                 retry_events=[r.to_dict() for r in call.retries])
    if call.fallbacks:
        span.set(fallbacks=[f.to_dict() for f in call.fallbacks])
    if call.answered_by is not None:
        span.set(answered_by=call.answered_by)


async def _wants_retry(deps: AgentDeps, state: AgentState, err: APICallError) -> bool:
    info = state.info()
    for runner in (deps.errors, deps.inputs, deps.outputs):
        if await runner.run_api_error(err, state.messages, info):
            return True
    return False


async def _consume(deps: AgentDeps, state: AgentState, record: StepRecord, model: Any,
                   cached: list[Chunk] | None, request: ModelRequest) -> list[Chunk]:
    """Pass the model's (or the cache's) chunks through the stream processors to the
    caller; returns the raw chunks.

    The stream processors see every chunk, the model's "finish" too (the caller gets
    one "finish" at the end of the whole call, so a processed "finish" is not passed
    on); a stream that ends without one gets one, so windows and batches are always
    flushed. The hot path of a step (one pass per streamed chunk): each chunk takes the
    pipeline's one loop (``StreamPipeline.process``), and what it lets through is handled
    here, inline.
    """
    pipe = deps.pipe = deps.outputs.output_stream(state.messages)
    process = None if pipe.empty else pipe.process
    emit = deps.emit if deps.streaming else None
    raw: list[Chunk] = []
    texts: list[str] = []  # the step's text pieces (joined at the end)
    started = time.time()
    finished = process is None  # no processor: no finish of our own to send through
    last = False
    stream: Any = _replay(cached) if cached is not None else model.stream(request)
    next_chunk = aiter(stream).__anext__
    try:
        while True:
            try:
                chunk = await next_chunk()
            except StopAsyncIteration:
                if finished or pipe.tripwire is not None:
                    break
                # The stream ended without a "finish": one goes through the stages so
                # that each releases what it holds (the finish itself is dropped below).
                finished = last = True
                chunk = Finish(None)
            else:
                raw.append(chunk)
                if process is None and type(chunk) is TextDelta:  # the usual chunk
                    texts.append(chunk.text)
                    if emit is not None:
                        await emit(chunk)
                    continue
                if isinstance(chunk, TextDelta):
                    pass
                elif isinstance(chunk, Finish):
                    record.finish_reason = chunk.finish_reason
                    record.usage = state.add_usage(chunk.usage)
                    if process is None:
                        continue
                    finished = True
                elif isinstance(chunk, ErrorChunk):
                    error = chunk.error
                    raise error if isinstance(error, APICallError) else APICallError(str(error))
            outs: Sequence[Chunk] = (chunk,) if process is None else await process(chunk)
            for out in outs:
                if isinstance(out, TextDelta):
                    texts.append(out.text)
                elif isinstance(out, TripwireChunk) and pipe.tripwire is not None:
                    raw.append(out)  # process_llm_response sees the step was tripped
                    await deps.trip(state, pipe.tripwire)
                    return raw
                elif isinstance(out, ToolCallChunk):
                    record.tool_calls.append({"tool_call_id": out.tool_call_id,
                                              "tool_name": out.tool_name,
                                              "args": dict(out.args)})
                elif isinstance(out, Finish):
                    continue
                if emit is not None:
                    await emit(out)
            if last:
                break
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()
        pipe.record_spans(started)
        record.text = "".join(texts)
    return raw


async def _through_stream(deps: AgentDeps, state: AgentState, chunk: Chunk, *,
                          from_tool: bool = False) -> list[Chunk]:
    """A chunk made after the model call ("step-finish", a tool's "data-*") through the
    output stream processors; a processor's abort ends the call. Chunks of tools
    (``from_tool``), which run concurrently, take the pipeline one at a time."""
    pipe = deps.pipe
    if pipe is None:
        pipe = deps.pipe = deps.outputs.output_stream(state.messages)
    if pipe.empty:
        return [chunk]
    if from_tool:
        lock = deps.data_lock
        if lock is None:
            lock = deps.data_lock = anyio.Lock()
        async with lock:
            outs = await pipe.process(chunk)
    else:  # "step-finish": the output step runs alone, before any tool
        outs = await pipe.process(chunk)
    kept: list[Chunk] = []
    for out in outs:
        if isinstance(out, TripwireChunk) and pipe.tripwire is not None:
            await deps.trip(state, pipe.tripwire)
        else:
            kept.append(out)
    return kept


def _data_writer(deps: AgentDeps, state: AgentState, call_id: str) -> ProcessorWriter:
    """The writer a tool gets: its "data-*" chunks go through the output stream
    processors that take data parts, then to the caller and onto the tool's message
    (``content.metadata["data"]``, so ``generate()`` has them too)."""
    async def send(chunk: Chunk) -> None:
        for out in await _through_stream(deps, state, chunk, from_tool=True):
            if isinstance(out, DataChunk):
                deps.tool_data.setdefault(call_id, []).append({"type": out.type,
                                                               "data": out.data})
            await deps.emit(out)
    return ProcessorWriter(send)


async def _replay(chunks: list[Chunk]) -> AsyncIterator[Chunk]:
    for chunk in chunks:
        yield chunk


def _record_response(state: AgentState, record: StepRecord) -> None:
    calls = [ToolCallPart(tool_call_id=c["tool_call_id"], tool_name=c["tool_name"],
                          args=dict(c.get("args") or {})) for c in record.tool_calls]
    if record.text:
        msg = Message.assistant(record.text)
        if calls:
            msg.content.parts += calls
        state.messages.add(msg, source="response")
    elif calls:
        state.messages.add(Message.of_parts("assistant", calls), source="response")
    state.steps.append(record)
    state.finish_reason = record.finish_reason
    state.pending_calls = [] if state.tripwire is not None else list(record.tool_calls)


# -- tool calls -----------------------------------------------------------------------

def _tool_calls(agent: Agent) -> Step | Workflow:
    runner = _loop_step("tool-calls", "the step's tool calls, concurrently (suspends for "
                        "approval)", agent, _run_tools)
    tools = _tool_nodes(agent)
    if not tools:
        return runner

    async def node(ex: Execution, data: Any, scope: Scope) -> Any:
        from procflow.runtime.step_runner import run_unit

        return await run_unit(ex, runner, data, scope, path=scope.prefix + "run")

    # drawn as its tools; run as one step over the calls
    stage = _RunAsOne("tool-calls", "the step's tool calls, concurrently", node)
    return (stage.then(tools[0]) if len(tools) == 1 else stage.parallel(tools)).commit()


MAX_DRAWN_TOOLS = 6
"""Tools of one processor drawn one by one; the rest are one "more tools" node."""


def _tool_nodes(agent: Agent) -> list[Step]:
    """What the tool step draws: the agent's tools, then the tools its input processors
    may add (``Processor.offered_tools()``: a tool search's meta-tools and searchable
    tools), each once; past ``MAX_DRAWN_TOOLS`` of one processor, one node says how
    many more there are."""
    nodes = [_tool_node(t) for t in agent.tools.values()]
    drawn = set(agent.tools)
    items = agent.input_processors
    for item in items if isinstance(items, Sequence) else ():
        if not isinstance(item, Processor):
            continue
        offered = [t for t in item.offered_tools() if t.id not in drawn]
        drawn.update(t.id for t in offered)
        shown = offered if len(offered) <= MAX_DRAWN_TOOLS else offered[:MAX_DRAWN_TOOLS - 1]
        nodes += [_tool_node(t, f" (added by processor {item.id})") for t in shown]
        rest = offered[len(shown):]
        if rest:
            node = Step(id=f"tools:{item.id}", execute=_drawn, description=(
                f"{len(rest)} more tools added by processor {item.id}: "
                f"{', '.join(t.id for t in rest[:5])}{', …' if len(rest) > 5 else ''}"))
            node.kind = "tool"
            nodes.append(node)
    for toolset in agent.toolsets:  # an MCP server's tools are listed as the agent runs
        node = Step(id=f"toolset:{re.sub(r'[^A-Za-z0-9_:/-]', '_', toolset.id)}",
                    execute=_drawn, description=f"{toolset!r}: its tools, listed as the "
                    "agent runs")
        node.kind = "tool"
        nodes.append(node)
    return nodes


def _tool_node(t: Tool, note: str = "") -> Step:
    if t.requires_approval:
        note = " (needs approval)" + note
    node = Step(id=f"tool:{t.id}", execute=_drawn,
                description=(t.description.splitlines() or [""])[0] + note)
    node.kind = "tool"
    return node


async def _run_tools(ctx: StepContext, deps: AgentDeps, state: AgentState) -> None:
    calls = state.pending_calls
    await deps.list_tools()  # a resumed run did not list them in this process
    tools = _current_tools(deps, state)
    resumed = ctx.resume_data if isinstance(ctx.resume_data, dict) else {}
    for key, verdict in (("approve", "approve"), ("deny", "deny")):
        for call_id in resumed.get(key) or []:
            state.decisions[str(call_id)] = verdict
    waiting = [c for c in calls if (t := tools.get(c["tool_name"])) is not None
               and t.requires_approval and c["tool_call_id"] not in state.decisions]
    if waiting:
        await ctx.suspend({"reason": "approval", "suspended": [
            {"tool_call_id": c["tool_call_id"], "tool_name": c["tool_name"],
             "args": dict(c.get("args") or {})} for c in waiting]})
    done: dict[str, Any] = dict(resumed.get("done") or {})
    results: list[tuple[Any, bool] | None] = [None] * len(calls)
    suspended: list[dict[str, Any]] = []
    async def run(i: int, call: dict[str, Any]) -> None:
        call_id = call["tool_call_id"]
        if call_id in done:
            value, is_error = done[call_id]
            results[i] = (value, bool(is_error))
            return
        try:
            results[i] = await _one_tool(ctx, deps, state, tools, call,
                                         resumed.get("resume_data"))
        except ToolSuspended as sus:
            suspended.append({"tool_call_id": call_id, "tool_name": call["tool_name"],
                              "args": dict(call.get("args") or {}), "payload": sus.payload})

    if len(calls) == 1:  # alone: no limiter (acquiring one yields to the event loop)
        await run(0, calls[0])
    else:
        limiter = anyio.CapacityLimiter(TOOL_CONCURRENCY)

        async def one(i: int, call: dict[str, Any]) -> None:
            async with limiter:
                await run(i, call)

        try:
            async with anyio.create_task_group() as tg:
                for i, call in enumerate(calls):
                    tg.start_soon(one, i, call)
        except BaseExceptionGroup as group:
            raise group.exceptions[0] from None
    if suspended:
        await ctx.suspend({"reason": "tool", "suspended": suspended, "done": {
            calls[i]["tool_call_id"]: list(r) for i, r in enumerate(results)
            if r is not None}})
    for call, got in zip(calls, results, strict=True):
        assert got is not None
        value, is_error = got
        part = ToolResultPart(tool_call_id=call["tool_call_id"], tool_name=call["tool_name"],
                              result=value, is_error=is_error, model_output=_model_output(
                                  tools.get(call["tool_name"]), value, is_error))
        msg = Message.tool([part])
        data = deps.tool_data.pop(part.tool_call_id, None)
        if data:
            msg.content.metadata["data"] = data
        state.messages.add(msg, source="response")
        state.steps[-1].tool_results.append({"tool_call_id": part.tool_call_id,
                                             "tool_name": part.tool_name, "result": value,
                                             "is_error": is_error})
        # An approval or denial answers this call only: a later call that reuses its id
        # (a provider numbering each response's calls from 1, a model scripted anew in
        # another process) waits for a decision of its own.
        state.decisions.pop(call["tool_call_id"], None)
    state.pending_calls = []
    state.step_number += 1


def _suspend_payload(ctx: StepContext, call_id: str, resume_data: Any) -> Any:
    """What the call passed to ``ctx.suspend()`` before this resume, else ``None``."""
    stored = ctx.suspend_payload if resume_data is not None else None
    if isinstance(stored, Mapping):
        for item in stored.get("suspended") or ():
            if isinstance(item, Mapping) and item.get("tool_call_id") == call_id:
                return item.get("payload")
    return None


def _usage_adder(ctx: StepContext, state: AgentState) -> Callable[[Mapping[str, Any]], None]:
    """A tool's own tokens (a sub-agent's) into the call's usage and the run's."""
    def add(usage: Mapping[str, Any]) -> None:
        ctx.add_usage(state.add_usage(usage))
    return add


def _model_output(tool: Any, value: Any, is_error: bool) -> Any:
    if tool is None or is_error or tool.to_model_output is None:
        return None
    return tool.to_model_output(value)


async def _one_tool(ctx: StepContext, deps: AgentDeps, state: AgentState,
                    tools: dict[str, Tool], call: dict[str, Any],
                    resume_data: Any) -> tuple[Any, bool]:
    name, call_id = call["tool_name"], call["tool_call_id"]
    tool = tools.get(name)
    args = dict(call.get("args") or {})
    span = None if ctx.tracer is None else ctx.tracer.start(
        f"tool call: {name}", "tool", ctx.span, input=args)
    value: Any
    if tool is None:
        value = f"unknown tool '{name}'; available tools: {sorted(tools)}"
        is_error = True
    elif state.decisions.get(call_id) == "deny":
        value = f"the user denied the call of tool '{name}'; it did not run"
        is_error = True
    else:
        try:
            value = await tool.run(args, ToolContext(
                call_id, deps.ctx.request_context, _data_writer(deps, state, call_id),
                resume_data, _suspend_payload(ctx, call_id, resume_data), ctx.run_id,
                ParentSpan.of(ctx.tracer, span), _usage_adder(ctx, state)))
        except ToolSuspended:
            if span is not None:
                Tracer.end(span, "suspended")
            raise
        except TripwireError:
            if span is not None:
                Tracer.end(span, "tripwire")
            raise
        except Exception as exc:
            value, is_error = f"{type(exc).__name__}: {exc}", True
        else:
            try:
                value = await _guard_tool_result(deps, state, name, call_id, args, value)
                is_error = False
            except TripwireError as trip:
                return await _blocked(deps, state, span, name, call_id, value, trip)
            except Exception as exc:
                value, is_error = f"{type(exc).__name__}: {exc}", True
    if span is not None:
        Tracer.end(span, "failed" if is_error else "success", output=value,
                   tool_call_id=call_id, error=value if is_error else None,
                   **(tool.attributes if tool is not None else {}))
    await deps.emit(ToolResultChunk(call_id, name, value, is_error))
    return value, is_error


async def _guard_tool_result(deps: AgentDeps, state: AgentState, name: str, call_id: str,
                             args: dict[str, Any], value: Any) -> Any:
    """The tool's result after ``process_tool_result`` of the input processors (the
    result is the next model call's input: the guards there read it), then of the
    output processors."""
    for runner in (deps.inputs, deps.outputs):
        if "process_tool_result" in runner.hooks:
            value = await runner.run_tool_result(state.messages, state.info(), tool_name=name,
                                                 tool_call_id=call_id, args=args, result=value)
    return value


async def _blocked(deps: AgentDeps, state: AgentState, span: Any, name: str, call_id: str,
                   raw: Any, trip: TripwireError) -> tuple[Any, bool]:
    """A processor aborted on a tool's result: the run ends with the tripwire (as an abort
    in any other hook does), the model and the caller get a placeholder, and the raw
    result stays in the trace for the operator, marked as blocked."""
    await deps.trip(state, trip)
    if span is not None:
        Tracer.end(span, "tripwire", output=raw, tool_call_id=call_id, blocked=True,
                   blocked_by=trip.processor_id, reason=trip.reason)
    value = (f"the result of tool '{name}' was blocked by processor "
             f"'{trip.processor_id}': {trip.reason}")
    await deps.emit(ToolResultChunk(call_id, name, value, True))
    return value, True


# -- the graph ------------------------------------------------------------------------

def _step(id: str, execute: Any, description: str | None = None) -> Step:
    # Loop steps pass the mutable state along: keep it off their trace spans.
    return create_step(id=id, execute=execute, description=description, trace_io=False)


# The conditions run several times per model step: the state is read without a call
# when it is the live object (``as_state`` rebuilds a stored one).

def _open(ctx: StepContext) -> bool:
    state = ctx.input_data
    if type(state) is not AgentState:
        state = as_state(state)
    return state.tripwire is None and state.error is None


def _proceeds(ctx: StepContext) -> bool:
    state = ctx.input_data
    if type(state) is not AgentState:
        state = as_state(state)
    return state.tripwire is None and state.error is None and not state.retrying


def _has_calls(ctx: StepContext) -> bool:
    state = ctx.input_data
    if type(state) is not AgentState:
        state = as_state(state)
    return (bool(state.pending_calls) and state.tripwire is None and state.error is None
            and not state.retrying)


def _finished(agent: Agent) -> Callable[[StepContext], bool]:
    def finished(ctx: StepContext) -> bool:
        state = as_state(ctx.input_data)
        deps = deps_of(ctx, agent)
        return (state.finished or state.step_number >= deps.max_steps
                or deps.handoff is not None)
    return finished


def _not_tripped(ctx: StepContext) -> bool:
    state = ctx.input_data
    if type(state) is not AgentState:
        state = as_state(state)
    return state.tripwire is None


def _outcome(ctx: StepContext) -> AgentState:
    """The run's status from the state: a tripwire ends it "tripwire", an error "failed"."""
    state = as_state(ctx.input_data)
    if state.tripwire is not None:
        raise TripwireError.from_dict(state.tripwire)
    if state.error is not None:
        raise state.error
    return state


def build_loop(agent: Agent) -> Workflow:
    """The (uncommitted) loop workflow of ``agent``, drawn with its processors and tools."""
    # The agent holds its workflow: the workflow's steps hold the agent weakly (no cycle).
    agent = cast("Agent", weakref.proxy(agent))
    inputs, outputs = agent.input_processors, agent.output_processors
    step = (create_workflow(id="agent-step", description="one model step", trace_io=False)
            .when(_open, _stage("input-step", "input-step processors and prepare_step",
                                agent, _input_step,
                                _units(agent, inputs, "process_input_step"),
                                _input_step_idle),
                  label="not stopped")
            .when(_proceeds, _llm_call(agent), label="not stopped, no retry")
            .when(_proceeds, _stage("output-step", "output-step processors (may ask for a "
                                    "retry)", agent, _output_step,
                                    _units(agent, outputs, "process_output_step"),
                                    _output_step_idle),
                  label="not stopped, no retry")
            .when(_has_calls, _tool_calls(agent), label="tool calls to run")
            .commit())
    return (create_workflow(id=f"agent:{agent.id}", description=f"loop of agent {agent.id}",
                            trace_io=False)
            .then(_stage("input-processors", "input processors", agent, _input,
                         _units(agent, inputs, "process_input"), _input_idle))
            .dountil(step, _finished(agent))
            .when(_not_tripped, _stage("output-processors", "output-result processors",
                                       agent, _output_result,
                                       _units(agent, outputs, "process_output_result"),
                                       _output_result_idle),
                  label="no tripwire")
            .map(_outcome, id="outcome"))


# -- rewiring -------------------------------------------------------------------------

class AgentLoop:
    """The uncommitted loop workflow, to rewire through ``Agent(loop=fn)``.

    ``fn(loop)`` gets one of these and returns it. Steps are named by id, anywhere in
    the loop (``loop.step_ids()`` lists them). A step you add is an ordinary procflow
    step whose input is the loop's ``AgentState`` and which returns it.

    Example::

        def audited(loop: AgentLoop) -> AgentLoop:
            return loop.insert_after("llm-call", audit_step)

        agent = Agent(id="support", model=..., loop=audited)
    """

    def __init__(self, workflow: Workflow) -> None:
        self.workflow = workflow

    def step_ids(self) -> list[str]:
        """Every step id of the loop, nested ones included, in plan order."""
        out: list[str] = []

        def walk(wf: Workflow) -> None:
            for entry in wf.entries:
                for unit in entry.units():
                    out.append(unit.id)
                    if isinstance(unit, Workflow) and not isinstance(unit, _RunAsOne):
                        walk(unit)
        walk(self.workflow)
        return out

    def insert_before(self, id: str, step: Any) -> AgentLoop:
        """Run ``step`` just before the step ``id`` (on the same state)."""
        return self._edit(id, lambda entries, i: entries.insert(i, _entry(step)))

    def insert_after(self, id: str, step: Any) -> AgentLoop:
        """Run ``step`` just after the step ``id`` (on the state it returns)."""
        return self._edit(id, lambda entries, i: entries.insert(i + 1, _entry(step)))

    def replace(self, id: str, step: Any) -> AgentLoop:
        """Run ``step`` instead of the step ``id``."""
        new = _entry(step).step

        def put(entries: list[Entry], i: int) -> None:
            entries[i] = entries[i].with_unit(id, new)
        return self._edit(id, put)

    def remove(self, id: str) -> AgentLoop:
        """Leave the step ``id`` out of the loop."""
        return self._edit(id, lambda entries, i: entries.pop(i))

    def _edit(self, id: str, change: Callable[[list[Any], int], Any]) -> AgentLoop:
        """Apply ``change`` to the entries of the workflow holding step ``id``: that
        workflow and each one around it are rebuilt (``Workflow.with_entries``), so no
        committed workflow is changed."""
        path = _locate(self.workflow, id)
        if path is None:
            raise WorkflowDefinitionError(
                f"agent loop '{self.workflow.id}' has no step '{id}'; its steps: "
                f"{self.step_ids()}", workflow_id=self.workflow.id, step_id=id)
        wf, i = path[-1]
        entries = list(wf.entries)
        change(entries, i)
        if not entries:
            raise WorkflowDefinitionError(
                f"agent loop: removing '{id}' leaves '{wf.id}' empty; replace it instead",
                workflow_id=wf.id, step_id=id)
        new = wf.with_entries(entries)
        for outer, j in reversed(path[:-1]):
            inner = new.commit()
            entries = list(outer.entries)
            entries[j] = entries[j].with_unit(inner.id, inner)
            new = outer.with_entries(entries)
        self.workflow = new
        return self


def _entry(step: Any) -> StepEntry:
    if isinstance(step, Step | Workflow):
        return StepEntry(step)
    raise WorkflowDefinitionError(
        f"agent loop: expected a step (create_step(...)/@step) or a workflow, got "
        f"{type(step).__name__} {step!r}")


def _locate(wf: Workflow, id: str) -> list[tuple[Workflow, int]] | None:
    """The workflows from ``wf`` down to the one whose entries hold step ``id``, each
    with the index of the entry that leads on (the last: the entry holding the step)."""
    for i, entry in enumerate(wf.entries):
        units = entry.units()
        if any(u.id == id for u in units):
            return [(wf, i)]
        for unit in units:
            if isinstance(unit, Workflow) and not isinstance(unit, _RunAsOne):
                found = _locate(unit, id)
                if found is not None:
                    return [(wf, i), *found]
    return None
