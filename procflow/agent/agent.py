"""``Agent``: processors around a model, with tools, whose loop is a workflow."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from procflow.agent.loop import build_loop_workflow
from procflow.agent.output import AgentResponse, FullOutput, ModelOutput, UIMessage
from procflow.agent.state import AgentRun, Emit
from procflow.context import RESOURCE_ID_KEY, THREAD_ID_KEY, RequestContext
from procflow.errors import ProcessorError, StepExecutionError
from procflow.messages import Chunk, Message, MessageList
from procflow.models.resolve import resolve_model
from procflow.processors._runner import ProcessorRunner, check_processors
from procflow.processors.args import ProcessInputStepArgs, ProcessorContext, ProcessorWriter
from procflow.processors.base import Processor
from procflow.steps.step import Step, validate_id
from procflow.storage.null import NullStorage
from procflow.tools import Tool
from procflow.workflows.workflow import Workflow

__all__ = ["Agent", "ProcessorArray"]

ProcessorArray = Sequence[Any] | Callable[[RequestContext], Sequence[Any]]
DEFAULT_ERROR_RETRY_BUDGET = 3


class _PrepareStep(Processor):
    """``prepare_step=`` as a ``process_input_step`` processor."""

    id = "prepare-step"

    def __init__(self, fn: Callable[[ProcessInputStepArgs], Any]) -> None:
        self._fn = fn

    async def process_input_step(self, args: ProcessInputStepArgs) -> Any:
        out = self._fn(args)
        return await out if hasattr(out, "__await__") else out


class Agent:
    """An agent: instructions, a model, tools and processors; its loop is ``agent.workflow``.

    Args:
        id: The agent's id.
        name: Display name (defaults to the id).
        instructions: The system prompt.
        model: A ``LanguageModel`` or a "provider/model-id" string.
        tools: Tools the model may call.
        memory: A ``Memory`` (conversation history and recall).
        input_processors: Processors (or processor workflows) before the model, or a
            function of the request context returning them.
        output_processors: Processors after the model (stream, step and result hooks).
        error_processors: Processors handling provider rejections.
        max_processor_retries: Retries processors may ask for (default 0; 3 for API
            errors when error processors are given).
        max_steps: Model calls per request (tool loops), default 5.
    """

    def __init__(self, *, id: str, model: Any, name: str | None = None,
                 instructions: str = "", tools: Sequence[Tool] = (), memory: Any = None,
                 input_processors: ProcessorArray = (), output_processors: ProcessorArray = (),
                 error_processors: ProcessorArray = (), max_processor_retries: int | None = None,
                 max_steps: int = 5, description: str | None = None) -> None:
        self.id = validate_id(id, what="agent")
        self.name = name or id
        self.description = description
        self.instructions = instructions
        self.model = resolve_model(model)
        self.tools = _tool_map(tools)
        self.memory = memory
        self.input_processors = _checked(input_processors, "input_processors")
        self.output_processors = _checked(output_processors, "output_processors")
        self.error_processors = _checked(error_processors, "error_processors")
        self.max_processor_retries = max_processor_retries
        self.max_steps = _positive(max_steps, "max_steps")
        self._workflow: Workflow | None = None

    @property
    def workflow(self) -> Workflow:
        """The agent's loop as a committed workflow."""
        if self._workflow is None:
            self._workflow = build_loop_workflow(self.id)
        return self._workflow

    async def generate(self, messages: Any, **options: Any) -> FullOutput:
        """Run the agent to its final answer.

        Args:
            messages: A str, a ``Message``, a role/content dict, or a list of them.
            **options: ``max_steps``, ``request_context``, ``memory={"thread", "resource"}``,
                ``tool_choice``, ``prepare_step``, ``input_processors``,
                ``output_processors``, ``error_processors``, ``max_processor_retries``.

        Raises:
            APICallError: The provider failed and no error processor asked for a retry
                (after the output processors ran).
        """
        async def ignore(chunk: Chunk) -> None:
            return None

        return await self._call(messages, options, ignore, streaming=False)

    async def stream(self, messages: Any, **options: Any) -> ModelOutput:
        """Like ``generate`` but streaming: iterate ``out.full_stream``, then
        ``await out.text`` (the same final text ``generate`` gives)."""
        _check_options(options)

        async def produce(send: MemoryObjectSendStream[Chunk]) -> FullOutput:
            open_ = True

            async def emit(chunk: Chunk) -> None:
                nonlocal open_
                if open_:
                    try:
                        await send.send(chunk)
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        open_ = False

            return await self._call(messages, options, emit)

        return ModelOutput(produce)

    def as_step(self) -> Step:
        """The agent as a workflow step: input a str (or ``{"prompt": ...}``), output
        ``{"text": ...}``."""
        async def execute(ctx: Any) -> dict[str, str]:
            data = ctx.input_data
            prompt = data.get("prompt") if isinstance(data, Mapping) else data
            out = await self.generate(prompt, request_context=ctx.request_context)
            return {"text": out.text}

        step = Step(id=f"agent:{self.id}", execute=execute,
                    description=self.description or f"Agent {self.name}")
        step.kind = "agent"
        return step

    # -- internals -----------------------------------------------------------------

    async def _call(self, messages: Any, options: dict[str, Any], emit: Emit, *,
                    streaming: bool = True) -> FullOutput:
        _check_options(options)
        run = self._prepare(messages, options, emit)
        run.streaming = streaming
        if streaming:
            await emit(Chunk("start", {"agent_id": self.id}))
        wf_run = self.workflow.create_run(storage=_NULL, durability="exit")
        wf_run.internal = True
        run.run_id = wf_run.run_id
        result = await wf_run.start(input_data=run, request_context=run.ctx.request_context)
        if result.status == "failed" and run.error is None:
            run.error = _public(result.error)
        if run.error is not None:
            await emit(Chunk.error(run.error))
            raise run.error
        output = _full_output(run)
        if streaming:
            await emit(Chunk.finish(output.finish_reason, output.usage))
        return output

    def _prepare(self, messages: Any, options: dict[str, Any], emit: Emit) -> AgentRun:
        rc = _context(options.get("request_context"), options.get("memory"))
        ctx = ProcessorContext(request_context=rc, writer=ProcessorWriter(emit))
        retries = options.get("max_processor_retries", self.max_processor_retries)
        errors = _resolve(options.get("error_processors", self.error_processors), rc,
                          "error_processors")
        budget = retries if retries is not None else (DEFAULT_ERROR_RETRY_BUDGET if errors
                                                      else 0)
        inputs = _resolve(options.get("input_processors", self.input_processors), rc,
                          "input_processors")
        outputs = _resolve(options.get("output_processors", self.output_processors), rc,
                           "output_processors")
        if self.memory is not None:
            inputs, outputs = _with_memory(self.memory, inputs, outputs)
        prepare = options.get("prepare_step")
        if prepare is not None:
            inputs = [*inputs, _PrepareStep(prepare)]
        ml = MessageList()
        if self.instructions:
            ml.add_system(Message.system(self.instructions), tag="instructions")
        for msg in _as_list(messages):
            parsed = Message.from_input(msg)
            if parsed.role == "system":
                ml.add_system(parsed)
            else:
                ml.add(parsed, source="input")
        explicit = retries if retries is not None else 0
        return AgentRun(
            agent=self, model=self.model, tools=self.tools, ml=ml, ctx=ctx,
            inputs=_runner(inputs, ctx, explicit, "input_processors"),
            outputs=_runner(outputs, ctx, explicit, "output_processors"),
            errors=_runner(errors, ctx, 0, "error_processors"),
            max_steps=_positive(options.get("max_steps", self.max_steps), "max_steps"),
            tool_choice=options.get("tool_choice"), emit=emit, api_retry_budget=budget)

    def __repr__(self) -> str:
        return f"Agent(id={self.id!r})"


