"""``RunData``: what a run holds between its executions — input, state, request context,
step results and how it last ended — and how it is read back from storage."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from procflow.context import RequestContext
from procflow.errors import SnapshotCorruptedError
from procflow.records import RunSnapshot, RunStatus, StepResult
from procflow.runtime.execution import PlanUnit
from procflow.runtime.results import WorkflowResult
from procflow.storage.null import NullStorage

__all__ = ["NULL_STORAGE", "RunData", "as_context", "checked_input"]

NULL_STORAGE = NullStorage()
"""The storage of an ephemeral run: it keeps nothing."""


class RunData:
    """A run's data as this process knows it (one per ``Run``; an execution reads its
    input, state and results from here and leaves its status and result here)."""

    __slots__ = ("context", "created_at", "input", "records", "result", "state", "status",
                 "suspended")

    def __init__(self) -> None:
        self.status: RunStatus = "pending"
        self.records: dict[str, StepResult] = {}
        self.input: Any = None
        self.state: dict[str, Any] = {}
        self.context = RequestContext()
        self.created_at = time.time()
        self.result: WorkflowResult[Any] | None = None
        self.suspended: list[str] = []
        """Paths of the suspended steps."""

    def restore(self, workflow: PlanUnit, run_id: str, snap: RunSnapshot,
                steps: dict[str, StepResult]) -> None:
        """Take a stored header and step results as this run's.

        Raises:
            SnapshotCorruptedError: The stored input no longer matches the workflow's
                input schema.
        """
        self.status = snap.status
        self.records = steps
        self.state = dict(snap.state)
        self.context = RequestContext.restored(snap.request_context)
        self.created_at = snap.created_at
        self.suspended = [".".join(p) for p in snap.suspended]
        self.input = checked_input(workflow, run_id, snap.input)
        self.result = None
        if snap.status not in ("pending", "running"):
            self.result = WorkflowResult(
                snap.status, snap.result, dict(steps), snap.error, dict(snap.state),
                [list(p) for p in snap.suspended], snap.tripwire, None, run_id)


def checked_input(workflow: PlanUnit, run_id: str, data: Any) -> Any:
    """A stored input as the workflow's input schema makes it.

    Raises:
        SnapshotCorruptedError: It no longer matches the schema.
    """
    schema = workflow.input
    if schema is None or data is None:
        return data
    try:
        return schema.validate(data)
    except Exception as exc:
        raise SnapshotCorruptedError(
            f"stored input of run '{run_id}' (workflow '{workflow.id}') no longer matches "
            f"the workflow's input schema: {exc}", workflow_id=workflow.id,
            run_id=run_id) from exc


def as_context(value: Any) -> RequestContext:
    """A ``request_context=`` argument as a ``RequestContext``.

    Raises:
        TypeError: It is neither a ``RequestContext`` nor a mapping.
    """
    if value is None:
        return RequestContext()
    if isinstance(value, RequestContext):
        return value
    if isinstance(value, Mapping):
        return RequestContext(value)
    raise TypeError(f"request_context must be a RequestContext or a mapping, got "
                    f"{type(value).__name__}")
