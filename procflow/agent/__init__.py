"""The agent: processors around a model, with tools; its loop is a workflow."""

from __future__ import annotations

from procflow.agent.agent import Agent, AgentStepResume, ProcessorArray
from procflow.agent.handoff import Handoff, handoff, without_tool_calls
from procflow.agent.loop import AgentLoop
from procflow.agent.options import GenerateOptions, MemoryOption, ResumeOptions, ToolChoice
from procflow.agent.output import (
    AgentResponse,
    FullOutput,
    ModelOutput,
    StepRecord,
    SuspendedCall,
    UIMessage,
)
from procflow.agent.state import AgentState
from procflow.tools import Tool, ToolContext, ToolInputError, ToolSuspended, tool

__all__ = [
    "Agent",
    "AgentLoop",
    "AgentResponse",
    "AgentState",
    "AgentStepResume",
    "FullOutput",
    "GenerateOptions",
    "Handoff",
    "MemoryOption",
    "ModelOutput",
    "ProcessorArray",
    "ResumeOptions",
    "StepRecord",
    "SuspendedCall",
    "Tool",
    "ToolChoice",
    "ToolContext",
    "ToolInputError",
    "ToolSuspended",
    "UIMessage",
    "handoff",
    "tool",
    "without_tool_calls",
]
