"""The studio: Rich renderers of workflow graphs and runs, and text exports.

Only this package imports ``rich``; the rest of procflow never needs it.
"""

from __future__ import annotations

from procflow.studio.diff import TraceDiff
from procflow.studio.export import to_dot, to_mermaid
from procflow.studio.graph import GraphView, NodeState
from procflow.studio.live import LiveRun
from procflow.studio.trace import TraceView

__all__ = ["GraphView", "LiveRun", "NodeState", "TraceDiff", "TraceView", "to_dot",
           "to_mermaid"]
