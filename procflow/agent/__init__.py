"""The agent: processors around a model, with tools; its loop is a workflow."""

from __future__ import annotations

from procflow.agent.agent import Agent, ProcessorArray
from procflow.agent.output import AgentResponse, FullOutput, ModelOutput, StepRecord, UIMessage
from procflow.tools import Tool, ToolContext, ToolInputError, tool

__all__ = [
    "Agent",
    "AgentResponse",
    "FullOutput",
    "ModelOutput",
    "ProcessorArray",
    "StepRecord",
    "Tool",
    "ToolContext",
    "ToolInputError",
    "UIMessage",
    "tool",
]
