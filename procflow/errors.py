"""Every public exception of procflow, in one module.

The tree::

    ProcflowError
    ├── WorkflowDefinitionError        a workflow is built wrongly (raised by the builder)
    ├── WorkflowRunError               something went wrong while running a workflow
    │   ├── StepValidationError        run input, step input/output or resume data fails its schema
    │   ├── StepExecutionError         a step raised; the original exception is ``__cause__``
    │   │   └── StepTimeoutError       a step attempt ran past its ``timeout``
    │   ├── RunNotFoundError           no run with that id is stored
    │   └── RunStateError              the run is not in a state that allows the call
    │       └── RunNotSuspendedError   ``resume()`` of a run (or step) that is not suspended
    ├── StorageError                   a storage backend failed
    │   ├── SnapshotCorruptedError     stored run data cannot be loaded (it is left untouched)
    │   └── MemoryCorruptedError       a stored memory row cannot be loaded (it is left untouched)
    ├── ProcessorError                 a processor is defined or behaves wrongly
    ├── TripwireError                  a processor aborted the request (``args.abort(...)``)
    ├── APICallError                   a model provider rejected or failed a call
    ├── OutputValidationError          an agent's answer is not its ``output_type``, after retries
    └── MCPError                       an MCP server failed (did not start, crashed, hung...)

Errors carry their context as attributes (``workflow_id``, ``step_id``, ``run_id``,
``attempt``...) so callers need not parse messages.

``TripWire``, the old name of ``TripwireError``, still works for one release and warns
(``DeprecationWarning``); ``procflow.Tripwire`` is the record a result carries, not an
exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from procflow._lazy import lazy_exports

__all__ = [
    "APICallError",
    "MCPError",
    "MemoryCorruptedError",
    "OutputValidationError",
    "ProcessorError",
    "ProcflowError",
    "RunNotFoundError",
    "RunNotSuspendedError",
    "RunStateError",
    "SnapshotCorruptedError",
    "StepExecutionError",
    "StepTimeoutError",
    "StepValidationError",
    "StorageError",
    "TripwireError",
    "WorkflowDefinitionError",
    "WorkflowRunError",
]


class ProcflowError(Exception):
    """Root of every exception procflow raises on purpose."""


class WorkflowDefinitionError(ProcflowError):
    """A workflow or step is defined wrongly; raised while building, never while running.

    Attributes:
        workflow_id: The workflow being built, when known.
        step_id: The offending step, when there is one.
    """

    def __init__(self, message: str, *, workflow_id: str | None = None,
                 step_id: str | None = None) -> None:
        super().__init__(message)
        self.workflow_id = workflow_id
        self.step_id = step_id


class WorkflowRunError(ProcflowError):
    """Base of the errors raised while a workflow runs.

    Attributes:
        workflow_id: The workflow of the run.
        run_id: The run, when one exists.
        step_id: The step concerned, when there is one (a dotted path for nested steps).
    """

    def __init__(self, message: str, *, workflow_id: str | None = None,
                 run_id: str | None = None, step_id: str | None = None) -> None:
        super().__init__(message)
        self.workflow_id = workflow_id
        self.run_id = run_id
        self.step_id = step_id


class StepValidationError(WorkflowRunError):
    """Data failed a step's (or the workflow's) schema.

    Attributes:
        field: Dotted location of the first failing field (``"<root>"`` for the value itself).
        errors: pydantic's error list, when the failure came from pydantic.
    """

    def __init__(self, message: str, *, workflow_id: str | None = None,
                 run_id: str | None = None, step_id: str | None = None,
                 field: str = "<root>", errors: list[Any] | None = None) -> None:
        super().__init__(message, workflow_id=workflow_id, run_id=run_id, step_id=step_id)
        self.field = field
        self.errors = errors or []


class StepExecutionError(WorkflowRunError):
    """A step raised an exception on its last attempt; the original is ``__cause__``.

    Attributes:
        attempt: How many attempts were made.
    """

    def __init__(self, message: str, *, workflow_id: str | None = None,
                 run_id: str | None = None, step_id: str | None = None,
                 attempt: int = 1) -> None:
        super().__init__(message, workflow_id=workflow_id, run_id=run_id, step_id=step_id)
        self.attempt = attempt


class StepTimeoutError(StepExecutionError):
    """A step attempt ran longer than its ``timeout``."""


class RunNotFoundError(WorkflowRunError):
    """No run with the given id is stored for the workflow."""


class RunStateError(WorkflowRunError):
    """The run's status does not allow the requested call (e.g. starting a run twice)."""


