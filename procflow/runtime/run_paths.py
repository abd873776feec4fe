"""Steps of a run by path: the step at a path, the suspended step a ``resume`` names, the
results a replay keeps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from procflow.errors import RunNotSuspendedError, RunStateError
from procflow.records import StepResult
from procflow.runtime.execution import PlanUnit, StepUnit

__all__ = ["find_unit", "path_of", "replay_kept", "resume_target"]


def path_of(step: Any) -> str:
    """A step, a step id or a path (a sequence of ids) as a dotted path.

    Raises:
        TypeError: It is none of these.
    """
    if isinstance(step, str):
        return step
    if isinstance(step, Sequence):
        return ".".join(str(s) for s in step)
    step_id = getattr(step, "id", None)
    if isinstance(step_id, str):
        return step_id
    raise TypeError(f"expected a step, a step id or a path, got {step!r}")


def find_unit(wf: PlanUnit, path: str) -> StepUnit | PlanUnit | None:
    """The step or nested workflow at a dotted path, or ``None``."""
    current: StepUnit | PlanUnit | None = wf
    for segment in path.split("."):
        if current is None or not current.is_workflow:
            return None
        current = current.get_step(segment.split("[", 1)[0])
    return current


def resume_target(suspended: Sequence[str], step: Any, workflow_id: str, run_id: str) -> str:
    """The path of the suspended step that ``resume(step=...)`` names.

    Raises:
        RunNotSuspendedError: The named step is not suspended.
        RunStateError: ``step`` matches no single suspended step.
    """
    if step is None:
        if len(suspended) == 1:
            return suspended[0]
        raise RunStateError(
            f"run '{run_id}' has {len(suspended)} suspended steps {list(suspended)}; "
            "name one with resume(step=...)", workflow_id=workflow_id, run_id=run_id)
    if isinstance(step, str):
        name = step
    elif isinstance(getattr(step, "id", None), str):  # a step or a nested workflow
        name = step.id
    elif isinstance(step, Sequence):
        name = ".".join(str(s) for s in step)
    else:
        raise TypeError(f"resume(step=...) takes a step, an id or a path, got {step!r}")
    if name in suspended:
        return name
    matches = [p for p in suspended
               if p.startswith((name + ".", name + "[")) or p.endswith("." + name)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise RunNotSuspendedError(
            f"step '{name}' of run '{run_id}' is not suspended; suspended steps: "
            f"{list(suspended)}", workflow_id=workflow_id, run_id=run_id, step_id=name)
    raise RunStateError(
        f"step '{name}' matches several suspended steps {matches}; pass the full path",
        workflow_id=workflow_id, run_id=run_id, step_id=name)


def replay_kept(records: Mapping[str, StepResult], path: str) -> dict[str, StepResult]:
    """The results a replay from the step at ``path`` (whose result is in ``records``)
    keeps: every step that succeeded before it started, outside it."""
    t0 = records[path].started_at
    inside = (path + ".", path + "[")
    return {p: r for p, r in records.items()
            if r.status == "success" and r.ended_at is not None and r.ended_at < t0
            and p != path and not p.startswith(inside)
            and not _superseded(records, p, r)}


def _superseded(records: Mapping[str, StepResult], path: str, record: StepResult) -> bool:
    """Whether a step enclosing ``path`` (a nested workflow, a branch, a loop) started
    again after ``record`` did: the record is then from an earlier pass of a loop (its
    step was skipped or not reached since), not part of the pass being replayed."""
    for i, ch in enumerate(path):
        if ch in ".[":
            outer = records.get(path[:i])
            if outer is not None and outer.started_at > record.started_at:
                return True
    return False
