"""Definition checks run by ``commit()``: ids, and whether each step can take its input."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from procflow.errors import WorkflowDefinitionError
from procflow.steps.schema import Schema

if TYPE_CHECKING:
    from procflow.runtime.execution import PlanUnit, StepUnit
    from procflow.workflows.workflow import Workflow

__all__ = ["LIST", "Keyed", "ListOut", "Shape", "check_edge", "check_list_input", "check_plan"]


@dataclass(frozen=True, slots=True)
class Keyed:
    """The output of parallel/branch: a dict keyed by these step ids."""

    keys: frozenset[str]


class ListOut:
    """The output of foreach: a list."""


LIST = ListOut()
Shape = Schema | Keyed | ListOut | None
"""What an entry outputs, as far as ``commit()`` knows (``None``: unknown, after a map
or a step without a schema)."""


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
        for step_id, what in entry.ids():
            if step_id in seen:
                raise WorkflowDefinitionError(
                    f"workflow '{wf.id}': duplicate step id '{step_id}' (used by {seen[step_id]} "
                    f"and {what}); give one of them another id, e.g. step.clone(id=...)",
                    workflow_id=wf.id, step_id=step_id)
            seen[step_id] = what
        shape = entry.output_shape(wf, shape)
    if wf.output is not None:
        check_edge(wf, shape, wf.output, target=None)


def check_list_input(wf: Workflow, shape: Shape, step: StepUnit | PlanUnit) -> None:
    """Check that a foreach over ``step`` gets a list (when the shape is known).

    Raises:
        WorkflowDefinitionError: The step before outputs something else.
    """
    if isinstance(shape, Schema | Keyed) and not _is_list_schema(shape):
        got = shape.name if isinstance(shape, Schema) else "a dict of step outputs"
        raise WorkflowDefinitionError(
            f"workflow '{wf.id}': foreach step '{step.id}' needs a list as input, "
            f"but the step before it outputs {got}; add a .map() that returns the list",
            workflow_id=wf.id, step_id=step.id)


def _is_list_schema(shape: Schema | Keyed) -> bool:
    if isinstance(shape, Keyed) or shape.model is not None:
        return False
    origin = getattr(shape.type, "__origin__", shape.type)
    return origin in (list, tuple)


def check_edge(wf: Workflow, shape: Shape, needs: Schema | None, *,
               target: StepUnit | PlanUnit | None, loop: bool = False) -> None:
    """Check that data of ``shape`` fits the schema ``needs`` of ``target``.

    Raises:
        WorkflowDefinitionError: Required fields are missing, naming them and the fix.
    """
    if needs is None or shape is None:
        return
    required = needs.required_fields()
    if required is None:
        return
    where = f"step '{target.id}'" if target is not None else "its output schema"
    if isinstance(shape, ListOut):
        raise WorkflowDefinitionError(
            f"workflow '{wf.id}': {where} expects {needs.name}, but the step before it is a "
            "foreach that outputs a list; add a .map() to reshape it",
            workflow_id=wf.id, step_id=target.id if target is not None else None)
    if isinstance(shape, Keyed):
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