class RunNotSuspendedError(RunStateError):
    """``resume()`` was called on a run, or a step, that is not suspended."""


class StorageError(ProcflowError):
    """A storage backend failed to read or write."""


class SnapshotCorruptedError(StorageError):
    """Stored run data cannot be loaded; the stored data is left as it is.

    Attributes:
        workflow_id: The workflow of the run.
        run_id: The run whose data is corrupted.
    """

    def __init__(self, message: str, *, workflow_id: str | None = None,
                 run_id: str | None = None) -> None:
        super().__init__(message)
        self.workflow_id = workflow_id
        self.run_id = run_id


class MemoryCorruptedError(StorageError):
    """A stored memory row (a message or a working memory) cannot be decoded; it is left
    as it is, and nothing else is lost.

    Attributes:
        thread_id: The thread of the row, when known.
        row_id: The row's id (a message id, or a working-memory key).
    """

    def __init__(self, message: str, *, thread_id: str | None = None,
                 row_id: str | None = None) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.row_id = row_id


class ProcessorError(ProcflowError):
    """A processor is defined wrongly or one of its hooks misbehaved.

    Attributes:
        processor_id: The processor concerned, when known.
        hook: The hook concerned, when known.
    """

    def __init__(self, message: str, *, processor_id: str | None = None,
                 hook: str | None = None) -> None:
        super().__init__(message)
        self.processor_id = processor_id
        self.hook = hook


class TripwireError(ProcflowError):
    """A processor (or step) aborted the request: what ``args.abort(...)`` raises.

    The run or call ends with status "tripwire" and carries the abort as a
    ``procflow.Tripwire`` record (``result.tripwire``; ``to_dict()`` gives its fields).
    Formerly ``TripWire``, a deprecated alias that still catches it.

    Attributes:
        reason: Why it aborted; shown to the caller (and to the model on retry).
        retry: Whether the step should be retried with the reason added for the model.
        metadata: Structured details (kept as given, never flattened into the reason).
        processor_id: The processor that aborted, when known.
    """

    def __init__(self, reason: str, *, retry: bool = False,
                 metadata: Mapping[str, Any] | None = None,
                 processor_id: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry = retry
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.processor_id = processor_id

    def to_dict(self) -> dict[str, Any]:
        """``{"reason", "processor_id", "retry", "metadata"}``, as traces, results and
        stream chunks carry it (``metadata`` copied)."""
        return {"reason": self.reason, "processor_id": self.processor_id,
                "retry": self.retry, "metadata": dict(self.metadata)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TripwireError:
        """The inverse of ``to_dict()`` (a missing reason reads "blocked")."""
        return cls(str(data.get("reason", "blocked")), retry=bool(data.get("retry")),
                   metadata=data.get("metadata"), processor_id=data.get("processor_id"))


class APICallError(ProcflowError):
    """A model provider rejected or failed a call.

    Attributes:
        status_code: The HTTP status, or ``None`` for connection-level failures.
        body: The response body (never containing the API key).
        is_retryable: Whether retrying the same request may succeed.
        retry_after: Seconds the provider asked to wait before retrying (its
            ``Retry-After`` header), when it said.
    """

    def __init__(self, message: str, *, status_code: int | None = None, body: str = "",
                 is_retryable: bool = False, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = body
        self.is_retryable = is_retryable
        self.retry_after = retry_after


class OutputValidationError(ProcflowError):
    """An agent's answer does not validate as its ``output_type``, even after the
    ``output_retries`` the model was given (each told what was wrong).

    Attributes:
        text: The last answer's text.
        errors: The validation errors of the last answer (pydantic's ``errors()``).
        attempts: How many answers were tried.
    """

    def __init__(self, message: str, *, text: str, errors: list[Any],
                 attempts: int) -> None:
        super().__init__(message)
        self.text = text
        self.errors = errors
        self.attempts = attempts


class MCPError(ProcflowError):
    """An MCP server failed: it did not start, crashed, hung past its ``timeout``,
    answered with a protocol error or a result too large.

    Where it surfaces: while the agent lists the server's tools (before the model
    sees any of them), it ends the agent call; during a tool call, the model gets it
    as that call's error result (``is_error=True``) and the run goes on.

    Attributes:
        server: The server's id.
        tool: The tool called, or ``None`` outside a call.
    """

    def __init__(self, message: str, *, server: str, tool: str | None = None) -> None:
        super().__init__(message)
        self.server = server
        self.tool = tool


__getattr__, __dir__ = lazy_exports(__name__, globals(), {}, deprecated={
    "TripWire": (__name__, "TripwireError"),
})
