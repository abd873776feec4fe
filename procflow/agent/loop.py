"""The agent's loop as an ordinary workflow.

    input-processors
    → dountil(agent-step: prepare-step → llm-call → output-step → tool-calls, done)
    → output-processors → memory-save

Each ``generate``/``stream`` call is one run of it, carrying an ``AgentRun``. Steps
never let a tripwire or provider error escape: they record it on the ``AgentRun`` and
mark it done, so output processors and the memory save run on every terminal path.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from procflow.agent.output import StepRecord
from procflow.agent.state import AgentRun
from procflow.errors import APICallError, TripWire
from procflow.messages import Chunk, Message, ToolCallPart, ToolResultPart
from procflow.models.base import ModelRequest
from procflow.models.resolve import resolve_model
from procflow.processors._hooks import StepOverrides
from procflow.processors.args import OutputResult
from procflow.runtime.tracing import Tracer
from procflow.steps.context import StepContext
from procflow.steps.step import create_step
from procflow.storage.null import NullStorage
from procflow.tools import ToolContext
from procflow.workflows.workflow import Workflow, create_workflow

__all__ = ["build_loop_workflow"]

TOOL_CONCURRENCY = 8


def _bind(ctx: StepContext) -> AgentRun:
    """The run, with processor spans going under this step's span."""
    run: AgentRun = ctx.input_data
    run.ctx.tracer = ctx.tracer
    run.ctx.span = ctx.span
    return run


async def _input_processors(ctx: StepContext) -> AgentRun:
    run = _bind(ctx)
    try:
        await run.inputs.run_input(run.ml)
    except TripWire as trip:
        await run.trip(trip)
    return run


async def _prepare_step(ctx: StepContext) -> AgentRun:
    run = _bind(ctx)
    run.redo = False
    if run.done:
        return run
    try:
        run.current = await run.inputs.run_input_step(
            run.ml, run.info(), StepOverrides(run.model, list(run.tools.values()),
                                              run.tool_choice))
    except TripWire as trip:
        await _retry_or_trip(run, trip, run.inputs.can_retry(trip), run.inputs.note_retry)
    return run


async def _retry_or_trip(run: AgentRun, trip: TripWire, can_retry: bool,
                         note: Any) -> None:
    if can_retry:
        note()
        run.feedback(trip)
        run.redo = True
    else:
        await run.trip(trip)


def _current_tools(run: AgentRun) -> dict[str, Any]:
    tools = run.current.tools
    if tools is None:
        return run.tools
    if isinstance(tools, dict):
        return dict(tools)
    return {t.id: t for t in tools}


async def _llm_call(ctx: StepContext) -> AgentRun:
    run = _bind(ctx)
    if run.done or run.redo:
        return run
    model = run.model if run.current.model is None else resolve_model(run.current.model)
    tools = _current_tools(run)
    choice = run.current.tool_choice
    info = run.info()
    request = await run.inputs.run_llm_request(run.ml.to_prompt(), run.ml, info, model)
    if request.response is None and run.errors is not run.inputs:
        request = await run.errors.run_llm_request(request.prompt or [], run.ml, info, model)
    prompt = request.prompt or []
    while True:
        record = StepRecord(step_number=run.step_number, from_cache=request.response is not None)
        if run.streaming:
            await run.emit(Chunk("step-start", {"step_number": run.step_number}))
        span = None if ctx.tracer is None else ctx.tracer.start(
            f"model call: {model.provider}/{model.model_id}", "model", ctx.span, input=prompt)
        try:
            chunks = await _consume(run, record, model, request.response, ModelRequest(
                prompt=prompt, tools=[t.spec() for t in tools.values()] or None,
                tool_choice=choice if tools else None))
        except APICallError as err:
            if span is not None:
                Tracer.end(span, "failed", error=err, status_code=err.status_code,
                           retryable=err.is_retryable)
            if run.api_retries < run.api_retry_budget and await _wants_retry(run, err):
                run.api_retries += 1
                prompt = run.ml.to_prompt()
                continue
            run.error = err
            run.finish_reason = "error"
            run.done = True
            return run
        if span is not None:
            Tracer.end(span, "tripwire" if run.tripwire else "success", output=record.text,
                       usage=record.usage, finish_reason=record.finish_reason,
                       from_cache=record.from_cache, tool_calls=len(record.tool_calls),
                       latency_ms=round((time.time() - span.start) * 1000, 3))
        break
    await run.inputs.run_llm_response(chunks, run.ml, info, model,
                                      from_cache=record.from_cache)
    _record_response(run, record)
    return run


