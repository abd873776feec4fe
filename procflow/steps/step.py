"""Steps: the units of work a workflow runs, and the way to make them.

There is one obvious way for each kind of thing:

- a function becomes a step with ``@step`` (``@step(id=..., input_schema=...,
  metadata=...)`` takes every option a step has);
- an object that already is or has a step (a ``Processor``, an ``Agent``, a committed
  ``Workflow``) is wrapped with ``create_step(obj)``.

``create_step(id=..., execute=fn, ...)`` is ``@step`` written as a call, for a lambda or
a function made at run time; both build a ``Step`` through ``create_step``, the one
implementation (``Step(...)`` itself is what it builds, not a third way).
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeAlias, TypeGuard, TypeVar, overload

from procflow.errors import WorkflowDefinitionError
from procflow.runtime.execution import InputT, OutputT
from procflow.runtime.step_context import StepContext
from procflow.steps.schema import Schema

if TYPE_CHECKING:
    from procflow.runtime.execution import PlanUnit

__all__ = ["ExecuteFn", "Step", "create_step", "step", "validate_id"]

ExecuteFn: TypeAlias = Callable[[StepContext[InputT]], Awaitable[OutputT] | OutputT]
"""A step's function: takes the ``StepContext[In]``, returns (or awaits to) an ``Out``."""

PlanT = TypeVar("PlanT", bound="PlanUnit")

_ID_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_:\-/]*$")


def validate_id(value: object, *, what: str) -> str:
    """Check a step or workflow id: a non-empty string without '.', '[', ']' or spaces.

    Raises:
        WorkflowDefinitionError: The id is not usable.
    """
    if not isinstance(value, str) or not value:
        raise WorkflowDefinitionError(f"{what} needs an id: a non-empty string, got {value!r}")
    if not _ID_RE.match(value):
        raise WorkflowDefinitionError(
            f"{what} id {value!r} is not valid: use letters, digits, '_', '-', ':' or '/' "
            "('.' and '[...]' are reserved for paths of nested steps)", step_id=value)
    return value


class Step(Generic[InputT, OutputT]):
    """A unit of work: an ``execute`` function with optional schemas, retries and timeout.

    Make one with the ``@step`` decorator (or ``create_step(id=..., execute=...)``, the
    same as a call); this constructor is what both call. ``Step[In, Out]`` takes
    an ``In`` and returns an ``Out`` (``Any`` where no schema says).

    Attributes:
        id: Unique within its workflow.
        kind: "step" (subclasses: "processor", "agent").
        input_schema, output_schema, suspend_schema, resume_schema: The schemas as given.
        retries: Extra attempts after a failure (``None``: the workflow's default).
        timeout: Seconds an attempt may take (``None``: the workflow's default).
        description: Free text, shown by the studio.
        trace_io: Record the step's input and output on its trace span (turn off for
            steps passing internal, mutable objects).
    """

    kind: str = "step"
    span_kind: Literal["step", "processor"] = "step"
    is_workflow: Literal[False] = False
    """What tells the runtime a leaf step from a nested workflow."""
    inline: Callable[[Any, Any], bool] | None = None
    """Internal (the agent loop's stages): ``inline(execution, data)`` may do the step's
    whole work on ``data`` at once when that work is trivial (no hook to call, nothing to
    trace) and return ``True``; the step is then recorded a success with ``data`` as its
    output and gets no span ("no spans for work not done"). Asked only on a run that
    keeps its records in memory until the end (never while replaying or streaming
    events); ``False`` runs the step as usual."""

    def __init__(self, *, id: str, execute: ExecuteFn[InputT, OutputT], input_schema: Any = None,
                 output_schema: Any = None, suspend_schema: Any = None,
                 resume_schema: Any = None, retries: int | None = None,
                 timeout: float | None = None, description: str | None = None,
                 run_in_thread: bool = False, metadata: dict[str, Any] | None = None,
                 trace_io: bool = True) -> None:
        self.id = validate_id(id, what="step")
        if not callable(execute):
            raise WorkflowDefinitionError(
                f"step '{id}': execute must be callable, got {type(execute).__name__}",
                step_id=id)
        if retries is not None and (not isinstance(retries, int) or isinstance(retries, bool)
                                    or retries < 0):
            raise WorkflowDefinitionError(
                f"step '{id}': retries must be a non-negative int, got {retries!r}", step_id=id)
        if timeout is not None and (not isinstance(timeout, int | float)
                                    or isinstance(timeout, bool)
                                    or not math.isfinite(timeout) or timeout <= 0):
            raise WorkflowDefinitionError(
                f"step '{id}': timeout must be a positive number of seconds, got {timeout!r}",
                step_id=id)
        owner = f"step '{id}'"
        self.execute: ExecuteFn[InputT, OutputT] = execute
        self.is_async = inspect.iscoroutinefunction(execute)
        self.run_in_thread = run_in_thread
        self.input_schema = input_schema
        self.output_schema = output_schema
        self.suspend_schema = suspend_schema
        self.resume_schema = resume_schema
        self.input = Schema(input_schema, owner=owner) if input_schema is not None else None
        self.output = Schema(output_schema, owner=owner) if output_schema is not None else None
        self.suspend_check = (Schema(suspend_schema, owner=owner)
                              if suspend_schema is not None else None)
        self.resume_check = (Schema(resume_schema, owner=owner)
                             if resume_schema is not None else None)
        self.retries = retries
        self.timeout = timeout
        self.description = description or inspect.getdoc(execute) or None
        self.metadata = dict(metadata or {})
        self.trace_io = trace_io

    def clone(self, *, id: str) -> Step[InputT, OutputT]:
        """A copy of this step under another id (to use one step twice in a workflow)."""
        return Step(id=id, execute=self.execute, input_schema=self.input_schema,
                    output_schema=self.output_schema, suspend_schema=self.suspend_schema,
                    resume_schema=self.resume_schema, retries=self.retries,
                    timeout=self.timeout, description=self.description,
                    run_in_thread=self.run_in_thread, metadata=self.metadata,
                    trace_io=self.trace_io)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r})"


