"""procflow: LLM processors as steps of typed, async DAG workflows."""

from __future__ import annotations

import os as _os
from typing import TYPE_CHECKING

from procflow._lazy import lazy_exports
from procflow.context import RESOURCE_ID_KEY, THREAD_ID_KEY, RequestContext
from procflow.errors import (
    APICallError,
    ProcessorError,
    ProcflowError,
    RunNotFoundError,
    RunNotSuspendedError,
    RunStateError,
    SnapshotCorruptedError,
    StepExecutionError,
    StepTimeoutError,
    StepValidationError,
    StorageError,
    TripwireError,
    WorkflowDefinitionError,
    WorkflowRunError,
)
from procflow.messages import (
    Chunk,
    DataChunk,
    ErrorChunk,
    Finish,
    ReasoningDelta,
    Start,
    StepFinish,
    StepStart,
    SuspendedChunk,
    TextDelta,
    ToolCallChunk,
    ToolResultChunk,
    TripwireChunk,
)
from procflow.otel import instrument, uninstrument
from procflow.records import Tripwire, Usage
from procflow.runtime import (
    LocalExecutor,
    Run,
    RunChange,
    RunStream,
    StepResult,
    Trace,
    TraceSpan,
    WorkflowEvent,
    WorkflowResult,
    get_default_storage,
    load_trace,
    set_default_executor,
    set_default_storage,
)
from procflow.steps import Step, StepContext, create_step, step
from procflow.workflows import Workflow, create_workflow

if TYPE_CHECKING:
    from procflow.agent import Agent, GenerateOptions, handoff
    from procflow.tools import Tool, tool

from procflow._version import __version__

# The agent pulls in the processor layer; load it on first use to keep
# ``import procflow`` light.
__getattr__, __dir__ = lazy_exports(__name__, globals(), deprecated={
    "TripWire": ("procflow.errors", "TripwireError")})

__all__ = [
    "RESOURCE_ID_KEY",
    "THREAD_ID_KEY",
    "APICallError",
    "Agent",
    "Chunk",
    "DataChunk",
    "ErrorChunk",
    "Finish",
    "GenerateOptions",
    "LocalExecutor",
    "ProcessorError",
    "ProcflowError",
    "ReasoningDelta",
    "RequestContext",
    "Run",
    "RunChange",
    "RunNotFoundError",
    "RunNotSuspendedError",
    "RunStateError",
    "RunStream",
    "SnapshotCorruptedError",
    "Start",
    "Step",
    "StepContext",
    "StepExecutionError",
    "StepFinish",
    "StepResult",
    "StepStart",
    "StepTimeoutError",
    "StepValidationError",
    "StorageError",
    "SuspendedChunk",
    "TextDelta",
    "Tool",
    "ToolCallChunk",
    "ToolResultChunk",
    "Trace",
    "TraceSpan",
    "Tripwire",
    "TripwireChunk",
    "TripwireError",
    "Usage",
    "Workflow",
    "WorkflowDefinitionError",
    "WorkflowEvent",
    "WorkflowResult",
    "WorkflowRunError",
    "__version__",
    "create_step",
    "create_workflow",
    "get_default_storage",
    "handoff",
    "instrument",
    "load_trace",
    "set_default_executor",
    "set_default_storage",
    "step",
    "tool",
    "uninstrument",
]

if _os.environ.get("PROCFLOW_OTEL", "").lower() in ("1", "true", "yes"):
    from procflow.otel import instrument_from_env as _instrument_from_env

    _instrument_from_env()
