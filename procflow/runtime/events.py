"""Events a run emits to whoever streams it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["EventType", "WorkflowEvent"]

EventType = Literal["run-start", "step-start", "step-result", "step-error", "step-suspended",
                    "step-skipped", "custom", "run-finish"]


@dataclass(frozen=True, slots=True)
class WorkflowEvent:
    """One event of a run's stream.

    Attributes:
        type: What happened.
        run_id: The run.
        step_id: The step's path ("outer.inner" inside nested workflows), or ``None``
            for run-level events.
        payload: Event data: ``{"input": ...}`` on step-start, ``{"output": ...}`` on
            step-result, ``{"error": ...}`` on step-error, ``{"payload": ...}`` on
            step-suspended, ``{"type": ..., "data": ...}`` on custom, ``{"result":
            WorkflowResult}`` on run-finish.
        timestamp: Seconds since the epoch.
    """

    type: EventType
    run_id: str
    step_id: str | None
    payload: Any
    timestamp: float