@overload
def create_step(obj: PlanT, /) -> PlanT: ...
@overload
def create_step(*, id: str, execute: ExecuteFn[InputT, OutputT], input_schema: type[InputT],
                output_schema: type[OutputT], suspend_schema: Any = ..., resume_schema: Any = ...,
                retries: int | None = ..., timeout: float | None = ...,
                description: str | None = ..., run_in_thread: bool = ...,
                metadata: dict[str, Any] | None = ..., trace_io: bool = ...,
                ) -> Step[InputT, OutputT]: ...
@overload
def create_step(*, id: str, execute: ExecuteFn[InputT, OutputT], input_schema: Any = ...,
                output_schema: Any = ..., suspend_schema: Any = ..., resume_schema: Any = ...,
                retries: int | None = ..., timeout: float | None = ...,
                description: str | None = ..., run_in_thread: bool = ...,
                metadata: dict[str, Any] | None = ..., trace_io: bool = ...,
                ) -> Step[InputT, OutputT]: ...
@overload
def create_step(obj: Any, /) -> Step: ...


def create_step(obj: Any = None, /, **options: Any) -> Step | PlanUnit:
    """Make a step: the way to wrap an object, and the one implementation ``@step`` uses.

    Forms:
        ``create_step(processor)`` / ``create_step(agent)``: any object with an
        ``as_step()`` method (processors, agents) becomes its step.
        ``create_step(workflow)``: a committed workflow, used as a nested step.
        ``create_step(id=..., execute=fn, input_schema=..., output_schema=..., retries=...,
        timeout=..., suspend_schema=..., resume_schema=..., description=...,
        run_in_thread=..., metadata=..., trace_io=...)``: a step from a function, the
        same as ``@step(...)`` on ``fn`` (prefer the decorator for a ``def``).

    Raises:
        WorkflowDefinitionError: The arguments do not make a step.
    """
    if obj is None:
        if "id" not in options or "execute" not in options:
            missing = [k for k in ("id", "execute") if k not in options]
            raise WorkflowDefinitionError(
                f"create_step() needs {' and '.join(missing)} (keyword form), or one "
                "positional Workflow, Processor or Agent")
        return Step(**options)
    if options:
        raise WorkflowDefinitionError(
            f"create_step({type(obj).__name__}) takes no options; got {sorted(options)}")
    if _is_unit(obj):
        return obj
    as_step = getattr(obj, "as_step", None)
    if callable(as_step):
        made = as_step()
        if _is_unit(made):
            return made
    raise WorkflowDefinitionError(
        f"create_step() cannot make a step from {type(obj).__name__}: pass id= and execute=, "
        "or a Workflow, Processor or Agent")


def _is_unit(obj: object) -> TypeGuard[Step | PlanUnit]:
    """A step, or a workflow (which marks itself with ``is_workflow``; steps sit below
    the workflows package and do not import it)."""
    return isinstance(obj, Step) or getattr(obj, "is_workflow", False) is True


