"""The agent loop's state and its dependencies, kept apart (state/deps split).

``AgentState`` is what flows from step to step of the loop workflow and is stored with
the run: the messages, the step records, usage, the finish reason, the pending tool
calls. ``AgentDeps`` is what a call hands to its run and is never stored: the agent,
the model, the tools, the processor runners, the stream to emit chunks on. A run
resumed in another process gets fresh deps from its agent.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import anyio

from procflow.errors import TripwireError
from procflow.messages import Chunk, Message, MessageList, TripwireChunk
from procflow.models.base import LanguageModel
from procflow.processors._hooks import StepInfo, StepOverrides
from procflow.processors._runner import ProcessorRunner
from procflow.processors._stream import StreamPipeline
from procflow.processors.args import ProcessorContext, ProcessorWriter
from procflow.processors.base import Processor
from procflow.records import Usage
from procflow.storage.values import register_type

if TYPE_CHECKING:
    from procflow.agent.agent import Agent
    from procflow.agent.handoff import PendingHandoff
    from procflow.agent.output import StepRecord
    from procflow.agent.structured import OutputCheck
    from procflow.tools import Tool

__all__ = ["NO_OVERRIDES", "AgentDeps", "AgentState", "Emit", "as_state", "token_usage"]

Emit = Callable[[Chunk], Awaitable[None]]


class AgentState:
    """The state of one agent call, passed between (and stored with) the loop's steps.

    A step of the loop (yours too) takes it as ``ctx.input_data`` and returns it. A
    durable storage keeps it as JSON (``to_json``); ``as_state`` rebuilds it.

    Attributes:
        messages: The conversation (a ``MessageList``).
        steps: One ``StepRecord`` per model call so far.
        step_number: The current model step (0-based).
        usage: Tokens summed so far.
        finish_reason: Why the last model call stopped.
        pending_calls: The tool calls of the last model call, not yet run.
        tripwire: The abort that stopped the call, as a dict, else ``None``.
        error: The error that ended the call, else ``None``.
        retrying: A processor asked for the current step to be retried.
        decisions: Approval decisions by tool call id ("approve"/"deny"), from resume.
        current: The current step's model/tools/tool choice overrides (not stored).
    """

    __slots__ = ("current", "decisions", "error", "finish_reason", "messages",
                 "pending_calls", "retrying", "step_number", "steps", "tripwire", "usage")

    def __init__(self, messages: MessageList, *, steps: list[StepRecord] | None = None,
                 step_number: int = 0, usage: dict[str, Any] | None = None,
                 finish_reason: str | None = None,
                 pending_calls: list[dict[str, Any]] | None = None,
                 tripwire: dict[str, Any] | None = None, error: BaseException | None = None,
                 retrying: bool = False, decisions: dict[str, str] | None = None) -> None:
        self.messages = messages
        self.steps: list[StepRecord] = steps if steps is not None else []
        self.step_number = step_number
        self.usage: dict[str, Any] = usage if usage else {
            "input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
        self.finish_reason = finish_reason
        self.pending_calls: list[dict[str, Any]] = pending_calls or []
        self.tripwire = tripwire
        self.error = error
        self.retrying = retrying
        self.decisions: dict[str, str] = decisions or {}
        self.current = NO_OVERRIDES

    def __repr__(self) -> str:
        return (f"AgentState(step={self.step_number}, messages={len(self.messages)}, "
                f"finish_reason={self.finish_reason!r})")

    @property
    def ml(self) -> MessageList:
        """Alias of ``messages``."""
        return self.messages

    @property
    def finished(self) -> bool:
        """The loop should end: a tripwire, an error, or a model step calling no tool."""
        return (self.tripwire is not None or self.error is not None
                or (not self.retrying and bool(self.steps) and not self.steps[-1].tool_calls))

    def info(self) -> StepInfo:
        """Where the loop is, for processor hooks."""
        return StepInfo(self.step_number, list(self.steps))

    def add_usage(self, usage: Usage | Mapping[str, Any] | None) -> dict[str, Any]:
        """Add one call's usage to the total; returns it normalised (the token counts,
        and ``cost`` when the model priced the call)."""
        got: dict[str, Any]
        if isinstance(usage, Usage):
            got = usage.to_dict()
        else:
            got = {k: int((usage or {}).get(k) or 0)
                   for k in ("input_tokens", "output_tokens", "total_tokens")}
        if not got["total_tokens"]:
            got["total_tokens"] = got["input_tokens"] + got["output_tokens"]
        for key, value in got.items():
            self.usage[key] = self.usage.get(key, 0) + value
        return got

    def feedback(self, trip: TripwireError) -> None:
        """Give a processor's retry reason to the model as a hidden reminder."""
        pid = trip.processor_id or "processor"
        msg = Message.user(f'<system-reminder type="processor-feedback" processor="{pid}">'
                           f"{trip.reason}</system-reminder>")
        msg.content.metadata["signal"] = {"type": "processor-feedback", "processor_id": pid,
                                          "hidden": True, "transient": True}
        self.messages.add(msg, source="input")

    # -- storage ----------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The state as JSON-ready data (what a durable storage keeps)."""
        return {
            "__agent_state__": 1,
            **self.messages.to_json(),
            "steps": [_record_json(s) for s in self.steps],
            "step_number": self.step_number, "usage": dict(self.usage),
            "finish_reason": self.finish_reason, "pending_calls": list(self.pending_calls),
            "tripwire": self.tripwire,
            "error": None if self.error is None else f"{type(self.error).__name__}: "
                                                     f"{self.error}",
            "retrying": self.retrying, "decisions": dict(self.decisions)}


