"""The workflow builder: ``create_workflow(...)`` then chained builder calls, then ``commit()``."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, Literal, Self, overload

from procflow.errors import RunNotFoundError, WorkflowDefinitionError
from procflow.runtime.execution import Durability, InputT, OutputT
from procflow.runtime.tracing import ParentSpan
from procflow.steps.schema import Schema
from procflow.steps.step import Step, create_step, validate_id
from procflow.workflows.check import check_plan
from procflow.workflows.plan import (
    BranchEntry,
    Condition,
    Entry,
    ForeachEntry,
    LoopEntry,
    MapEntry,
    ParallelEntry,
    SleepEntry,
    SleepUntilEntry,
    StepEntry,
    StepLike,
    WhenEntry,
)

if TYPE_CHECKING:
    import networkx as nx

    from procflow.runtime.execution import Node
    from procflow.runtime.run import Run
    from procflow.storage.base import Storage

__all__ = ["Durability", "Workflow", "create_workflow"]

_Run: type[Run] | None = None


class Workflow(Generic[InputT, OutputT]):
    """A workflow: a plan of steps, built with chained calls and frozen by ``commit()``.

    ``Workflow[In, Out]`` takes an ``In`` and returns an ``Out`` (its input and output
    schemas); its runs are ``Run[Out]`` and their results ``WorkflowResult[Out]``.

    A committed workflow runs through ``create_run()``, and can itself be a step of
    another workflow (``.then(inner)``).

    Attributes:
        id: The workflow's id (also its step id when nested).
        kind: "workflow".
        entries: The plan, one entry per builder call.
        committed: Whether ``commit()`` was called.
    """

    kind = "workflow"
    is_workflow: Literal[True] = True
    """What tells the runtime a nested workflow from a leaf step."""

    def __init__(self, *, id: str, input_schema: Any = None, output_schema: Any = None,
                 description: str | None = None, storage: Storage | None = None,
                 retries: int = 0, retry_delay: float = 0.1, timeout: float | None = None,
                 durability: Durability = "sync", metadata: dict[str, Any] | None = None,
                 tracing: bool = True, trace_io: bool = True,
                 trace_truncate: int = 2000) -> None:
        self.id = validate_id(id, what="workflow")
        owner = f"workflow '{id}'"
        if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
            raise WorkflowDefinitionError(
                f"{owner}: retries must be a non-negative int, got {retries!r}", workflow_id=id)
        if not _finite(retry_delay) or retry_delay < 0:
            raise WorkflowDefinitionError(
                f"{owner}: retry_delay must be >= 0 seconds, got {retry_delay!r}",
                workflow_id=id)
        if timeout is not None and (not _finite(timeout) or timeout <= 0):
            raise WorkflowDefinitionError(
                f"{owner}: timeout must be a positive number of seconds, got {timeout!r}",
                workflow_id=id)
        if durability not in ("sync", "exit"):
            raise WorkflowDefinitionError(
                f"{owner}: durability must be 'sync' or 'exit', got {durability!r}",
                workflow_id=id)
        self.input_schema = input_schema
        self.output_schema = output_schema
        self.input = Schema(input_schema, owner=owner) if input_schema is not None else None
        self.output = Schema(output_schema, owner=owner) if output_schema is not None else None
        self.description = description
        self.storage = storage
        self.retries = retries
        self.retry_delay = float(retry_delay)
        self.timeout = timeout
        self.durability: Durability = durability
        if not isinstance(trace_truncate, int) or trace_truncate < 16:
            raise WorkflowDefinitionError(
                f"{owner}: trace_truncate must be an int >= 16, got {trace_truncate!r}",
                workflow_id=id)
        self.tracing = bool(tracing)
        self.trace_io = bool(trace_io)
        self.trace_truncate = trace_truncate
        self.metadata = dict(metadata or {})
        self.entries: list[Entry] = []
        self.committed = False
        self.compiled: Sequence[Node] | None = None
        """The runtime nodes of the plan, compiled on first run."""
        self._graph: nx.DiGraph | None = None
        self._auto_ids = 0

    # -- building ---------------------------------------------------------------

    def then(self, step: StepLike) -> Self:
        """Run ``step`` on the previous output."""
        return self._add(StepEntry(self._as_step(step, "then")))

    def parallel(self, steps: Sequence[StepLike], *, distribute: bool = False) -> Self:
        """Run ``steps`` concurrently on the same input; output: step id -> output.

        Args:
            steps: The branches.
            distribute: On workers (``procflow worker``), send each branch to the pool
                as its own message; the run continues when all are done (locally the
                branches run in process as without it).
        """
        items = self._list(steps, "parallel")
        return self._add(ParallelEntry(tuple(self._as_step(s, "parallel") for s in items),
                                       _flag(distribute, "parallel", self.id)))

    def branch(self, branches: Sequence[tuple[Condition, StepLike]], *,
               label: Sequence[str | None] | None = None) -> Self:
        """Run every step whose condition holds, concurrently; the others are "skipped".

        Args:
            branches: ``(condition, step)`` pairs; a condition is a (sync or async)
                function of the ``StepContext``.
            label: How the studio names each condition (one per pair, ``None`` for the
                function's own name).
        """
        items = self._list(branches, "branch")
        pairs: list[tuple[Condition, StepLike]] = []
        for i, pair in enumerate(items):
            if not (isinstance(pair, tuple) and len(pair) == 2 and callable(pair[0])):
                raise WorkflowDefinitionError(
                    f"workflow '{self.id}': branch item {i} must be a (condition, step) "
                    f"tuple with a callable condition, got {pair!r}", workflow_id=self.id)
            pairs.append((pair[0], self._as_step(pair[1], "branch")))
        labels = tuple(label) if label is not None else ()
        if label is not None and (len(labels) != len(pairs) or not all(
                x is None or isinstance(x, str) for x in labels)):
            raise WorkflowDefinitionError(
                f"workflow '{self.id}': branch label= takes one string (or None) per "
                f"branch, {len(pairs)} in all, got {label!r}", workflow_id=self.id)
        return self._add(BranchEntry(tuple(pairs), labels))

    def when(self, condition: Condition, step: StepLike, *, label: str | None = None,
             ) -> Self:
        """Run ``step`` when ``condition`` holds; else it is "skipped" and the data
        passes on unchanged. The output is the step's output or the data as it came,
        not a dict (a ``branch`` of one arm outputs ``{step id: output}`` or ``{}``).

        Args:
            condition: A (sync or async) function of the ``StepContext``.
            step: The step (or nested workflow) to run.
            label: How the studio names the condition (default: the function's name).
        """
        if not callable(condition):
            raise WorkflowDefinitionError(
                f"workflow '{self.id}': when() takes a callable condition first, got "
                f"{condition!r}", workflow_id=self.id)
        if label is not None and not isinstance(label, str):
            raise WorkflowDefinitionError(
                f"workflow '{self.id}': when() label= takes a string, got {label!r}",
                workflow_id=self.id)
        pair = ((condition, self._as_step(step, "when")),)
        return self._add(WhenEntry(pair, (label,) if label is not None else ()))

    def map(self, fn: Callable[[Any], Any], *, id: str | None = None) -> Self:
        """Reshape the data with ``fn(ctx)`` (sync or async); no step result of its own."""
        if not callable(fn):
            raise WorkflowDefinitionError(
                f"workflow '{self.id}': map() takes a function of the context, got {fn!r}",
                workflow_id=self.id)
        return self._add(MapEntry(self._entry_id("map", id), fn))

    def foreach(self, step: StepLike, *, concurrency: int = 1,
                distribute: bool = False) -> Self:
        """Run ``step`` on each item of the previous output (a list); output in item order.

        Args:
            step: The step run on each item.
            concurrency: Items run at once (in process).
            distribute: On workers (``procflow worker``), send each item to the pool as
                its own message (items must be JSON-ready; state changes made by items
                are not merged back); the run continues when all are done. Locally the
                items run in process as without it.
        """
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
            raise WorkflowDefinitionError(
                f"workflow '{self.id}': foreach concurrency must be an int >= 1, "
                f"got {concurrency!r}", workflow_id=self.id)
        return self._add(ForeachEntry(self._as_step(step, "foreach"), concurrency,
                                      _flag(distribute, "foreach", self.id)))

    def dowhile(self, step: StepLike, condition: Condition, *,
                max_iterations: int | None = None, label: str | None = None) -> Self:
        """Run ``step``, then again on its own output while ``condition(ctx)`` holds
        (``label``: how the studio names the condition)."""
        return self._loop(step, condition, "dowhile", max_iterations, label)

    def dountil(self, step: StepLike, condition: Condition, *,
                max_iterations: int | None = None, label: str | None = None) -> Self:
        """Run ``step``, then again on its own output until ``condition(ctx)`` holds
        (``label``: how the studio names the condition)."""
        return self._loop(step, condition, "dountil", max_iterations, label)

    def sleep(self, seconds: float | Callable[[Any], Any], *, id: str | None = None,
              ) -> Self:
        """Wait ``seconds`` (or ``fn(ctx)`` seconds), passing the data through."""
        if not callable(seconds) and (not _finite(seconds) or seconds < 0):
            raise WorkflowDefinitionError(
                f"workflow '{self.id}': sleep() takes seconds >= 0 or a function, "
                f"got {seconds!r}", workflow_id=self.id)
        return self._add(SleepEntry(self._entry_id("sleep", id), seconds))

    def sleep_until(self, until: datetime | Callable[[Any], Any], *,
                    id: str | None = None) -> Self:
        """Wait until a datetime (or ``fn(ctx)``'s datetime), passing the data through."""
        if not callable(until) and not isinstance(until, datetime):
            raise WorkflowDefinitionError(
                f"workflow '{self.id}': sleep_until() takes a datetime or a function, "
                f"got {until!r}", workflow_id=self.id)
        return self._add(SleepUntilEntry(self._entry_id("sleep-until", id), until))

    def commit(self) -> Self:
        """Freeze and validate the plan.

        Raises:
            WorkflowDefinitionError: The plan is empty, has duplicate step ids, or a step
                cannot take what the step before it outputs.
        """
        self._check_open("commit")
        check_plan(self)
        self.committed = True
        return self

    # -- running ----------------------------------------------------------------

    def create_run(self, run_id: str | None = None, *, storage: Storage | None = None,
                   durability: Durability | None = None, tracing: bool | None = None,
                   ephemeral: bool = False, parent_span: ParentSpan | None = None,
                   ) -> Run[OutputT]:
        """A new run of this workflow (not started yet).

        Args:
            run_id: The id to use; a random one by default. A run already stored under
                it for this workflow is never replaced: starting (or submitting) this one
                raises ``RunStateError``.
            storage: Where to keep snapshots (default: the workflow's, then the process
                default, then an in-memory store).
            durability: "sync" (a snapshot at every step boundary) or "exit" (at the end
                or on suspend); default: the workflow's.
            tracing: Record the run's trace (default: the workflow's, on by default).
            ephemeral: A transient run inside a library call (a processor workflow, an
                agent's loop): it keeps no snapshot (nothing to list, resume or
                restart), and skips the cancel scope ``cancel()`` needs — cancel the
                calling task instead. Its own trace, if traced and not nested, goes to
                the default storage.
            parent_span: Record the run's spans under this span of another run's trace
                (``ParentSpan(ctx.tracer, ctx.span)``, or ``ParentSpan.of(...)`` when the
                caller may be untraced) instead of a trace of its own.

        Raises:
            ValueError: ``ephemeral=True`` together with a ``storage``, or a ``run_id``
                that is not valid Unicode text (a lone surrogate: no storage keeps it).
        """
        global _Run
        if run_id is not None and not run_id.isascii() and _lone_surrogate(run_id):
            raise ValueError(f"run id {run_id!r} is not valid Unicode text (it holds a lone "
                             "surrogate, which no storage can keep); choose another id")
        run_class = _Run
        if run_class is None:  # imported once, not per call: runs are made on hot paths
            from procflow.runtime.run import Run

            run_class = _Run = Run
        self._check_committed("create_run")
        return run_class(self, run_id=run_id, storage=storage, durability=durability,
                         tracing=self.tracing if tracing is None else tracing,
                         ephemeral=ephemeral, parent_span=parent_span)

    async def get_run(self, run_id: str, *, storage: Storage | None = None) -> Run[OutputT]:
        """Rebuild a run from its stored snapshot.

        Raises:
            TypeError: ``run_id`` is not a ``str`` (whatever the storage).
            RunNotFoundError: No run with that id is stored for this workflow (an id that
                is not valid Unicode text, e.g. with a lone surrogate, never is).
            SnapshotCorruptedError: Its stored data cannot be loaded.
        """
        from procflow.runtime.run import Run

        self._check_committed("get_run")
        if not isinstance(run_id, str):
            raise TypeError(f"get_run() takes the run id as a str, not "
                            f"{type(run_id).__name__} ({run_id!r})")
        if not run_id.isascii() and _lone_surrogate(run_id):
            raise RunNotFoundError(
                f"workflow '{self.id}' has no stored run {run_id!r}: the id is not valid "
                "Unicode text (a lone surrogate), so no run can have it",
                workflow_id=self.id, run_id=run_id)
        return await Run.load(self, run_id, storage=storage)

    async def list_runs(self, *, status: str | None = None, storage: Storage | None = None,
                        limit: int | None = None) -> list[Any]:
        """Stored run snapshots of this workflow, newest first."""
        from procflow.runtime.defaults import resolve_storage

        store = resolve_storage(storage, self)
        return await store.list_runs(workflow_id=self.id, status=status,  # type: ignore[arg-type]
                                     limit=limit)

    # -- introspection ----------------------------------------------------------

    @property
    def graph(self) -> nx.DiGraph:
        """The committed plan as a networkx ``DiGraph`` (built on first access)."""
        self._check_committed("graph")
        if self._graph is None:
            from procflow.workflows.graph import build_graph

            self._graph = build_graph(self)
        return self._graph

    def step_ids(self) -> list[str]:
        """The ids of the workflow's own steps, in plan order."""
        return [s.id for e in self.entries for s in e.units()]

    def get_step(self, step_id: str) -> Step | Workflow | None:
        """The workflow's own step (or nested workflow) with this id, else ``None``."""
        for entry in self.entries:
            for unit in entry.units():
                if unit.id == step_id:
                    return unit
        return None

    def with_entries(self, entries: Iterable[Entry]) -> Self:
        """A new, uncommitted workflow with this one's id and settings and the plan
        ``entries``: how a plan is rewired (an entry inserted, swapped with
        ``Entry.with_unit``, removed) without changing this workflow, committed or not.

        Raises:
            WorkflowDefinitionError: An item of ``entries`` is not a plan entry.
        """
        new = copy.copy(self)
        new.entries = []
        new.committed = False
        new.compiled = None
        new._graph = None
        new.metadata = dict(self.metadata)
        for entry in entries:
            if not isinstance(entry, Entry):
                raise WorkflowDefinitionError(
                    f"workflow '{self.id}': with_entries() takes plan entries "
                    f"(procflow.workflows.plan), got {type(entry).__name__}",
                    workflow_id=self.id)
            new._add(entry)
        return new

    def compile(self) -> Sequence[Node]:
        """The plan as runtime nodes (compiled once; the runtime calls this on first run)."""
        self.compiled = compiled = [entry.compile() for entry in self.entries]
        return compiled

    def __repr__(self) -> str:
        state = "committed" if self.committed else "open"
        return f"Workflow(id={self.id!r}, entries={len(self.entries)}, {state})"

    # -- helpers ----------------------------------------------------------------

    def _add(self, entry: Entry) -> Self:
        self._check_open(type(entry).__name__)
        self.entries.append(entry)
        return self

    def _loop(self, step: StepLike, condition: Condition, mode: Literal["dowhile", "dountil"],
              max_iterations: int | None, label: str | None = None) -> Self:
        if label is not None and not isinstance(label, str):
            raise WorkflowDefinitionError(
                f"workflow '{self.id}': {mode}() label= must be a string, got {label!r}",
                workflow_id=self.id)
        if not callable(condition):
            raise WorkflowDefinitionError(
                f"workflow '{self.id}': {mode}() needs a condition function, got {condition!r}",
                workflow_id=self.id)
        if max_iterations is not None and (not isinstance(max_iterations, int)
                                           or isinstance(max_iterations, bool)
                                           or max_iterations < 1):
            raise WorkflowDefinitionError(
                f"workflow '{self.id}': max_iterations must be an int >= 1, "
                f"got {max_iterations!r}", workflow_id=self.id)
        return self._add(LoopEntry(self._as_step(step, mode), condition, mode, max_iterations,
                                   label))

    def _as_step(self, obj: Any, method: str) -> StepLike:
        self._check_open(method)
        if isinstance(obj, Workflow):
            if obj is self:
                raise WorkflowDefinitionError(
                    f"workflow '{self.id}' cannot contain itself", workflow_id=self.id)
            if not obj.committed:
                raise WorkflowDefinitionError(
                    f"workflow '{self.id}': nested workflow '{obj.id}' must be committed "
                    "before it is used as a step; call .commit() on it first",
                    workflow_id=self.id, step_id=obj.id)
            return obj
        if isinstance(obj, Step):
            return obj
        if callable(getattr(obj, "as_step", None)):
            made: StepLike = create_step(obj)
            return made
        name = getattr(obj, "__name__", None)
        hint = (f" — decorate {name!r} with @step(...) or wrap it with create_step(id=..., "
                "execute=...)") if callable(obj) else ""
        raise WorkflowDefinitionError(
            f"workflow '{self.id}': {method}() takes steps, got {type(obj).__name__}"
            f" {obj!r}{hint}", workflow_id=self.id)

    def _list(self, items: Any, method: str) -> list[Any]:
        if isinstance(items, str | bytes) or not isinstance(items, Iterable):
            raise WorkflowDefinitionError(
                f"workflow '{self.id}': {method}() takes a list, got {type(items).__name__}",
                workflow_id=self.id)
        listed = list(items)
        if not listed:
            raise WorkflowDefinitionError(
                f"workflow '{self.id}': {method}() needs at least one step", workflow_id=self.id)
        return listed

    def _entry_id(self, kind: str, given: str | None) -> str:
        if given is not None:
            return validate_id(given, what=kind)
        self._auto_ids += 1
        return f"{kind}-{self._auto_ids}"

    def _check_open(self, method: str) -> None:
        if self.committed:
            raise WorkflowDefinitionError(
                f"workflow '{self.id}' is committed; {method}() cannot change it. Build a new "
                "workflow (or call the builder before commit())", workflow_id=self.id)

    def _check_committed(self, method: str) -> None:
        if not self.committed:
            raise WorkflowDefinitionError(
                f"workflow '{self.id}' is not committed; call .commit() before {method}()",
                workflow_id=self.id)


@overload
def create_workflow(*, id: str, input_schema: type[InputT], output_schema: type[OutputT],
                    description: str | None = ..., storage: Storage | None = ...,
                    retries: int = ..., retry_delay: float = ..., timeout: float | None = ...,
                    durability: Durability = ..., metadata: dict[str, Any] | None = ...,
                    tracing: bool = ..., trace_io: bool = ..., trace_truncate: int = ...,
                    ) -> Workflow[InputT, OutputT]: ...
@overload
def create_workflow(*, id: str, input_schema: type[InputT], output_schema: Any = ...,
                    description: str | None = ..., storage: Storage | None = ...,
                    retries: int = ..., retry_delay: float = ..., timeout: float | None = ...,
                    durability: Durability = ..., metadata: dict[str, Any] | None = ...,
                    tracing: bool = ..., trace_io: bool = ..., trace_truncate: int = ...,
                    ) -> Workflow[InputT, Any]: ...
@overload
def create_workflow(*, id: str, input_schema: Any = ..., output_schema: type[OutputT],
                    description: str | None = ..., storage: Storage | None = ...,
                    retries: int = ..., retry_delay: float = ..., timeout: float | None = ...,
                    durability: Durability = ..., metadata: dict[str, Any] | None = ...,
                    tracing: bool = ..., trace_io: bool = ..., trace_truncate: int = ...,
                    ) -> Workflow[Any, OutputT]: ...
@overload
def create_workflow(*, id: str, input_schema: Any = ..., output_schema: Any = ...,
                    description: str | None = ..., storage: Storage | None = ...,
                    retries: int = ..., retry_delay: float = ..., timeout: float | None = ...,
                    durability: Durability = ..., metadata: dict[str, Any] | None = ...,
                    tracing: bool = ..., trace_io: bool = ..., trace_truncate: int = ...,
                    ) -> Workflow[Any, Any]: ...


def create_workflow(*, id: str, input_schema: Any = None, output_schema: Any = None,
                    description: str | None = None, storage: Storage | None = None,
                    retries: int = 0, retry_delay: float = 0.1, timeout: float | None = None,
                    durability: Durability = "sync",
                    metadata: dict[str, Any] | None = None, tracing: bool = True,
                    trace_io: bool = True, trace_truncate: int = 2000) -> Workflow[Any, Any]:
    """Start building a workflow: ``Workflow[In, Out]`` for ``input_schema=In,
    output_schema=Out`` (``Any`` for a schema not given, or not a class).

    Args:
        id: The workflow's id.
        input_schema: Schema of the run input (validated by ``start``).
        output_schema: Schema of the final output.
        description: Free text, shown by the studio.
        storage: Where its runs keep snapshots (see ``create_run``).
        retries: Default extra attempts for its steps.
        retry_delay: Base delay between attempts, doubled each time.
        timeout: Default per-attempt timeout of its steps, in seconds.
        durability: "sync" or "exit" (see ``create_run``).
        metadata: Free data kept on the workflow.
        tracing: Record a trace of every run (stored through the storage; see
            ``procflow trace``).
        trace_io: Record the workflow's own input and output on its spans (turn off
            when they are internal, mutable objects).
        trace_truncate: Characters kept of each span's stored input and output.
    """
    return Workflow(id=id, input_schema=input_schema, output_schema=output_schema,
                    description=description, storage=storage, retries=retries,
                    retry_delay=retry_delay, timeout=timeout, durability=durability,
                    metadata=metadata, tracing=tracing, trace_io=trace_io,
                    trace_truncate=trace_truncate)


def _finite(value: object) -> bool:
    """A real number (not a bool), finite: ``nan`` and ``inf`` are refused."""
    return isinstance(value, int | float) and not isinstance(value, bool) \
        and math.isfinite(value)
def _flag(value: object, method: str, workflow_id: str) -> bool:
    if not isinstance(value, bool):
        raise WorkflowDefinitionError(
            f"workflow '{workflow_id}': {method}(distribute=...) takes True or False, got "
            f"{value!r}", workflow_id=workflow_id)
    return value


def _lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (UTF-8 cannot encode it)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return True
    return False