async def _wants_retry(run: AgentRun, err: APICallError) -> bool:
    info = run.info()
    for runner in (run.errors, run.inputs, run.outputs):
        if await runner.run_api_error(err, run.ml, info):
            return True
    return False


async def _consume(run: AgentRun, record: StepRecord, model: Any, cached: list[Chunk] | None,
                   request: ModelRequest) -> list[Chunk]:
    """Pass the model's (or the cache's) chunks through the stream processors to the
    caller; returns the raw chunks.

    The hot path of a step (one pass per streamed chunk), so the work per chunk is
    inlined here rather than spread over helpers.
    """
    pipe = run.outputs.output_stream(run.ml)
    process = None if pipe.empty else pipe.process
    emit = run.emit if run.streaming else None
    raw: list[Chunk] = []
    texts = record.texts
    started = time.time()
    stream: Any = _replay(cached) if cached is not None else model.stream(request)
    try:
        async for chunk in stream:
            raw.append(chunk)
            kind = chunk.type
            if kind == "finish":
                payload = chunk.payload
                record.finish_reason = payload.get("finish_reason")
                record.usage = run.add_usage(payload.get("usage"))
                continue
            if kind == "error":
                error = chunk.payload.get("error")
                raise error if isinstance(error, APICallError) else APICallError(str(error))
            for out in ((chunk,) if process is None else await process(chunk)):
                kind = out.type
                if kind == "text-delta":
                    texts.append(out.payload["text"])
                elif kind == "tripwire" and pipe.tripwire is not None:
                    raw.append(out)  # process_llm_response sees the step was tripped
                    await run.trip(pipe.tripwire)
                    return raw
                elif kind == "tool-call":
                    record.tool_calls.append(dict(out.payload))
                if emit is not None:
                    await emit(out)
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()
        pipe.record_spans(started)
        record.text = "".join(texts)
    return raw


async def _replay(chunks: list[Chunk]) -> AsyncIterator[Chunk]:
    for chunk in chunks:
        yield chunk


def _record_response(run: AgentRun, record: StepRecord) -> None:
    calls = [ToolCallPart(tool_call_id=c["tool_call_id"], tool_name=c["tool_name"],
                          args=dict(c.get("args") or {})) for c in record.tool_calls]
    if record.text:
        msg = Message.assistant(record.text)
        if calls:
            msg.content.parts += calls
        run.ml.add(msg, source="response")
    elif calls:
        run.ml.add(Message.of_parts("assistant", calls), source="response")
    run.steps.append(record)
    run.finish_reason = record.finish_reason
    run.pending_calls = list(record.tool_calls)


async def _output_step(ctx: StepContext) -> AgentRun:
    run = _bind(ctx)
    if run.done or run.redo or not run.steps:
        return run
    record = run.steps[-1]
    try:
        await run.outputs.run_output_step(
            run.ml, run.info(), finish_reason=record.finish_reason,
            tool_calls=record.tool_calls, text=record.text, usage=record.usage)
    except TripWire as trip:
        await _retry_or_trip(run, trip, run.outputs.can_retry(trip), run.outputs.note_retry)
    return run


async def _tool_calls(ctx: StepContext) -> AgentRun:
    run = _bind(ctx)
    if run.done or run.redo:
        return run
    if run.streaming:
        await run.emit(Chunk("step-finish", {"step_number": run.step_number,
                                             "finish_reason": run.finish_reason}))
    calls, run.pending_calls = run.pending_calls, []
    if not calls:
        run.done = True
        return run
    tools_run = _TOOLS_WORKFLOW.create_run(storage=_NULL, durability="exit", tracing=False)
    tools_run.internal = True
    if ctx.tracer is not None and ctx.span is not None:
        tools_run.trace_parent = (ctx.tracer, ctx.span)
    result = await tools_run.start(input_data=[(run, call) for call in calls])
    if result.status == "tripwire" and isinstance(result.error, TripWire):
        await run.trip(result.error)
        return run
    if result.status != "success":
        run.error = result.error
        run.finish_reason = "error"
        run.done = True
        return run
    tools = _current_tools(run)  # the step's tools: a processor may have added some
    for call, (value, is_error) in zip(calls, result.result, strict=True):
        part = ToolResultPart(tool_call_id=call["tool_call_id"], tool_name=call["tool_name"],
                              result=value, is_error=is_error, model_output=_model_output(
                                  tools.get(call["tool_name"]), value, is_error))
        run.ml.add(Message.tool([part]), source="response")
        run.steps[-1].tool_results.append({"tool_call_id": part.tool_call_id,
                                           "tool_name": part.tool_name, "result": value,
                                           "is_error": is_error})
    run.step_number += 1
    if run.step_number >= run.max_steps:
        run.done = True
    return run


