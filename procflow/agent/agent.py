"""``Agent``: processors around a model, with tools, whose loop is a workflow."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, aclosing
from typing import Any, Generic, Unpack, overload

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from typing_extensions import TypeVar

from procflow.agent.handoff import Handoff, hand_over, handoff_tools
from procflow.agent.loop import AgentLoop, build_loop, live_deps
from procflow.agent.options import (
    GenerateOptions,
    ProcessorArray,
    ResumeOptions,
    check_options,
)
from procflow.agent.output import (
    AgentResponse,
    FullOutput,
    ModelOutput,
    SuspendedCall,
    UIMessage,
)
from procflow.agent.state import (
    NO_OVERRIDES,
    AgentDeps,
    AgentState,
    Emit,
    as_state,
    token_usage,
)
from procflow.agent.stream_log import StreamLog, follow_stream
from procflow.agent.structured import OutputCheck, OutputSpec, OutputT
from procflow.context import RESOURCE_ID_KEY, THREAD_ID_KEY, RequestContext
from procflow.errors import (
    MCPError,
    ProcessorError,
    RunStateError,
    StepExecutionError,
    TripwireError,
    WorkflowDefinitionError,
)
from procflow.messages import (
    Chunk,
    Finish,
    Message,
    MessageList,
    Start,
    SuspendedChunk,
    new_secret_id,
)
from procflow.models.base import ModelFallback
from procflow.models.resolve import resolve_model
from procflow.processors._runner import ProcessorRunner, check_processors
from procflow.processors.args import ProcessInputStepArgs, ProcessorContext, ProcessorWriter
from procflow.processors.base import Processor
from procflow.records import ToolCallRecord, ToolResultRecord, Tripwire
from procflow.runtime.defaults import resolve_storage
from procflow.runtime.executors import Executor
from procflow.runtime.results import WorkflowResult
from procflow.runtime.run import Run, RunMode
from procflow.runtime.sync import call_sync
from procflow.steps.step import Step, validate_id
from procflow.storage.base import Storage
from procflow.tools import Tool, Toolset, toolset_sessions
from procflow.workflows.workflow import Workflow

LoopFn = Callable[[AgentLoop], AgentLoop]
_T = TypeVar("_T")
_FOLLOW_INTERVAL = 0.05  # seconds between reads of a stream log being followed

__all__ = ["Agent", "AgentStepResume", "ProcessorArray", "stored_output"]


class AgentStepResume(BaseModel):
    """What resumes an agent used as a workflow step (``Agent.as_step``) that suspended:
    the waiting tool calls to run (``approve``) or refuse (``deny``), and ``data`` for a
    tool that suspended itself (its ``ctx.resume_data``)."""

    model_config = ConfigDict(extra="forbid")

    approve: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)
    data: Any = None

DEFAULT_ERROR_RETRY_BUDGET = 10
"""API-error retries allowed when error processors are given and ``max_processor_retries``
is not (the seed: "the runtime allows up to 10 retries")."""


class _PrepareStep(Processor):
    """``prepare_step=`` as a ``process_input_step`` processor."""

    id = "prepare-step"

    def __init__(self, fn: Callable[[ProcessInputStepArgs], Any]) -> None:
        self._fn = fn

    async def process_input_step(self, args: ProcessInputStepArgs) -> Any:
        out = self._fn(args)
        return await out if hasattr(out, "__await__") else out


class Agent(Generic[OutputT]):
    """An agent: instructions, a model, tools and processors; its loop is ``agent.workflow``.

    ``Agent(..., output_type=Model)`` is an ``Agent[Model]``: its answers are validated
    as ``Model`` (``FullOutput.output``).

    Args:
        id: The agent's id (default: ``name``, as in the seed's examples that give
            only a name; one of the two is required).
        name: Display name (defaults to the id).
        instructions: The system prompt.
        model: A ``LanguageModel`` or a "provider/model-id" string, or a list of them:
            a ``FallbackModel`` asking each in turn while the ones before are down.
        tools: Tools the model may call; an ``Agent`` here is ``agent.as_tool()``; and
            toolsets (``Toolset``: an MCP server's ``MCPServerStdio``/``MCPServerHTTP``)
            whose tools are listed as the agent runs.
        memory: A ``Memory`` (conversation history and recall).
        input_processors: Processors (or processor workflows) before the model, or a
            function of the request context returning them.
        output_processors: Processors after the model (stream, step and result hooks).
        error_processors: Processors handling provider rejections.
        max_processor_retries: Retries processors may ask for (default 0; 3 for API
            errors when error processors are given).
        max_steps: Model calls per request (tool loops), default 5.
        storage: Where the agent's runs are stored (default: the default storage
            resolution, as for any workflow).
        loop: ``fn(AgentLoop) -> AgentLoop`` rewiring the loop workflow (insert, replace
            or remove steps) before it is committed.
        output_type: The type answers must be (a pydantic model, dataclass, TypedDict,
            ``list[...]``...): the model is asked for JSON of its schema, the answer is
            validated and ``FullOutput.output`` is the value.
        output_retries: Times an invalid answer is sent back to the model with the
            errors before the call fails with ``OutputValidationError`` (default 1).
        handoffs: Agents (or ``handoff(agent, input_filter=...)``) the model may hand
            the conversation to, each through a tool ``transfer_to_<id>``; the target
            answers from then on (``FullOutput.agent_id``; see ``procflow.agent.handoff``).
    """

    def __init__(self, *, id: str | None = None, model: Any, name: str | None = None,
                 instructions: str = "", tools: Sequence[Tool | Toolset | Agent[Any]] = (),
                 memory: Any = None,
                 input_processors: ProcessorArray = (), output_processors: ProcessorArray = (),
                 error_processors: ProcessorArray = (), max_processor_retries: int | None = None,
                 max_steps: int = 5, description: str | None = None,
                 storage: Storage | None = None, loop: LoopFn | None = None,
                 output_type: type[OutputT] | None = None, output_retries: int = 1,
                 handoffs: Sequence[Agent[Any] | Handoff] = ()) -> None:
        if id is None:
            if name is None:
                raise TypeError("Agent needs an id= (or a name=, which then serves as its id)")
            id = name
        self.id = validate_id(id, what="agent")
        self.name = name or id
        self.description = description
        self.instructions = instructions
        self.model = resolve_model(model)
        self.handoffs = tuple(handoffs)
        self.tools, self.toolsets = _tool_map([*tools, *handoff_tools(self, self.handoffs)])
        self.memory = memory
        self.input_processors = _checked(input_processors, "input_processors")
        self.output_processors = _checked(output_processors, "output_processors")
        self.error_processors = _checked(error_processors, "error_processors")
        self.max_processor_retries = max_processor_retries
        self.max_steps = _positive(max_steps, "max_steps")
        self.storage = storage
        if loop is not None and not callable(loop):
            raise TypeError(f"loop must be a function of the AgentLoop, got {loop!r}")
        self.loop = loop
        self.output_type = output_type
        self.output_retries = _retries(output_retries)
        self._output_spec: OutputSpec[OutputT] | None = (
            None if output_type is None else OutputSpec(output_type))
        self._workflow: Workflow | None = None

    @property
    def workflow(self) -> Workflow:
        """The agent's loop as a committed workflow (rewired by ``loop=`` if given)."""
        if self._workflow is None:
            wf = build_loop(self)
            if self.loop is not None:
                got = self.loop(AgentLoop(wf))
                if not isinstance(got, AgentLoop):
                    raise WorkflowDefinitionError(
                        f"agent '{self.id}': loop= must return the AgentLoop it was given, "
                        f"got {type(got).__name__}", workflow_id=wf.id)
                wf = got.workflow
            wf.storage = self.storage
            wf.durability = "exit"
            self._workflow = wf.commit()
        return self._workflow

    @overload
    async def generate(self, messages: Any, *, output_type: None = None,
                       **options: Unpack[GenerateOptions]) -> FullOutput[OutputT]: ...

    @overload
    async def generate(self, messages: Any, *, output_type: type[_T],
                       **options: Unpack[GenerateOptions]) -> FullOutput[_T]: ...

    async def generate(self, messages: Any, *, output_type: type[Any] | None = None,
                       **options: Unpack[GenerateOptions]) -> FullOutput[Any]:
        """Run the agent to its final answer.

        Args:
            messages: A str, a ``Message``, a role/content dict, or a list of them.
            output_type: The type this answer must be (overrides the agent's).
            **options: See ``GenerateOptions``: ``max_steps``, ``request_context``,
                ``memory={"thread", "resource"}``, ``tool_choice``, ``prepare_step``,
                ``input_processors``, ``output_processors``, ``error_processors``,
                ``max_processor_retries``, ``output_retries``.

        Raises:
            TypeError: An option ``GenerateOptions`` does not name.
            APICallError: The provider failed and no error processor asked for a retry
                (after the output processors ran).
            OutputValidationError: The answer is not the ``output_type`` even after
                ``output_retries`` retries.
        """
        check_options(options, method="generate")

        async def ignore(chunk: Chunk) -> None:
            return None

        return await self._call(messages, self._with_output(options, output_type), ignore,
                                streaming=False)

    @overload
    def generate_sync(self, messages: Any, *, output_type: None = None,
                      **options: Unpack[GenerateOptions]) -> FullOutput[OutputT]: ...

    @overload
    def generate_sync(self, messages: Any, *, output_type: type[_T],
                      **options: Unpack[GenerateOptions]) -> FullOutput[_T]: ...

    def generate_sync(self, messages: Any, *, output_type: type[Any] | None = None,
                      **options: Unpack[GenerateOptions]) -> FullOutput[Any]:
        """``generate`` for scripts and notebooks: runs in an event loop of its own and
        blocks until the answer is complete.

        Raises:
            RuntimeError: Called inside a running event loop (``await agent.generate(...)``
                there instead).
            TypeError: An option ``GenerateOptions`` does not name.
        """
        check_options(options, method="generate_sync")
        return call_sync(lambda: self.generate(messages, output_type=output_type, **options),
                         method="Agent.generate_sync()", instead="await agent.generate(...)")

    @overload
    async def stream(self, messages: Any = None, *, output_type: None = None,
                     resume_from: str | None = None, after: int = 0,
                     **options: Unpack[GenerateOptions]) -> ModelOutput[OutputT]: ...

    @overload
    async def stream(self, messages: Any = None, *, output_type: type[_T],
                     resume_from: str | None = None, after: int = 0,
                     **options: Unpack[GenerateOptions]) -> ModelOutput[_T]: ...

    async def stream(self, messages: Any = None, *, output_type: type[Any] | None = None,
                     resume_from: str | None = None, after: int = 0,
                     **options: Unpack[GenerateOptions]) -> ModelOutput[Any]:
        """Like ``generate`` but streaming: iterate ``out.full_stream``, then
        ``await out.text`` (the same final text ``generate`` gives); with an
        ``output_type``, ``out.partial_output`` follows the answer as it streams.

        Each chunk is kept in the run's storage as it is produced (a stream log; the
        first chunk, ``Start``, carries the run id). A reader that lost the stream
        (a dropped connection, a restarted client) picks it up again with
        ``agent.stream(resume_from=run_id, after=n)``, where ``n`` is the number of
        chunks it received: it gets the chunks after those, each once, as they are
        produced, then the call's final values. The call itself goes on when its reader
        leaves (see ``ModelOutput``); in another process, it needs a storage both see.

        Args:
            messages: A str, a ``Message``, a role/content dict, or a list of them
                (not with ``resume_from``).
            output_type: The type this answer must be (overrides the agent's).
            resume_from: The run id of a stream to pick up again instead of a new call.
            after: With ``resume_from``: how many of its chunks were received already.
            **options: As for ``generate`` (not with ``resume_from``).

        Raises:
            TypeError: No messages; messages or options with ``resume_from``; an option
                ``GenerateOptions`` does not name.
            ValueError: ``after`` is not an int >= 0.
        """
        check_options(options, method="stream")
        if resume_from is not None:
            return self._follow(messages, options, resume_from, after, output_type)
        if messages is None:
            raise TypeError("Agent.stream() needs messages (or resume_from=RUN_ID to pick "
                            "up a stream again)")
        opts = self._with_output(options, output_type)
        spec = opts.get("output_spec")

        async def produce(send: MemoryObjectSendStream[Chunk]) -> FullOutput[Any]:
            emit = out.watch(_sender(send))
            log = self._stream_log(emit)
            return await _logged(log, self._call(messages, opts, log or emit))

        out: ModelOutput[Any] = ModelOutput(produce, output=spec)
        return out

    def _stream_log(self, emit: Emit) -> StreamLog | None:
        """A stream log writing to the storage the call's run will use, or ``None`` when
        it keeps none."""
        storage = resolve_storage(None, self.workflow)
        return StreamLog(storage, self.workflow.id, emit) if storage.keeps_streams else None

    def _follow(self, messages: Any, options: Mapping[str, Any], run_id: str, after: int,
                output_type: type[Any] | None) -> ModelOutput[Any]:
        """``stream(resume_from=run_id, after=after)``: the stream log, followed."""
        if messages is not None or options:
            given = ["messages"] if messages is not None else []
            raise TypeError(f"Agent.stream(resume_from=...) picks up a stream already "
                            f"started: it takes no {', '.join([*given, *options])}")
        if not isinstance(run_id, str):
            raise TypeError(f"resume_from must be a run id (str), got {type(run_id).__name__}")
        if not isinstance(after, int) or isinstance(after, bool) or after < 0:
            raise ValueError(f"after must be the number of chunks received (an int >= 0), "
                             f"got {after!r}")
        storage = resolve_storage(None, self.workflow)
        if not storage.keeps_streams:
            raise RunStateError(f"agent '{self.id}': its storage {storage!r} keeps no stream "
                                "logs, so no stream can be picked up again",
                                workflow_id=self.workflow.id, run_id=run_id)
        spec = self._with_output({}, output_type).get("output_spec")

        async def produce(send: MemoryObjectSendStream[Chunk]) -> FullOutput[Any]:
            async with send:
                items = follow_stream(storage, self.workflow.id, run_id, after, spec=spec,
                                      interval=_FOLLOW_INTERVAL)
                async with aclosing(items):
                    async for item in items:
                        if isinstance(item, Chunk):
                            await send.send(item)
                        else:
                            return item
            raise AssertionError("a stream log ends with its output")  # pragma: no cover

        return ModelOutput(produce, output=spec)

    def _with_output(self, options: Mapping[str, Any],
                     output_type: type[Any] | None) -> dict[str, Any]:
        opts = dict(options)
        if output_type is not None:
            opts["output_spec"] = OutputSpec(output_type)
        elif self._output_spec is not None:
            opts["output_spec"] = self._output_spec
        return opts

    def as_tool(self, name: str | None = None, description: str | None = None) -> Tool:
        """The agent as a tool of another agent: it takes ``{"prompt": str}`` and returns
        the agent's answer text (with an ``output_type``, the validated answer as JSON).

        Each call is a stored run of this agent, its spans nested under the tool call in
        the caller's trace; its tokens add to the caller's usage. If it suspends (a tool
        waiting for approval), the caller suspends at this call with ``{"agent_id",
        "run_id", "calls"}`` as the call's payload; resume the caller with
        ``resume_data={"approve": [ids], "deny": [ids], "data": ...}`` to go on with
        both. A processor's abort in this agent is the tool's error result.

        Args:
            name: The tool's name (default: the agent's id).
            description: What the caller's model reads (default: the agent's description,
                else the first line of its instructions).
        """
        from procflow.agent.as_tool import agent_tool

        return agent_tool(self, name, description)

    def as_step(self) -> Step:
        """The agent as a workflow step: input a str (or ``{"prompt": ...}``), output
        ``{"text": ...}`` (and ``"output"``, the validated value, for an agent with an
        ``output_type``); its chunks go to the outer run's stream as "agent-chunk"
        events.

        A guardrail that stops the call stops the workflow run too (status "tripwire",
        the processor's reason; ``metadata["agent_run_id"]`` names the agent's run). A
        call that suspends (a tool needing approval, or one that suspended itself)
        suspends the step with ``{"agent_id", "run_id", "calls": [{"tool_call_id",
        "tool_name", "args", "payload"}]}``; resume the step with ``{"approve": [ids],
        "deny": [ids], "data": ...}`` (``AgentStepResume``) to go on with the call. Ids it
        does not wait on suspend the step again, the payload's ``"error"`` saying why.
        """
        agent_id = self.id

        async def execute(ctx: Any) -> dict[str, Any]:
            async def forward(chunk: Chunk) -> None:  # the outer run's stream sees them
                await ctx.emit("agent-chunk", {"agent_id": agent_id, "chunk": chunk})

            options = self._with_output({"request_context": ctx.request_context}, None)
            waiting = ctx.suspend_payload if ctx.resume_data is not None else None
            if isinstance(waiting, Mapping) and waiting.get("agent_id") == agent_id:
                decision: AgentStepResume = ctx.resume_data
                run_id = str(waiting.get("run_id"))
                known = {str(c.get("tool_call_id")) for c in waiting.get("calls") or ()}
                unknown = sorted({*decision.approve, *decision.deny} - known)
                if unknown:
                    await ctx.suspend({**waiting, "error": f"not waiting on tool call(s) "
                                       f"{unknown}; it waits on {sorted(known)}"})
                out = await self._resume(run_id, decision.approve, decision.deny,
                                         decision.data, options, forward)
            else:
                data = ctx.input_data
                prompt = data.get("prompt") if isinstance(data, Mapping) else data
                out = await self._call(prompt, options, forward)
            if out.usage.total_tokens:
                ctx.add_usage(out.usage)
            if out.tripwire is not None:
                raise TripwireError(out.tripwire.reason, processor_id=out.tripwire.processor_id,
                               metadata={**out.tripwire.metadata, "agent_id": agent_id,
                                         "agent_run_id": out.run_id})
            if out.finish_reason == "suspended":
                await ctx.suspend({"agent_id": agent_id, "run_id": out.run_id, "calls": [
                    {"tool_call_id": c.tool_call_id, "tool_name": c.tool_name,
                     "args": c.args, "payload": c.payload} for c in out.suspended]})
            if self._output_spec is not None:
                return {"text": out.text, "output": out.output}
            return {"text": out.text}

        step = Step(id=f"agent:{self.id}", execute=execute, resume_schema=AgentStepResume,
                    description=self.description or f"Agent {self.name}")
        step.kind = "agent"
        return step

    # -- internals -----------------------------------------------------------------

    async def resume(self, run_id: str, *, approve: Sequence[str] = (),
                     deny: Sequence[str] = (), resume_data: Any = None,
                     **options: Unpack[ResumeOptions]) -> FullOutput[OutputT]:
        """Continue a suspended run (in this process or another sharing its storage).

        Args:
            run_id: ``FullOutput.run_id`` of the suspended call.
            approve: Tool call ids to run.
            deny: Tool call ids not to run (the model gets a result saying so).
            resume_data: Handed to a tool that called ``ctx.suspend()``
                (``ctx.resume_data``).
            **options: As for ``generate`` (``request_context``, ``max_steps``, ...).

        Raises:
            RunNotFoundError: No such run in the agent's storage.
            RunNotSuspendedError: The run is not suspended.
        """
        check_options(options, method="resume")

        async def ignore(chunk: Chunk) -> None:
            return None

        return await self._resume(run_id, approve, deny, resume_data,
                                  self._with_output(options, None), ignore, streaming=False)

    async def replay_from(self, run_id: str, step: str = "llm-call", *,
                          new_run_id: str | None = None) -> FullOutput[OutputT]:
        """Run a stored call again from one of its loop's steps, as a new stored run,
        with this agent's current model, tools and processors (time travel: change the
        model or a processor, then re-run from ``"llm-call"``).

        Steps that finished before ``step`` last started keep their stored results; in a
        call with tool rounds that is the last model call, with the whole conversation
        before it. The stored call is left as it is.

        Args:
            run_id: ``FullOutput.run_id`` of the stored call.
            step: A loop step: its path (``"agent-step.llm-call"``) or its last part
                (``"llm-call"``, ``"output-step"``, ``"tool-calls"``,
                ``"output-processors"``).
            new_run_id: The new run's id (default: a fresh one).

        Raises:
            RunNotFoundError: No such run in the agent's storage.
            RunStateError: ``step`` names no stored step of the run, or several (the
                message lists them); or the run is in a storage that keeps objects
                (``InMemoryStorage``, the fallback), which holds the one state the call
                changed as it went, not the state after each step.
        """
        wf_run = await self.workflow.get_run(run_id)
        if wf_run.storage.keeps_objects:
            raise RunStateError(
                f"agent '{self.id}': run '{run_id}' cannot be replayed from "
                f"{type(wf_run.storage).__name__}: it keeps the call's one state as the "
                "call left it, not the state after each step; store the agent's runs in "
                "SQLiteStorage, RedisStorage or PostgresStorage (Agent(storage=...) or "
                "PROCFLOW_DB) to replay them", workflow_id=self.workflow.id, run_id=run_id)
        stored = wf_run.last_result
        paths = sorted(stored.steps) if stored is not None else []
        matches = [p for p in paths if p == step or p.endswith("." + step)]
        if len(matches) != 1:
            how = "no" if not matches else "more than one"
            raise RunStateError(
                f"agent '{self.id}': {how} stored step of run '{run_id}' matches {step!r}; "
                f"its steps: {paths}", workflow_id=self.workflow.id, run_id=run_id)
        new_id = new_run_id or new_secret_id()
        deps = self.default_deps()
        live_deps[new_id] = deps
        try:
            new = await wf_run.replay_from(matches[0], run_id=new_id)
        finally:
            live_deps.pop(new_id, None)
        result = new.last_result
        assert result is not None  # replay_from returns a finished run
        state = (as_state(result.result) if result.result is not None
                 else AgentState(MessageList()))

        async def ignore(chunk: Chunk) -> None:
            return None

        return await self._output(deps, state, result, new_id, ignore, False)

    async def submit(self, messages: Any, *, executor: Executor | None = None,
                     **options: Any) -> str:
        """Run the agent's loop workflow on an executor (workers: the model, tools and
        processors are found there by the agent's id); returns the run id at once.

        Args:
            messages: As for ``generate``.
            executor: Where it runs (``procflow.workers.DramatiqExecutor`` for workers;
                default: the process default, a ``LocalExecutor``).
            **options: ``request_context`` and ``memory`` (persisted entries only travel
                to workers); the other ``generate`` options are the agent's own there.

        Raises:
            TypeError: Another option is given.
        """
        unsupported = sorted(set(options) - {"request_context", "memory", "run_id"})
        if unsupported:
            raise TypeError(f"agent '{self.id}': submit() takes request_context=, memory= "
                            f"and run_id= only (the worker uses the agent's own settings "
                            f"for the rest), got {unsupported}")

        async def ignore(chunk: Chunk) -> None:
            return None

        _, state = self._prepare(messages, options, ignore)
        rc = _context(options.get("request_context"), options.get("memory"))
        wf_run = self.workflow.create_run(options.get("run_id"))
        wf_run.durability = "sync"
        return await wf_run.submit(state, executor=executor, request_context=rc)

    async def wait(self, run_id: str, *, executor: Executor | None = None,
                   timeout: float | None = None) -> FullOutput:  # noqa: ASYNC109
        """The output of a submitted call once its run is settled.

        Args:
            run_id: What ``submit`` returned.
            executor: The executor it was submitted to (its storage holds the run).
            timeout: Seconds to wait at most.

        Raises:
            TimeoutError: Not settled in time.
            APICallError: As for ``generate``, the error the run failed with.
        """
        storage = getattr(executor, "storage", None)
        wf_run = await self.workflow.get_run(run_id, storage=storage)
        result = await wf_run.result(timeout=timeout, executor=executor)
        deps = self.default_deps()
        state = (as_state(result.result) if result.result is not None
                 else AgentState(MessageList()))

        async def ignore(chunk: Chunk) -> None:
            return None

        return await self._output(deps, state, result, run_id, ignore, False)

    async def resume_submit(self, run_id: str, *, approve: Sequence[str] = (),
                            deny: Sequence[str] = (), resume_data: Any = None,
                            executor: Executor | None = None) -> str:
        """Resume a suspended call on an executor (workers: the rest of the call runs on
        a worker); returns the run id at once, ``wait`` gives the output.

        Args:
            run_id: The suspended call's run id.
            approve: Tool call ids to run.
            deny: Tool call ids to refuse.
            resume_data: Handed to a tool that called ``ctx.suspend()``; JSON-ready.
            executor: The executor holding the run (its storage), e.g. a
                ``procflow.workers.DramatiqExecutor``.

        Raises:
            RunNotSuspendedError: The run is not suspended.
            RunStateError: ``approve``/``deny`` name calls the run does not wait on, or
                another process resumed it first.
        """
        wf_run = await self.workflow.get_run(run_id, storage=getattr(executor, "storage", None))
        payload = self._waiting(wf_run, approve, deny)
        return await wf_run.resume_submit(resume_data={
            "approve": list(approve), "deny": list(deny), "resume_data": resume_data,
            "done": payload.get("done") or {}}, executor=executor)

    async def resume_stream(self, run_id: str, *, approve: Sequence[str] = (),
                            deny: Sequence[str] = (), resume_data: Any = None,
                            **options: Unpack[ResumeOptions]) -> ModelOutput[OutputT]:
        """Like ``resume`` but streaming, as ``stream`` is to ``generate``."""
        check_options(options, method="resume_stream")
        opts = self._with_output(options, None)

        async def produce(send: MemoryObjectSendStream[Chunk]) -> FullOutput[Any]:
            emit = out.watch(_sender(send))
            log = self._stream_log(emit)
            return await _logged(log, self._resume(run_id, approve, deny, resume_data, opts,
                                                   log or emit))

        out: ModelOutput[OutputT] = ModelOutput(produce, output=opts.get("output_spec"))
        return out

    # -- internals -----------------------------------------------------------------

    async def _call(self, messages: Any, options: dict[str, Any], emit: Emit, *,
                    streaming: bool = True) -> FullOutput[Any]:
        deps, state = self._prepare(messages, options, emit)
        deps.streaming = streaming
        wf_run = self.workflow.create_run(options.get("run_id"),
                                          parent_span=options.get("parent_span"))
        if streaming and not options.get("handoff_depth"):
            await emit(Start(self.id, run_id=wf_run.run_id))
        if not wf_run.storage.process_local:
            # A durable store keeps the state at every step boundary, as for any workflow
            # run, so a stored agent run replays from any step (``--from-step llm-call``).
            wf_run.durability = "sync"
        else:  # only this call holds it: no lease, heartbeat task or cancel scope
            wf_run.mode = RunMode.PRIVATE
        live_deps[wf_run.run_id] = deps
        try:
            async with _sessions(self.toolsets):
                result = await wf_run.start(input_data=state,
                                            request_context=deps.ctx.request_context)
        finally:
            live_deps.pop(wf_run.run_id, None)
        output = await self._output(deps, state, result, wf_run.run_id, emit, streaming)
        return await _then(deps, output, options, emit, streaming)

    def _waiting(self, wf_run: Run[Any], approve: Sequence[str], deny: Sequence[str],
                 ) -> dict[str, Any]:
        """The suspended run's payload, checked: it is suspended, and ``approve``/``deny``
        name only calls it waits on.

        Raises:
            RunNotSuspendedError: The run is not suspended.
            RunStateError: A call it does not wait on is named.
        """
        run_id, stored = wf_run.run_id, wf_run.last_result
        if stored is None or stored.status != "suspended":
            from procflow.errors import RunNotSuspendedError

            raise RunNotSuspendedError(
                f"agent '{self.id}': run '{run_id}' is not suspended (status "
                f"{wf_run.status!r}); only a suspended run can be resumed",
                workflow_id=self.workflow.id, run_id=run_id)
        payload = _suspend_payload(stored)
        calls = {c["tool_call_id"] for c in payload.get("suspended") or []}
        unknown = sorted((set(approve) | set(deny)) - calls)
        if unknown:
            raise RunStateError(
                f"agent '{self.id}': run '{run_id}' is not waiting on tool call(s) {unknown}; "
                f"it waits on {sorted(calls)}", workflow_id=self.workflow.id, run_id=run_id)
        return payload

    async def _resume(self, run_id: str, approve: Sequence[str], deny: Sequence[str],
                      resume_data: Any, options: dict[str, Any], emit: Emit, *,
                      streaming: bool = True) -> FullOutput[Any]:
        # a sub-agent's run (``as_tool``): its spans go to the caller's trace
        wf_run = await self.workflow.get_run(run_id, parent_span=options.get("parent_span"))
        payload = self._waiting(wf_run, approve, deny)
        deps, _ = self._prepare([], options, emit)
        deps.streaming = streaming
        if streaming:
            await emit(Start(self.id, resumed=run_id, run_id=run_id))
        live_deps[run_id] = deps
        try:
            async with _sessions(self.toolsets):
                result = await wf_run.resume(resume_data={
                    "approve": list(approve), "deny": list(deny), "resume_data": resume_data,
                    "done": payload.get("done") or {}}, request_context=options.get(
                        "request_context"))
        finally:
            live_deps.pop(run_id, None)
        state = deps.state if deps.state is not None else AgentState(MessageList())
        output = await self._output(deps, state, result, run_id, emit, streaming)
        return await _then(deps, output, options, emit, streaming)

    async def _output(self, deps: AgentDeps, state: AgentState, result: WorkflowResult,
                      run_id: str, emit: Emit, streaming: bool) -> FullOutput[Any]:
        if deps.state is not None:
            state = deps.state
        if result.status == "failed" and state.error is None:
            state.error = _public(result.error)
        if result.status == "canceled":
            raise anyio.get_cancelled_exc_class()()
        if state.error is not None:
            await emit(Chunk.error(state.error))
            raise state.error
        suspended: list[SuspendedCall] = []
        if result.status == "suspended":
            payload = _suspend_payload(result)
            suspended = [SuspendedCall(c["tool_call_id"], c["tool_name"], dict(c["args"]),
                                       c.get("payload")) for c in payload.get("suspended") or []]
            if streaming:
                await emit(SuspendedChunk(run_id, tuple(
                    {"tool_call_id": c.tool_call_id, "tool_name": c.tool_name,
                     "args": c.args, "payload": c.payload} for c in suspended)))
        output = _full_output(state, run_id, suspended, deps.output, self.id)
        state.current = NO_OVERRIDES  # the last step's overrides: not kept with the run
        if streaming and not suspended and not _handing_over(deps, output):
            await emit(Finish(output.finish_reason, output.usage))
        return output

    def default_deps(self) -> AgentDeps:
        """Deps from the agent's defaults, for a stored run continued without a call
        (``procflow run --resume``/``--from-step`` on an agent run)."""
        async def ignore(chunk: Chunk) -> None:
            return None

        deps, _ = self._prepare([], {}, ignore)
        deps.streaming = False
        return deps

    def _prepare(self, messages: Any, options: dict[str, Any], emit: Emit,
                 ) -> tuple[AgentDeps, AgentState]:
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
        deps = AgentDeps(
            agent=self, model=self.model, tools=self.tools, ctx=ctx,
            inputs=_runner(inputs, ctx, explicit, "input_processors"),
            outputs=_runner(outputs, ctx, explicit, "output_processors"),
            errors=_runner(errors, ctx, 0, "error_processors"),
            max_steps=_positive(options.get("max_steps", self.max_steps), "max_steps"),
            tool_choice=options.get("tool_choice"), emit=emit, api_retry_budget=budget)
        spec = options.get("output_spec")
        if spec is not None:
            deps.output = OutputCheck(spec, _retries(options.get("output_retries",
                                                                 self.output_retries)))
            if not getattr(self.model, "supports_output_schema", False):
                ml.add_system(Message.system(spec.instructions()), tag="output-format")
        return deps, AgentState(ml)

    def __repr__(self) -> str:
        return f"Agent(id={self.id!r})"


