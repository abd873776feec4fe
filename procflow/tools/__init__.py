"""Tools a model may call: ``Tool``, ``@tool`` and ``ToolContext``.

A layer below the processors and the agent: a processor may add tools
(``ToolSearchProcessor``, ``WorkingMemory``) and the agent runs them.
"""

from __future__ import annotations

from procflow.tools.tool import (
    ChunkWriter,
    Tool,
    ToolContext,
    ToolInputError,
    ToolSuspended,
    tool,
)
from procflow.tools.toolset import Toolset, toolset_sessions

__all__ = ["ChunkWriter", "Tool", "ToolContext", "ToolInputError", "ToolSuspended", "Toolset",
           "tool", "toolset_sessions"]