def _model_output(tool: Any, value: Any, is_error: bool) -> Any:
    if tool is None or is_error or tool.to_model_output is None:
        return None
    return tool.to_model_output(value)


async def _one_tool(ctx: StepContext) -> tuple[Any, bool]:
    run, call = ctx.input_data
    name, call_id = call["tool_name"], call["tool_call_id"]
    tools = _current_tools(run)
    tool = tools.get(name)
    args = dict(call.get("args") or {})
    span = None if ctx.tracer is None else ctx.tracer.start(
        f"tool call: {name}", "tool", ctx.span, input=args)
    if tool is None:
        value: Any = f"unknown tool '{name}'; available tools: {sorted(tools)}"
        is_error = True
    else:
        try:
            value = await tool.run(args, ToolContext(call_id, run.ctx.request_context,
                                                     run.ctx.writer))
            value = await run.outputs.run_tool_result(
                run.ml, run.info(), tool_name=name, tool_call_id=call_id, args=args,
                result=value)
            is_error = False
        except TripWire:
            raise
        except Exception as exc:
            value, is_error = f"{type(exc).__name__}: {exc}", True
    if span is not None:
        Tracer.end(span, "failed" if is_error else "success", output=value,
                   tool_call_id=call_id, error=value if is_error else None)
    await run.emit(Chunk("tool-result", {"tool_call_id": call_id, "tool_name": name,
                                         "result": value, "is_error": is_error}))
    return value, is_error


async def _output_processors(ctx: StepContext) -> AgentRun:
    run = _bind(ctx)
    if run.tripwire is not None or not run.outputs.items:
        return run
    text = next((m.text for m in reversed(run.ml.response()) if m.role == "assistant"), "")
    try:
        await run.outputs.run_output_result(run.ml, OutputResult(
            text=text, usage=dict(run.usage), finish_reason=run.finish_reason,
            steps=list(run.steps)))
    except TripWire as trip:
        await run.trip(trip)
    return run


async def _memory_save(ctx: StepContext) -> AgentRun:
    run: AgentRun = ctx.input_data
    memory = run.agent.memory
    if memory is not None and run.tripwire is None and hasattr(memory, "save_run"):
        await memory.save_run(run)
    return run


_NULL = NullStorage()


def _step(id: str, execute: Any, description: str | None = None) -> Any:
    # Loop steps pass the mutable AgentRun along: keep it off their trace spans.
    return create_step(id=id, execute=execute, description=description, trace_io=False)


_TOOLS_WORKFLOW = (create_workflow(id="agent-tool-calls", trace_io=False)
                   .foreach(_step("tool-call", _one_tool), concurrency=TOOL_CONCURRENCY)
                   .commit())


def done(ctx: StepContext) -> bool:
    """The loop's exit: a final answer, max steps, a tripwire or an error."""
    return bool(ctx.input_data.done)


def build_loop_workflow(agent_id: str) -> Workflow:
    """The loop workflow of one agent (its shape is the same for every agent)."""
    step = (create_workflow(id="agent-step", trace_io=False)
            .then(_step("prepare-step", _prepare_step, "input-step processors and prepare_step"))
            .then(_step("llm-call", _llm_call, "the model call through the stream processors"))
            .then(_step("output-step", _output_step,
                        "output-step processors (may ask for a retry)"))
            .then(_step("tool-calls", _tool_calls, "the step's tool calls, concurrently"))
            .commit())
    return (create_workflow(id=f"agent:{agent_id}", description=f"loop of agent {agent_id}",
                            trace_io=False)
            .then(_step("input-processors", _input_processors))
            .dountil(step, done)
            .then(_step("output-processors", _output_processors))
            .then(_step("memory-save", _memory_save))
            .commit())
