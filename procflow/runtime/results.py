"""The outcome of a run (``WorkflowResult``); the per-step records live in ``procflow.records``.

``StepResult``, ``RunSnapshot`` and the status literals are re-exported here for the
import paths that name them from the runtime.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from procflow.records import (
    TERMINAL_STATUSES,
    RunSnapshot,
    RunStatus,
    StepResult,
    StepStatus,
)

__all__ = [
    "TERMINAL_STATUSES",
    "RunSnapshot",
    "RunStatus",
    "StepResult",
    "StepStatus",
    "WorkflowResult",
]


@dataclass(frozen=True, slots=True)
class WorkflowResult:
    """The outcome of a run.

    Attributes:
        status: "success", "failed", "suspended", "tripwire" or "canceled".
        result: The workflow's output on success (a pydantic instance with an output schema).
        steps: Step id (dotted for nested steps) to its ``StepResult``.
        error: Why the run failed, when it failed.
        state: The run's shared state at the end.
        suspended: Paths of the suspended steps, each a list of step ids from the outside in.
        tripwire: Details of the abort when status is "tripwire".
        usage: Token usage summed over model calls, when the run made any.
        run_id: The run's id.
    """

    status: RunStatus
    result: Any = None
    steps: dict[str, StepResult] = field(default_factory=dict)
    error: BaseException | None = None
    state: dict[str, Any] = field(default_factory=dict)
    suspended: list[list[str]] = field(default_factory=list)
    tripwire: dict[str, Any] | None = None
    usage: dict[str, int] | None = None
    run_id: str = ""