_OPTIONS = frozenset({"max_steps", "request_context", "memory", "tool_choice", "prepare_step",
                      "input_processors", "output_processors", "error_processors",
                      "max_processor_retries"})


def _check_options(options: Mapping[str, Any]) -> None:
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        raise TypeError(f"unknown option(s) {unknown}; expected some of {sorted(_OPTIONS)}")


def _runner(items: list[Any], ctx: ProcessorContext, retries: int,
            where: str) -> ProcessorRunner:
    return ProcessorRunner(items, context=ctx, max_processor_retries=retries, where=where,
                           validate=not isinstance(items, _Checked))


def _positive(value: Any, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return value


def _tool_map(tools: Sequence[Tool]) -> dict[str, Tool]:
    out: dict[str, Tool] = {}
    for t in tools:
        if not isinstance(t, Tool):
            raise TypeError(f"tools must be Tool objects (use @tool), got {type(t).__name__}")
        if t.id in out:
            raise ValueError(f"two tools are named '{t.id}'")
        out[t.id] = t
    return out


class _Checked(list[Any]):
    """A processor array validated once, at agent construction."""


def _checked(value: ProcessorArray, where: str) -> ProcessorArray:
    if callable(value):
        return value
    return _Checked(check_processors(value, where=where))


def _resolve(value: ProcessorArray, rc: RequestContext, where: str) -> list[Any]:
    if isinstance(value, _Checked):
        return value
    got = value(rc) if callable(value) else value
    if isinstance(got, str | bytes) or not isinstance(got, Sequence):
        raise ProcessorError(f"{where} must be a list (or a function of the request context "
                             f"returning one), got {type(got).__name__}")
    return list(got)


def _as_list(messages: Any) -> list[Any]:
    if isinstance(messages, str | Message | Mapping):
        return [messages]
    if isinstance(messages, Sequence):
        return list(messages)
    raise TypeError(f"messages must be a str, a Message, a dict or a list of them, got "
                    f"{type(messages).__name__}")


def _context(given: Any, memory: Any) -> RequestContext:
    if given is None:
        rc = RequestContext()
    elif isinstance(given, RequestContext):
        rc = given
    elif isinstance(given, Mapping):
        rc = RequestContext(given)
    else:
        raise TypeError(f"request_context must be a RequestContext or a mapping, got "
                        f"{type(given).__name__}")
    if memory is not None:
        if not isinstance(memory, Mapping):
            raise TypeError('memory= takes {"thread": ..., "resource": ...}')
        if memory.get("thread") is not None:
            rc[THREAD_ID_KEY] = str(memory["thread"])
        if memory.get("resource") is not None:
            rc[RESOURCE_ID_KEY] = str(memory["resource"])
    return rc


def _with_memory(memory: Any, inputs: list[Any], outputs: list[Any],
                 ) -> tuple[list[Any], list[Any]]:
    """Memory's processors around the user's: input first, output last; one whose id the
    user's list already has is not added again."""
    def ids(items: list[Any]) -> set[str]:
        return {p.id for p in items if isinstance(p, Processor)}

    taken = ids(inputs)
    before = [p for p in memory.input_processors() if p.id not in taken]
    taken = ids(outputs)
    after = [p for p in memory.output_processors() if p.id not in taken]
    return [*before, *inputs], [*outputs, *after]


def _public(error: BaseException | None) -> BaseException | None:
    """The error a caller should see: a processor's own ``ProcessorError`` rather than the
    loop step's ``StepExecutionError`` wrapping it (the loop is an implementation detail)."""
    if isinstance(error, StepExecutionError) and isinstance(error.__cause__, ProcessorError):
        return error.__cause__
    return error


def _hidden(msg: Message) -> bool:
    signal = msg.content.metadata.get("signal")
    return signal is not None and isinstance(signal, Mapping) and bool(signal.get("hidden"))


def _full_output(run: AgentRun) -> FullOutput:
    messages = run.ml.all()
    response = run.ml.response()
    trip = run.tripwire
    text = ""
    if trip is None:
        for msg in reversed(response):
            if msg.role == "assistant" and (text := msg.text):
                break
    tripwire = None if trip is None else {"reason": trip.reason,
                                          "processor_id": trip.processor_id,
                                          "retry": trip.retry, "metadata": dict(trip.metadata)}
    calls = [c for s in run.steps for c in s.tool_calls]
    results = [r for s in run.steps for r in s.tool_results]
    ui = [UIMessage.from_message(m) for m in messages if not _hidden(m)]
    return FullOutput(
        text=text, finish_reason="other" if trip is not None else (run.finish_reason or "stop"),
        usage=dict(run.usage), steps=list(run.steps), tool_calls=calls, tool_results=results,
        tripwire=tripwire, messages=messages,
        response=AgentResponse(messages=response, ui_messages=ui), run_id=run.run_id)


_NULL = NullStorage()
"""Where loop runs go: nowhere (a call is not resumable; its trace is kept elsewhere)."""