NO_OVERRIDES: Final = StepOverrides()
"""``AgentState.current`` outside a step (shared, never changed: each step sets its own,
and a finished call drops its own, so the stored state does not keep it)."""


def token_usage(counts: Usage | Mapping[str, Any] | None) -> Usage:
    """``Usage.of(counts)``, quick for the loop's own token dicts (the three whole counts
    ``AgentState.add_usage`` makes); anything else goes through ``Usage.of``'s checks."""
    if type(counts) is dict and len(counts) == 3:
        i, o, t = counts.get("input_tokens"), counts.get("output_tokens"), \
            counts.get("total_tokens")
        if type(i) is int and type(o) is int and type(t) is int and i >= 0 and o >= 0 \
                and t > 0:
            return Usage(i, o, t)
    return Usage.of(counts)


def _record_json(record: StepRecord) -> dict[str, Any]:
    return {"step_number": record.step_number, "text": record.text,
            "tool_calls": record.tool_calls, "tool_results": record.tool_results,
            "finish_reason": record.finish_reason, "usage": record.usage,
            "from_cache": record.from_cache, "model": record.model,
            "fallbacks": record.fallbacks}


def as_state(value: Any) -> AgentState:
    """The loop's state from a step input: the live object, or a stored one rebuilt.

    Raises:
        TypeError: ``value`` is not the loop's state.
    """
    if type(value) is AgentState:
        return value
    if isinstance(value, AgentState):
        return value
    if isinstance(value, Mapping) and "__agent_state__" in value:
        return _from_json(value)
    raise TypeError(f"an agent loop step takes the loop's AgentState as input, got "
                    f"{type(value).__name__}; a step you add must return the state it got")


def _from_json(data: Mapping[str, Any]) -> AgentState:
    from procflow.agent.output import StepRecord
    from procflow.errors import StepExecutionError

    ml = MessageList.from_json(data)
    steps = [StepRecord(step_number=s["step_number"], text=s.get("text") or "",
                        tool_calls=list(s.get("tool_calls") or []),
                        tool_results=list(s.get("tool_results") or []),
                        finish_reason=s.get("finish_reason"), usage=dict(s.get("usage") or {}),
                        from_cache=bool(s.get("from_cache")), model=s.get("model"),
                        fallbacks=list(s.get("fallbacks") or []))
             for s in data.get("steps") or []]
    error = data.get("error")
    return AgentState(
        messages=ml, steps=steps, step_number=int(data.get("step_number") or 0),
        usage=dict(data.get("usage") or {}), finish_reason=data.get("finish_reason"),
        pending_calls=list(data.get("pending_calls") or []), tripwire=data.get("tripwire"),
        error=None if error is None else StepExecutionError(str(error)),
        retrying=bool(data.get("retrying")), decisions=dict(data.get("decisions") or {}))


