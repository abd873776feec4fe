"""procflow: LLM processors as steps of typed, async DAG workflows."""

from __future__ import annotations

import os as _os
from typing import TYPE_CHECKING, Any

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
    TripWire,
    WorkflowDefinitionError,
    WorkflowRunError,
)
from procflow.otel import instrument, uninstrument
from procflow.runtime import (
    LocalExecutor,
    Run,
    RunStream,
    StepResult,
    WorkflowEvent,
    WorkflowResult,
    get_default_storage,
    set_default_executor,
    set_default_storage,
)
from procflow.steps import Step, StepContext, create_step, step
from procflow.workflows import Workflow, create_workflow

if TYPE_CHECKING:
    from procflow.agent import Agent, Tool, tool

__version__ = "0.1.0"

_LAZY = {"Agent": "procflow.agent", "Tool": "procflow.agent", "tool": "procflow.agent"}


def __getattr__(name: str) -> Any:
    # The agent pulls in the processor layer; load it on first use to keep
    # ``import procflow`` light.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)

__all__ = [
    "RESOURCE_ID_KEY",
    "THREAD_ID_KEY",
    "APICallError",
    "Agent",
    "LocalExecutor",
    "ProcessorError",
    "ProcflowError",
    "RequestContext",
    "Run",
    "RunNotFoundError",
    "RunNotSuspendedError",
    "RunStateError",
    "RunStream",
    "SnapshotCorruptedError",
    "Step",
    "StepContext",
    "StepExecutionError",
    "StepResult",
    "StepTimeoutError",
    "StepValidationError",
    "StorageError",
    "Tool",
    "TripWire",
    "Workflow",
    "WorkflowDefinitionError",
    "WorkflowEvent",
    "WorkflowResult",
    "WorkflowRunError",
    "__version__",
    "create_step",
    "create_workflow",
    "get_default_storage",
    "instrument",
    "set_default_executor",
    "set_default_storage",
    "step",
    "tool",
    "uninstrument",
]

if _os.environ.get("PROCFLOW_OTEL", "").lower() in ("1", "true", "yes"):
    instrument()
