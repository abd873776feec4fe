"""The runtime: runs, their events and results, and the context a step receives.

It runs compiled plans and knows ``steps`` and ``workflows`` only through the
protocols in ``procflow.runtime.execution``; the records it produces live in
``procflow.records``.
"""

from __future__ import annotations

from procflow.runtime.events import EventType, WorkflowEvent
from procflow.runtime.executors import (
    Executor,
    LocalExecutor,
    default_executor,
    set_default_executor,
)
from procflow.runtime.results import (
    RunSnapshot,
    RunStatus,
    StepResult,
    StepStatus,
    Usage,
    WorkflowResult,
)
from procflow.runtime.run import Run, RunMode
from procflow.runtime.step_context import StepContext
from procflow.runtime.stream import RunStream
from procflow.runtime.traces import Trace, TraceSpan, load_trace
from procflow.runtime.tracing import ParentSpan
from procflow.runtime.watch import RunChange, watch_run
from procflow.storage.locate import get_default_storage, set_default_storage

__all__ = [
    "EventType",
    "Executor",
    "LocalExecutor",
    "ParentSpan",
    "Run",
    "RunChange",
    "RunMode",
    "RunSnapshot",
    "RunStatus",
    "RunStream",
    "StepContext",
    "StepResult",
    "StepStatus",
    "Trace",
    "TraceSpan",
    "Usage",
    "WorkflowEvent",
    "WorkflowResult",
    "default_executor",
    "get_default_storage",
    "load_trace",
    "set_default_executor",
    "set_default_storage",
    "watch_run",
]