@overload
def step(fn: ExecuteFn[InputT, OutputT], /) -> Step[InputT, OutputT]: ...
@overload
def step(*, id: str | None = None, input_schema: type[InputT], output_schema: type[OutputT],
         suspend_schema: Any = None, resume_schema: Any = None,
         retries: int | None = None, timeout: float | None = None,
         description: str | None = None, run_in_thread: bool = False,
         metadata: dict[str, Any] | None = None, trace_io: bool = True,
         ) -> Callable[[ExecuteFn[InputT, OutputT]], Step[InputT, OutputT]]: ...
@overload
def step(*, id: str | None = None, input_schema: type[InputT], output_schema: Any = None,
         suspend_schema: Any = None, resume_schema: Any = None,
         retries: int | None = None, timeout: float | None = None,
         description: str | None = None, run_in_thread: bool = False,
         metadata: dict[str, Any] | None = None, trace_io: bool = True,
         ) -> Callable[[ExecuteFn[InputT, Any]], Step[InputT, Any]]: ...
@overload
def step(*, id: str | None = None, input_schema: Any = None, output_schema: type[OutputT],
         suspend_schema: Any = None, resume_schema: Any = None,
         retries: int | None = None, timeout: float | None = None,
         description: str | None = None, run_in_thread: bool = False,
         metadata: dict[str, Any] | None = None, trace_io: bool = True,
         ) -> Callable[[ExecuteFn[Any, OutputT]], Step[Any, OutputT]]: ...
@overload
def step(*, id: str | None = None, input_schema: Any = None, output_schema: Any = None,
         suspend_schema: Any = None, resume_schema: Any = None,
         retries: int | None = None, timeout: float | None = None,
         description: str | None = None, run_in_thread: bool = False,
         metadata: dict[str, Any] | None = None, trace_io: bool = True,
         ) -> Callable[[ExecuteFn[Any, Any]], Step[Any, Any]]: ...


def step(fn: Any = None, /, *, id: str | None = None, input_schema: Any = None,
         output_schema: Any = None, suspend_schema: Any = None, resume_schema: Any = None,
         retries: int | None = None, timeout: float | None = None,
         description: str | None = None, run_in_thread: bool = False,
         metadata: dict[str, Any] | None = None, trace_io: bool = True) -> Any:
    """Make a step from a function: the obvious way. ``@step`` or ``@step(...)``; the id
    defaults to the function's name, the description to its docstring.

    With schemas, the step is typed: ``@step(input_schema=In, output_schema=Out)`` makes a
    ``Step[In, Out]`` whose function takes a ``StepContext[In]`` and returns an ``Out``.

    Args:
        id: Unique within its workflow (default: the function's name).
        input_schema: What the step takes (a pydantic model or any type pydantic
            validates; ``None``: passed unvalidated).
        output_schema: What the step returns (as ``input_schema``).
        suspend_schema: What ``ctx.suspend(...)`` sends.
        resume_schema: What the resume brings back (``ctx.resume_data``).
        retries: Extra attempts after a failure (``None``: the workflow's default).
        timeout: Seconds an attempt may take (``None``: the workflow's default).
        description: Free text shown by the studio (default: the docstring).
        run_in_thread: Run a blocking sync function in a worker thread.
        metadata: Free-form data kept on the step (``step.metadata``), for your tools.
        trace_io: Record the step's input and output on its trace span.

    Example::

        @step(input_schema=In, output_schema=Out, metadata={"owner": "billing"})
        async def double(ctx: StepContext[In]) -> Out:
            return Out(value=ctx.input_data.value * 2)

    Raises:
        WorkflowDefinitionError: Given something other than a function to decorate (use
            ``@step(id="...")`` to name a step).
    """

    def decorate(fn: ExecuteFn) -> Step:
        return create_step(id=id if id is not None else getattr(fn, "__name__", ""),
                           execute=fn, input_schema=input_schema,
                           output_schema=output_schema, suspend_schema=suspend_schema,
                           resume_schema=resume_schema, retries=retries, timeout=timeout,
                           description=description, run_in_thread=run_in_thread,
                           metadata=metadata, trace_io=trace_io)

    if fn is None:
        return decorate
    if isinstance(fn, str) or not callable(fn):
        raise WorkflowDefinitionError(
            f"@step takes the function to decorate (bare @step) or keyword options only "
            f"(@step(id=..., input_schema=...)); got {fn!r} as a positional argument")
    return decorate(fn)
