"""The records a run produces: per-step results, the final result, and the stored snapshot.

``StepResult`` and ``RunSnapshot`` are built for every step, so they are slotted
but not frozen (a frozen dataclass's ``__init__`` costs ~5x more); treat them as
read-only. ``WorkflowResult`` is frozen. Storage backends that persist them turn
them into JSON with ``procflow.storage.codec``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "RunSnapshot",
    "RunStatus",
    "StepResult",
    "StepStatus",
    "WorkflowResult",
]

RunStatus = Literal["pending", "running", "success", "failed", "suspended", "tripwire",
                    "canceled"]
"""A run's status. "pending" and "running" are never final."""

StepStatus = Literal["success", "failed", "suspended", "skipped", "running"]
"""A step's status."""

TERMINAL_STATUSES: frozenset[str] = frozenset({"success", "failed", "tripwire", "canceled"})


@dataclass(slots=True)
class StepResult:
    """What one step of a run produced.

    Attributes:
        status: How the step ended (or "running" while it runs).
        output: Its output; a pydantic instance when the step has an output schema.
        error: The exception of a failed step.
        started_at: Wall-clock start, seconds since the epoch.
        ended_at: Wall-clock end, or ``None`` while running.
        attempts: How many attempts were made (1 without retries).
        suspend_payload: What the step passed to ``ctx.suspend()``.
        resume_data: The data the step was last resumed with.
        iterations: Loop iterations completed (for a ``dowhile``/``dountil`` body).
        partial: For a suspended ``foreach``: outputs of the items that finished, by index.
    """

    status: StepStatus
    output: Any = None
    error: BaseException | None = None
    started_at: float = 0.0
    ended_at: float | None = None
    attempts: int = 1
    suspend_payload: Any = None
    resume_data: Any = None
    iterations: int = 0
    partial: dict[int, Any] | None = None


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


@dataclass(slots=True)
class RunSnapshot:
    """A run's header as stored; the step results are stored beside it, one row each.

    Attributes:
        workflow_id: The workflow the run belongs to.
        run_id: The run.
        status: The run's status when the snapshot was taken.
        input: The run's (validated) input.
        state: The shared state.
        result: The final output, once successful.
        error: The failure, once failed.
        suspended: Paths of suspended steps.
        tripwire: Abort details, for status "tripwire".
        request_context: The JSON-serialisable entries of the request context.
        created_at: When the run was created (seconds since the epoch).
        updated_at: When this snapshot was taken.
    """

    workflow_id: str
    run_id: str
    status: RunStatus
    input: Any = None
    state: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    error: BaseException | None = None
    suspended: list[list[str]] = field(default_factory=list)
    tripwire: dict[str, Any] | None = None
    request_context: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0
    updated_at: float = 0.0