@dataclass(eq=False)
class AgentDeps:
    """What one call hands to its run besides the state (never stored).

    Attributes:
        agent: The agent.
        model: Its model.
        tools: Its tools by name.
        inputs: The input processor runner.
        outputs: The output processor runner.
        errors: The error processor runner.
        ctx: The processors' request context (state, writer, tracer).
        max_steps: Model calls allowed.
        tool_choice: The call's tool choice.
        emit: Where chunks go.
        streaming: Whether anybody reads the chunks.
        api_retry_budget: API-error retries allowed.
        output: The structured output asked for (``output_type``), else ``None``.
    """

    agent: Agent
    model: LanguageModel
    tools: dict[str, Tool]
    inputs: ProcessorRunner
    outputs: ProcessorRunner
    errors: ProcessorRunner
    ctx: ProcessorContext
    max_steps: int
    tool_choice: Any
    emit: Emit
    api_retry_budget: int
    streaming: bool = True
    api_retries: int = 0
    state: AgentState | None = None  # the live state, for the caller at the end
    pipe: StreamPipeline | None = None
    """The output stream pipeline of the last model call ("step-finish" and the tools'
    "data-*" chunks go through it too)."""
    tool_data: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Tool call id -> the "data-*" chunks its tool sent, after the stream processors."""
    data_lock: anyio.Lock | None = None
    """One chunk at a time through the pipeline while tools run concurrently (made by
    the first tool chunk: most calls never need it)."""
    output: OutputCheck | None = None
    handoff: PendingHandoff | None = None
    """The handoff a ``transfer_to_<id>`` tool asked for (``procflow.agent.handoff``):
    the loop ends after the step's tool calls and the call goes on with its agent."""

    def __post_init__(self) -> None:
        # The custom chunks an output processor writes take the stream processors after
        # it (those with ``process_data_parts`` see them) on their way to the caller.
        for i, item in enumerate(self.outputs.items):
            if isinstance(item, Processor):
                self.ctx.writers[id(item)] = ProcessorWriter(self._after(i))

    def _after(self, position: int) -> Emit:
        ref = weakref.ref(self)  # the context holds the writer: no cycle through it

        async def send(chunk: Chunk) -> None:
            deps = ref()
            if deps is None:
                return
            pipe = deps.pipe
            if pipe is None:
                ml = None if deps.state is None else deps.state.messages
                pipe = deps.pipe = deps.outputs.output_stream(ml)
            for out in await pipe.process(chunk, pipe.after(position)):
                if isinstance(out, TripwireChunk) and pipe.tripwire is not None:
                    if deps.state is not None:
                        await deps.trip(deps.state, pipe.tripwire)
                else:
                    await deps.emit(out)
        return send

    def __repr__(self) -> str:
        return f"AgentDeps(agent={self.agent.id!r})"

    async def list_tools(self) -> None:
        """Set ``tools`` to the agent's tools and its toolsets' current ones (at each
        model step and before tool calls run; a toolset answers from its cache when
        nothing changed).

        Raises:
            ValueError: Two tools have the same name.
        """
        toolsets = self.agent.toolsets
        if not toolsets:
            return
        tools = dict(self.agent.tools)
        for toolset in toolsets:
            for t in await toolset.list_tools():
                if t.id in tools:
                    raise ValueError(f"agent '{self.agent.id}': toolset '{toolset.id}' has "
                                     f"a tool named '{t.id}' as another tool has; give it a "
                                     "prefix")
                tools[t.id] = t
        self.tools = tools

    async def trip(self, state: AgentState, trip: TripwireError) -> None:
        """End the loop on a processor's abort, telling the caller with a tripwire chunk."""
        if state.tripwire is None:
            state.tripwire = trip.to_dict()
            await self.emit(Chunk.tripwire(trip.reason, trip.processor_id, trip.retry,
                                           trip.metadata))


# Durable storage keeps the loop's state as its JSON and rebuilds the object on load.
register_type(AgentState, AgentState.to_json, _from_json, name="procflow.AgentState")
