"""An agent as a tool of another agent (``Agent.as_tool``): the calling agent's model
asks it something, its answer is the tool's result.

Each call is a stored run of the sub-agent (in the sub-agent's storage) whose spans are
recorded under the tool call's span of the calling run, so the caller's trace (``procflow
trace``, the studio, the OpenTelemetry export) shows it nested. The sub-run's request
context holds ``PARENT_RUN_KEY`` (the calling run, its span and tool call), kept with it.
Its tokens add up in the caller's usage. The sub-agent's call has no memory thread: it
neither reads nor writes the caller's conversation. A sub-agent that suspends (a tool waiting for
approval) suspends the caller at this tool call; resuming the caller with
``resume_data={"approve": [...], "deny": [...], "data": ...}`` resumes the sub-agent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from procflow.context import THREAD_ID_KEY, RequestContext
from procflow.tools import Tool, ToolContext

if TYPE_CHECKING:
    from procflow.agent.agent import Agent
    from procflow.agent.output import FullOutput

__all__ = ["PARENT_RUN_KEY", "AgentTool", "SubAgentStopped", "agent_tool"]

PARENT_RUN_KEY = "procflow__parentRun"
"""Request-context entry of a sub-agent's run: ``{"run_id", "span_id", "tool_call_id",
"agent_id"}`` of the call that started it (persisted with the run)."""


class SubAgentStopped(RuntimeError):
    """A processor of the sub-agent aborted its call: the caller's model gets this as
    the tool's error result (the caller goes on; its own guards decide the rest)."""


class AgentTool(Tool):
    """The tool ``Agent.as_tool()`` makes; ``agent`` is the agent it calls (graphs draw
    it)."""

    def __init__(self, agent: Agent[Any], id: str, description: str,
                 execute: Any) -> None:
        super().__init__(id, description, _Prompt, execute)
        self.agent = agent


class _Prompt(BaseModel):
    prompt: str = Field(description="What to ask the agent, with everything it needs to "
                                    "know: it does not see this conversation.")


def agent_tool(agent: Agent[Any], name: str | None = None,
               description: str | None = None) -> Tool:
    """``agent.as_tool()``: see ``Agent.as_tool``."""
    from procflow.agent.agent import AgentStepResume

    agent_id = agent.id
    tool_id = name or agent_id.replace(".", "_").replace(":", "_")
    about = (description or agent.description or agent.instructions.strip().split("\n")[0]
             or f"Ask agent {agent.name}")

    async def execute(args: _Prompt, ctx: ToolContext) -> Any:
        options = agent._with_output({"request_context": _child_context(ctx, agent_id),
                                      "parent_span": ctx.parent_span}, None)

        async def ignore(chunk: Any) -> None:
            return None

        waiting = ctx.suspend_payload
        if isinstance(waiting, Mapping) and waiting.get("agent_id") == agent_id:
            try:
                decision = AgentStepResume.model_validate(ctx.resume_data or {})
            except ValidationError as exc:
                ctx.suspend({**waiting, "error": (
                    f"agent '{agent_id}' waits on {_ids(waiting)}: resume with "
                    'resume_data={"approve": [...], "deny": [...], "data": ...}: '
                    f"{exc}")})
            known = set(_ids(waiting))
            approve = [i for i in decision.approve if i in known]
            deny = [i for i in decision.deny if i in known]
            if not (approve or deny or decision.data is not None):
                ctx.suspend(dict(waiting))  # the resume was for another call
            out = await agent._resume(str(waiting["run_id"]), approve, deny, decision.data,
                                      options, ignore, streaming=False)
        else:
            out = await agent._call(args.prompt, options, ignore, streaming=False)
        return _answer(agent_id, out, ctx)

    return AgentTool(agent, tool_id, about, execute)


def _child_context(ctx: ToolContext, agent_id: str) -> RequestContext:
    """The caller's request context, less its memory thread (the sub-agent's call is a
    conversation of its own), plus the link to the caller."""
    rc = RequestContext(ctx.request_context)
    rc.delete(THREAD_ID_KEY)
    span = ctx.parent_span
    rc.set(PARENT_RUN_KEY, {"run_id": ctx.run_id, "tool_call_id": ctx.tool_call_id,
                            "span_id": None if span is None else span.span.span_id,
                            "agent_id": agent_id}, persist=True)
    return rc


def _ids(waiting: Mapping[str, Any]) -> list[str]:
    return [str(c.get("tool_call_id")) for c in waiting.get("calls") or ()]


def _answer(agent_id: str, out: FullOutput[Any], ctx: ToolContext) -> Any:
    """The tool's result from the sub-agent's output. Its tokens go to the caller once
    it is done: a suspended call counts all of them when resumed (what the caller's
    state gained before suspending is not what its stored run resumes from)."""
    if out.finish_reason == "suspended":
        ctx.suspend({"agent_id": agent_id, "run_id": out.run_id, "calls": [
            {"tool_call_id": c.tool_call_id, "tool_name": c.tool_name, "args": c.args,
             "payload": c.payload} for c in out.suspended]})
    if out.usage.total_tokens and ctx.add_usage is not None:
        ctx.add_usage(out.usage.to_dict())
    if out.tripwire is not None:
        raise SubAgentStopped(f"agent '{agent_id}' was stopped by processor "
                              f"'{out.tripwire.processor_id}': {out.tripwire.reason}")
    if out.output is not None:  # the validated value, as JSON
        value = out.output
        if isinstance(value, BaseModel):
            return value.model_dump_json()
        return json.dumps(TypeAdapter(type(value)).dump_python(value, mode="json"))
    return out.text
