"""Processors about tools: ``ToolCallFilter`` (drops past tool calls from the prompt) and
``ToolSearchProcessor`` (lets the model search and load tools on demand)."""

from __future__ import annotations

from procflow.processors.builtin.tools.filter import ToolCallFilter
from procflow.processors.builtin.tools.search import (
    ToolSearchHit,
    ToolSearchOptions,
    ToolSearchProcessor,
)

__all__ = ["ToolCallFilter", "ToolSearchHit", "ToolSearchOptions", "ToolSearchProcessor"]
