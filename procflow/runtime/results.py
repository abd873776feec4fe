"""The outcome of a run (``WorkflowResult``); the per-step records live in ``procflow.records``.

``StepResult``, ``RunSnapshot`` and the status literals are re-exported here for the
import paths that name them from the runtime.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic

from procflow.records import (
    TERMINAL_STATUSES,
    RunSnapshot,
    RunStatus,
    StepResult,
    StepStatus,
    Tripwire,
    Usage,
)
from procflow.runtime.execution import OutputT

__all__ = [
    "TERMINAL_STATUSES",
    "RunSnapshot",
    "RunStatus",
    "StepResult",
    "StepStatus",
    "Usage",
    "WorkflowResult",
]


@dataclass(frozen=True, slots=True)
class WorkflowResult(Generic[OutputT]):
    """The outcome of a run: ``WorkflowResult[Out]`` for a workflow whose output schema
    is ``Out``.

    Attributes:
        status: "success", "failed", "suspended", "tripwire" or "canceled".
        result: The workflow's output on success (an ``Out`` instance), else ``None``.
        steps: Step id (dotted for nested steps) to its ``StepResult``.
        error: Why the run failed, when it failed.
        state: The run's shared state at the end.
        suspended: Paths of the suspended steps, each a list of step ids from the outside
            in (``suspended_at`` gives them as dotted paths).
        tripwire: The abort (``tripwire.reason``, ``.processor_id``, ``.metadata``) when
            status is "tripwire".
        usage: Tokens summed over every model and agent call of the run (nested
            workflows and agents used as steps included), ``None`` when none was made.
        run_id: The run's id.
    """

    status: RunStatus
    result: OutputT | None = None
    steps: dict[str, StepResult] = field(default_factory=dict)
    error: BaseException | None = None
    state: dict[str, Any] = field(default_factory=dict)
    suspended: list[list[str]] = field(default_factory=list)
    tripwire: Tripwire | None = None
    usage: Usage | None = None
    run_id: str = ""

    @property
    def suspended_at(self) -> list[str]:
        """The suspended steps as dotted paths, the keys of ``steps`` and what
        ``Run.resume(step=...)`` takes: ``["approve"]``, ``["outer.inner.wait"]``."""
        return [".".join(path) for path in self.suspended]
