"""Handoffs: an agent hands the conversation to another agent, which answers the user
from then on (``Agent(handoffs=[billing, handoff(support, input_filter=fn)])``).

Each target is a tool ``transfer_to_<id>`` of the agent. When the model calls it, the
agent's loop ends after that step's tool calls (its run is stored as usual, the call's
span holding a "handoff" span and the stream a "data-handoff" chunk), then the call goes
on with the target: a run of its own (``HANDOFF_FROM_KEY`` in its request context names
the run it came from) on the conversation so far, less system messages, through the
input filter if given: the target's instructions, tools, processors (its guards see what
it receives) and model. ``FullOutput.agent_id`` and ``run_id`` name the agent that
answered and its run; ``usage`` counts both.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from procflow.context import RequestContext
from procflow.messages import Message, new_secret_id
from procflow.runtime.tracing import Tracer
from procflow.tools import Tool, ToolContext

if TYPE_CHECKING:
    from procflow.agent.agent import Agent
    from procflow.agent.output import FullOutput
    from procflow.agent.state import AgentDeps, Emit

__all__ = ["HANDOFF_FROM_KEY", "MAX_HANDOFFS", "Handoff", "HandoffTool", "InputFilter",
           "PendingHandoff", "handoff", "without_tool_calls"]

HANDOFF_FROM_KEY = "procflow__handoffFrom"
"""Request-context entry of a run a handoff started: ``{"run_id", "agent_id",
"tool_call_id"}`` of the agent that handed over (persisted with the run)."""

MAX_HANDOFFS = 8
"""Handoffs one call may chain (a → b → a ...) before it fails."""

InputFilter = Callable[[list[Message]], "list[Message] | Awaitable[list[Message]]"]


@dataclass(frozen=True, slots=True)
class Handoff:
    """A handoff target with its options (``handoff(agent, ...)``).

    Attributes:
        agent: The agent taking over.
        input_filter: ``fn(messages) -> messages`` (sync or async): what of the
            conversation is passed (default: all of it but system messages).
        tool_name: The tool's name (default ``transfer_to_<agent id>``).
        description: The tool's description (default: from the agent's description,
            else the first line of its instructions).
    """

    agent: Agent[Any]
    input_filter: InputFilter | None = None
    tool_name: str | None = None
    description: str | None = None


def handoff(agent: Agent[Any], *, input_filter: InputFilter | None = None,
            tool_name: str | None = None, description: str | None = None) -> Handoff:
    """A handoff to ``agent`` for ``Agent(handoffs=[...])``, with options (see
    ``Handoff``); a bare agent in ``handoffs=`` is ``handoff(agent)``."""
    from procflow.agent.agent import Agent

    if not isinstance(agent, Agent):
        raise TypeError(f"handoff() takes an Agent, got {type(agent).__name__}")
    if input_filter is not None and not callable(input_filter):
        raise TypeError(f"input_filter must be a function of the messages, got "
                        f"{input_filter!r}")
    return Handoff(agent, input_filter, tool_name, description)


def without_tool_calls(messages: list[Message]) -> list[Message]:
    """An input filter passing the conversation without tool calls and results (the
    target does not see the tools of the agent it takes over from)."""
    out: list[Message] = []
    for msg in messages:
        if msg.role == "tool":
            continue
        if msg.role == "assistant" and not msg.text:
            continue
        if msg.role == "assistant" and len(msg.content.parts) > 1:
            msg = Message.assistant(msg.text)
        out.append(msg)
    return out


@dataclass(frozen=True, slots=True)
class PendingHandoff:
    """A handoff the model asked for in the current call (``AgentDeps.handoff``).

    Attributes:
        target: Where the conversation goes.
        source_id: The agent handing it over.
        run_id: The id of the target's run, chosen in advance (the span names it).
        tool_call_id: The ``transfer_to_<id>`` call.
    """

    target: Handoff
    source_id: str
    run_id: str
    tool_call_id: str


class HandoffTool(Tool):
    """A ``transfer_to_<id>`` tool; ``target`` is the agent it hands over to (graphs
    draw the edge)."""

    def __init__(self, target: Agent[Any], id: str, description: str,
                 execute: Any) -> None:
        super().__init__(id, description, _NoArgs, execute)
        self.target = target


class _NoArgs(BaseModel):
    model_config = ConfigDict(extra="ignore")


def handoff_tools(source: Agent[Any], items: Sequence[Any]) -> list[Tool]:
    """The ``transfer_to_<id>`` tools of ``source``'s handoffs."""
    from procflow.agent.agent import Agent

    tools: list[Tool] = []
    for item in items:
        target = handoff(item) if isinstance(item, Agent) else item
        if not isinstance(target, Handoff):
            raise TypeError(f"handoffs must be agents or handoff(agent, ...), got "
                            f"{type(item).__name__}")
        tools.append(_tool(source.id, target))
    return tools


