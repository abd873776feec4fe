"""procflow: LLM processors as steps of typed, async DAG workflows."""

from __future__ import annotations

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
from procflow.runtime import (
    Run,
    RunStream,
    StepResult,
    WorkflowEvent,
    WorkflowResult,
    get_default_storage,
    set_default_storage,
)
from procflow.steps import Step, StepContext, create_step, step
from procflow.workflows import Workflow, create_workflow

__version__ = "0.1.0"

__all__ = [
    "RESOURCE_ID_KEY",
    "THREAD_ID_KEY",
    "APICallError",
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
    "set_default_storage",
    "step",
]
