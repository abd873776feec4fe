"""Definition checks run by ``commit()``: ids, and whether each step can take its input."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from procflow.errors import WorkflowDefinitionError
from procflow.steps.schema import Schema
from procflow.workflows.plan import (
    BranchEntry,
    ForeachEntry,
    LoopEntry,
    MapEntry,
    ParallelEntry,
    SleepEntry,
    SleepUntilEntry,
    StepEntry,
    StepLike,
)

if TYPE_CHECKING:
    from procflow.workflows.workflow import Workflow

__all__ = ["check_plan"]


@dataclass(frozen=True, slots=True)
class _Keyed:
    """The output of parallel/branch: a dict keyed by these step ids."""

    keys: frozenset[str]


class _ListOut:
    """The output of foreach: a list."""


_LIST = _ListOut()
Shape = Schema | _Keyed | _ListOut | None  # None: unknown (after map, or no schema)


def check_plan(wf: Workflow) -> None:
    """Validate a workflow's plan before it is committed.

    Raises:
        WorkflowDefinitionError: The first problem found, naming the step.
    """
    if not wf.entries:
        raise WorkflowDefinitionError(
            f"workflow '{wf.id}' has no steps; add one with .then(step) before commit()",
            workflow_id=wf.id)
    seen: dict[str, str] = {}
    shape: Shape = wf.input
    for entry in wf.entries:
        for step_id, what in _ids(entry):
            if step_id in seen:
                raise WorkflowDefinitionError(
                    f"workflow '{wf.id}': duplicate step id '{step_id}' (used by {seen[step_id]} "
                    f"and {what}); give one of them another id, e.g. step.clone(id=...)",
                    workflow_id=wf.id, step_id=step_id)
            seen[step_id] = what
        shape = _check_entry(wf, entry, shape)
    if wf.output is not None:
        _check_edge(wf, shape, wf.output, target=None)


def _ids(entry: object) -> list[tuple[str, str]]:
    if isinstance(entry, StepEntry):
        return [(entry.step.id, "then()")]
    if isinstance(entry, ParallelEntry):
        return [(s.id, "parallel()") for s in entry.steps]
    if isinstance(entry, BranchEntry):
        return [(s.id, "branch()") for _, s in entry.branches]
    if isinstance(entry, ForeachEntry):
        return [(entry.step.id, "foreach()")]
    if isinstance(entry, LoopEntry):
        return [(entry.step.id, f"{entry.mode}()")]
    if isinstance(entry, MapEntry):
        return [(entry.id, "map()")]
    if isinstance(entry, SleepEntry | SleepUntilEntry):
        return [(entry.id, "sleep()")]
    return []


def _check_entry(wf: Workflow, entry: object, shape: Shape) -> Shape:
    if isinstance(entry, StepEntry):
        _check_edge(wf, shape, entry.step.input, target=entry.step)
        return entry.step.output
    if isinstance(entry, ParallelEntry | BranchEntry):
        steps = (entry.steps if isinstance(entry, ParallelEntry)
                 else tuple(s for _, s in entry.branches))
        for s in steps:
            _check_edge(wf, shape, s.input, target=s)
        return _Keyed(frozenset(s.id for s in steps))
    if isinstance(entry, ForeachEntry):
        if isinstance(shape, Schema | _Keyed) and not _is_list_schema(shape):
            got = shape.name if isinstance(shape, Schema) else "a dict of step outputs"
            raise WorkflowDefinitionError(
                f"workflow '{wf.id}': foreach step '{entry.step.id}' needs a list as input, "
                f"but the step before it outputs {got}; add a .map() that returns the list",
                workflow_id=wf.id, step_id=entry.step.id)
        return _LIST
    if isinstance(entry, LoopEntry):
        body = entry.step
        _check_edge(wf, shape, body.input, target=body)
        _check_edge(wf, body.output, body.input, target=body, loop=True)
        return body.output
    if isinstance(entry, MapEntry):
        return None
    return shape  # sleeps pass data through


def _is_list_schema(shape: Schema | _Keyed) -> bool:
    if isinstance(shape, _Keyed) or shape.model is not None:
        return False
    origin = getattr(shape.type, "__origin__", shape.type)
    return origin in (list, tuple)


def _check_edge(wf: Workflow, shape: Shape, needs: Schema | None, *, target: StepLike | None,
                loop: bool = False) -> None:
    if needs is None or shape is None:
        return
    required = needs.required_fields()
    if required is None:
        return
    where = f"step '{target.id}'" if target is not None else "its output schema"
    if isinstance(shape, _ListOut):
        raise WorkflowDefinitionError(
            f"workflow '{wf.id}': {where} expects {needs.name}, but the step before it is a "
            "foreach that outputs a list; add a .map() to reshape it",
            workflow_id=wf.id, step_id=target.id if target is not None else None)
    if isinstance(shape, _Keyed):
        available, source = set(shape.keys), "the parallel/branch outputs keyed"
    else:
        if shape.model is not None and shape.model is needs.model:
            return
        fields = shape.fields()
        if fields is None:
            return
        available, source = fields, f"{shape.name} with fields"
    missing = sorted(required - available)
    if missing:
        origin = "its own output in the loop" if loop else "the step before it"
        raise WorkflowDefinitionError(
            f"workflow '{wf.id}': {where} needs {needs.name} with required field(s) "
            f"{missing}, but {origin} gives {source} {sorted(available)}; add a .map() to "
            "reshape the data",
            workflow_id=wf.id, step_id=target.id if target is not None else None)