def _tool(source_id: str, target: Handoff) -> Tool:
    agent = target.agent
    name = target.tool_name or f"transfer_to_{agent.id}".replace(".", "_").replace(":", "_")
    about = (target.description or agent.description
             or agent.instructions.strip().split("\n")[0] or f"agent {agent.name}")
    description = f"Hand the conversation to agent {agent.name}: {about}"

    async def execute(args: _NoArgs, ctx: ToolContext) -> str:
        from procflow.agent.loop import live_deps

        deps = live_deps.get(ctx.run_id or "")
        if deps is None:
            raise RuntimeError(f"tool '{name}' hands a conversation over inside an agent's "
                               "call only")
        if deps.handoff is not None:
            return (f"not transferred: the conversation already goes to agent "
                    f"'{deps.handoff.target.agent.id}'")
        pending = PendingHandoff(target, source_id, new_secret_id(), ctx.tool_call_id)
        deps.handoff = pending
        parent = ctx.parent_span
        if parent is not None:
            span = parent.tracer.start(f"handoff: {source_id} -> {agent.id}", "tool",
                                       parent.span)
            Tracer.end(span, "success", handoff={"from": source_id, "to": agent.id,
                                                 "run_id": pending.run_id})
        await ctx.writer.custom("data-handoff", {"from": source_id, "to": agent.id,
                                                 "run_id": pending.run_id})
        return f"Transferred to agent {agent.name}; it answers from now on."

    return HandoffTool(agent, name, description, execute)


async def hand_over(pending: PendingHandoff, deps: AgentDeps, output: FullOutput[Any],
                    options: dict[str, Any], emit: Emit, streaming: bool) -> FullOutput[Any]:
    """Go on with the target of ``pending`` on ``output``'s conversation."""
    target = pending.target
    depth = int(options.get("handoff_depth") or 0) + 1
    if depth > MAX_HANDOFFS:
        raise RuntimeError(f"agent '{pending.source_id}': more than {MAX_HANDOFFS} handoffs "
                           "in one call (agents handing the conversation back and forth?)")
    messages = [m for m in output.messages if m.role != "system"
                and not _hidden(m)]
    if target.input_filter is not None:
        got = target.input_filter(list(messages))
        messages = await got if inspect.isawaitable(got) else got
    rc = RequestContext(deps.ctx.request_context)
    rc.set(HANDOFF_FROM_KEY, {"run_id": output.run_id, "agent_id": pending.source_id,
                              "tool_call_id": pending.tool_call_id}, persist=True)
    agent = target.agent
    opts = agent._with_output({"request_context": rc, "run_id": pending.run_id,
                               "handoff_depth": depth,
                               "parent_span": options.get("parent_span")}, None)
    got_out = await agent._call(messages, opts, emit, streaming=streaming)
    return dataclasses.replace(got_out, usage=output.usage + got_out.usage)


def _hidden(msg: Message) -> bool:
    signal = msg.content.metadata.get("signal")
    return isinstance(signal, dict) and bool(signal.get("hidden"))
