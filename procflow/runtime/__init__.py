"""The runtime: runs, their events and results."""

from __future__ import annotations

from procflow.runtime.defaults import get_default_storage, set_default_storage
from procflow.runtime.events import EventType, WorkflowEvent
from procflow.runtime.results import RunSnapshot, RunStatus, StepResult, StepStatus, WorkflowResult
from procflow.runtime.run import Run
from procflow.runtime.stream import RunStream

__all__ = [
    "EventType",
    "Run",
    "RunSnapshot",
    "RunStatus",
    "RunStream",
    "StepResult",
    "StepStatus",
    "WorkflowEvent",
    "WorkflowResult",
    "get_default_storage",
    "set_default_storage",
]