_NO_SESSIONS = contextlib.nullcontext()


def _sessions(toolsets: tuple[Toolset, ...]) -> AbstractAsyncContextManager[Any]:
    """The toolsets' sessions for a call (none to enter: a shared no-op)."""
    return toolset_sessions(toolsets) if toolsets else _NO_SESSIONS


def _runner(items: list[Any], ctx: ProcessorContext, retries: int,
            where: str) -> ProcessorRunner:
    return ProcessorRunner(items, context=ctx, max_processor_retries=retries, where=where,
                           validate=not isinstance(items, _Checked))


def _positive(value: Any, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return value


def _retries(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"output_retries must be an int >= 0, got {value!r}")
    return value


def _tool_map(tools: Sequence[Any]) -> tuple[dict[str, Tool], tuple[Toolset, ...]]:
    out: dict[str, Tool] = {}
    toolsets: list[Toolset] = []
    for t in tools:
        if isinstance(t, Agent):
            t = t.as_tool()
        if isinstance(t, Toolset) and not isinstance(t, Tool):
            toolsets.append(t)
            continue
        if not isinstance(t, Tool):
            raise TypeError(f"tools must be Tool objects (use @tool), agents (each one is "
                            f"agent.as_tool()) or toolsets (an MCP server), "
                            f"got {type(t).__name__}")
        if t.id in out:
            raise ValueError(f"two tools are named '{t.id}'")
        out[t.id] = t
    return out, tuple(toolsets)


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
    """The error a caller should see: a processor's own ``ProcessorError`` (or a toolset's
    ``MCPError``) rather than the loop step's ``StepExecutionError`` wrapping it (the loop
    is an implementation detail)."""
    if isinstance(error, StepExecutionError) and isinstance(error.__cause__,
                                                            ProcessorError | MCPError):
        return error.__cause__
    return error


def _hidden(msg: Message) -> bool:
    signal = msg.content.metadata.get("signal")
    return signal is not None and isinstance(signal, Mapping) and bool(signal.get("hidden"))


async def _logged(log: StreamLog | None, call: Awaitable[FullOutput[Any]],
                  ) -> FullOutput[Any]:
    """The call's output; with a stream log, its end appended, however the call ends."""
    if log is None:
        return await call
    output: FullOutput[Any] | None = None
    error: BaseException | None = None
    try:
        output = await call
        return output
    except Exception as exc:
        error = exc
        raise
    finally:
        with anyio.CancelScope(shield=True):
            await log.end(output, error)


def _sender(send: MemoryObjectSendStream[Chunk]) -> Emit:
    """An emit sending to a stream, going quiet once nobody listens."""
    open_ = True

    async def emit(chunk: Chunk) -> None:
        nonlocal open_
        if open_:
            try:
                try:  # into the buffer without a trip through the event loop per chunk
                    send.send_nowait(chunk)
                except anyio.WouldBlock:
                    await send.send(chunk)  # the buffer is full: wait for the reader
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                open_ = False
    return emit


def _suspend_payload(result: WorkflowResult) -> dict[str, Any]:
    """The payload of the loop step a suspended run waits in (the tool calls)."""
    for path in result.suspended_at:
        record = result.steps.get(path)
        if record is not None and isinstance(record.suspend_payload, Mapping):
            return dict(record.suspend_payload)
    return {}


def _handing_over(deps: AgentDeps, output: FullOutput[Any]) -> bool:
    """The call goes on with a handoff's target (not after a suspend or a tripwire)."""
    return deps.handoff is not None and not output.suspended and output.tripwire is None


async def _then(deps: AgentDeps, output: FullOutput[Any], options: dict[str, Any],
                emit: Emit, streaming: bool) -> FullOutput[Any]:
    """The call's output, or (a handoff asked for) the output of its target's call."""
    pending = deps.handoff
    if pending is None or not _handing_over(deps, output):
        return output
    return await hand_over(pending, deps, output, options, emit, streaming)


def _full_output(state: AgentState, run_id: str, suspended: list[SuspendedCall],
                 check: OutputCheck | None, agent_id: str | None = None) -> FullOutput[Any]:
    ml = state.messages
    messages = ml.all()
    response = ml.response()
    trip = state.tripwire
    text = ""
    if trip is None:
        for msg in reversed(response):
            if msg.role == "assistant" and (text := msg.text):
                break
    calls = [ToolCallRecord.from_dict(c) for s in state.steps for c in s.tool_calls]
    results = [ToolResultRecord.from_dict(r) for s in state.steps for r in s.tool_results]
    ui = [UIMessage.from_message(m) for m in messages if not _hidden(m)]
    if suspended:
        reason = "suspended"
    elif trip is not None:
        reason = "other"
    else:
        reason = state.finish_reason or "stop"
    return FullOutput(
        text=text, finish_reason=reason, usage=token_usage(state.usage),
        steps=list(state.steps), tool_calls=calls, tool_results=results,
        tripwire=None if trip is None else Tripwire.from_dict(trip), messages=messages,
        response=AgentResponse(
            messages=response, ui_messages=ui,
            model=next((s.model for s in reversed(state.steps) if s.model), None),
            fallbacks=[ModelFallback.from_dict(f) for s in state.steps for f in s.fallbacks]),
        run_id=run_id,
        suspended=suspended, output=None if check is None or suspended or trip is not None
        else _answer(check, text), agent_id=agent_id)


def stored_output(result: Any, run_id: str) -> FullOutput[Any]:
    """The ``FullOutput`` of a finished stored agent run, rebuilt from its snapshot's
    ``result`` (the loop's final state): text, usage, tool calls, tripwire, messages.
    ``output`` is ``None`` (the structured type is the agent's, not the run's).

    Raises:
        TypeError: ``result`` is not an agent loop's state.
    """
    return _full_output(as_state(result), run_id, [], None)


def _answer(check: OutputCheck, text: str) -> Any:
    """The validated answer: the loop's, or (a run resumed elsewhere) the text's; ``None``
    when the call ended without one (``max_steps`` reached while calling tools)."""
    if check.value is not None or not text:
        return check.value
    try:
        return check.spec.parse(text)
    except ValidationError:
        return None
