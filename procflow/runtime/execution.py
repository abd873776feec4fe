"""The state of one execution, and what the runtime runs.

``Execution`` holds one execution's results, storage and event plumbing; a ``Scope``
is where a step runs (its workflow, path prefix and view of the state). ``Failed``
and ``Suspended`` are the internal outcomes that travel up through the plan.

The runtime never imports ``steps`` or ``workflows`` (they sit above it): it runs
anything shaped like ``StepUnit`` (a leaf step) or ``PlanUnit`` (a workflow, top-level
or nested), whose compiled plan is a list of ``Node`` callables. ``Step`` and
``Workflow`` satisfy these protocols; the ``is_workflow`` flag tells them apart.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio
from typing_extensions import TypeVar

from procflow.errors import StepValidationError
from procflow.records import RunSnapshot, RunStatus, SpanKind, StepResult, Tripwire, Usage
from procflow.runtime.events import EventType, WorkflowEvent
from procflow.storage.codec import FixedFields, encode_snapshot, encode_step
from procflow.storage.values import UnstorableValueError

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectSendStream

    from procflow.context import RequestContext
    from procflow.records import Span
    from procflow.runtime.tracing import Tracer
    from procflow.storage.base import Storage

__all__ = [
    "Check",
    "Deferred",
    "Durability",
    "Execution",
    "Failed",
    "InputT",
    "Node",
    "OutputT",
    "PlanUnit",
    "Scope",
    "StepUnit",
    "Suspended",
    "Unit",
    "Write",
]

InputT = TypeVar("InputT", default=Any)
"""The type of a step's or workflow's input (``Any`` without a schema)."""

OutputT = TypeVar("OutputT", default=Any)
"""The type of a step's or workflow's output (``Any`` without a schema)."""

Durability = Literal["sync", "exit"]
"""When a run's snapshots are written: at every step boundary, or at the end and on
suspend."""


class Check(Protocol):
    """A schema as the runtime uses it (``procflow.steps.Schema``)."""

    def validate(self, value: Any) -> Any:
        """``value`` validated (raises pydantic's ``ValidationError``)."""
        ...

    def check(self, value: Any, *, what: str, workflow_id: str | None, step_id: str | None,
              run_id: str | None = None) -> Any:
        """``value`` validated (raises ``StepValidationError`` naming the place)."""
        ...


class StepUnit(Protocol):
    """A leaf step as the runtime sees it (``procflow.steps.Step``)."""

    @property
    def is_workflow(self) -> Literal[False]: ...
    @property
    def id(self) -> str: ...
    @property
    def span_kind(self) -> SpanKind: ...
    @property
    def execute(self) -> Callable[[Any], Any]:
        """Called with the ``StepContext`` (typed loosely: the context module imports this one)."""
        ...
    @property
    def is_async(self) -> bool: ...
    @property
    def run_in_thread(self) -> bool: ...
    @property
    def input(self) -> Check | None: ...
    @property
    def output(self) -> Check | None: ...
    @property
    def suspend_check(self) -> Check | None: ...
    @property
    def inline(self) -> Callable[[Any, Any], bool] | None:
        """``Step.inline``: the step's trivial work done at once, without a span."""
        ...
    @property
    def resume_check(self) -> Check | None: ...
    @property
    def retries(self) -> int | None: ...
    @property
    def timeout(self) -> float | None: ...
    @property
    def trace_io(self) -> bool: ...


class PlanUnit(Protocol):
    """A workflow as the runtime sees it (``procflow.workflows.Workflow``)."""

    compiled: Sequence[Node] | None
    """The compiled plan, once ``compile()`` ran."""

    @property
    def is_workflow(self) -> Literal[True]: ...
    @property
    def id(self) -> str: ...
    @property
    def input(self) -> Check | None: ...
    @property
    def output(self) -> Check | None: ...
    @property
    def retries(self) -> int: ...
    @property
    def retry_delay(self) -> float: ...
    @property
    def timeout(self) -> float | None: ...
    @property
    def durability(self) -> Durability: ...
    @property
    def storage(self) -> Storage | None: ...
    @property
    def trace_io(self) -> bool: ...
    @property
    def trace_truncate(self) -> int: ...

    def compile(self) -> Sequence[Node]:
        """Compile the plan into nodes (and keep them as ``compiled``)."""
        ...

    def get_step(self, step_id: str) -> StepUnit | PlanUnit | None:
        """The step (or nested workflow) of the plan with this id."""
        ...


Unit = StepUnit | PlanUnit
"""What ``run_unit`` runs."""


class Failed(Exception):
    """Internal: a step failed; carries its path and the public error."""

    def __init__(self, path: str, error: BaseException) -> None:
        super().__init__(path)
        self.path = path
        self.error = error


class Suspended(Exception):
    """Internal: one or more steps suspended; carries their paths."""

    def __init__(self, paths: list[str]) -> None:
        super().__init__(paths)
        self.paths = paths


class Deferred:
    """A value made on first use: a distributed job's run input, which the job decodes
    (and checks) only if a step asks for it (``ctx.get_init_data()``)."""

    __slots__ = ("_make", "_value")

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make: Callable[[], Any] | None = make
        self._value: Any = None

    def get(self) -> Any:
        """The value (made now if it was not yet)."""
        if self._make is not None:
            self._value = self._make()
            self._make = None
        return self._value


class Scope:
    """Where a step runs: its workflow, its path prefix, its view of the state.

    A forked scope (a parallel branch, a foreach item) copies the state lazily, on
    first access, so branches that never touch state cost nothing.
    """

    __slots__ = ("_base", "_state", "init_data", "prefix", "span", "wf")

    def __init__(self, wf: PlanUnit, prefix: str, init_data: Any,
                 state: dict[str, Any] | None = None,
                 base: dict[str, Any] | None = None, span: Span | None = None) -> None:
        self.wf = wf
        self.prefix = prefix
        self.init_data = init_data
        self._state = state
        self._base = base
        self.span = span  # the span enclosing the steps of this scope

    @property
    def workflow_id(self) -> str:
        return self.wf.id

    def path(self, step_id: str) -> str:
        """The path of the step ``step_id`` here: ``prefix + step_id``, one string object
        for every run (a nested step's path keys each stored run's results and names its
        span; ``sys.intern`` keeps it only while something holds it)."""
        prefix = self.prefix
        return sys.intern(prefix + step_id) if prefix else step_id

    @property
    def state(self) -> dict[str, Any]:
        if self._state is None:
            self._state = dict(self._base or {})
        return self._state

    @state.setter
    def state(self, value: dict[str, Any]) -> None:
        self._state = value

    def fork(self, span: Span | None = None) -> Scope:
        return Scope(self.wf, self.prefix, self.init_data, base=self.state,
                     span=span if span is not None else self.span)

    def under(self, span: Span | None) -> Scope:
        """This scope (same state) with ``span`` as the parent of its steps' spans."""
        if span is None:
            return self
        return Scope(self.wf, self.prefix, self.init_data, state=self.state, span=span)

    def join(self, forks: list[Scope]) -> None:
        """Merge the forks' state changes, in fork order (later forks win per key)."""
        base = self.state
        merged: dict[str, Any] | None = None
        for fork in forks:
            changed = fork._state
            if changed is None:
                continue
            if merged is None:
                merged = dict(base)
            for key, value in changed.items():
                if key not in base or base[key] is not value:
                    merged[key] = value
            for key in base:
                if key not in changed:
                    merged.pop(key, None)
        if merged is not None:
            self._state = merged


class Execution:
    """One execution of a run: results, state, storage and event plumbing."""

    __slots__ = (
        "blobs_written",
        "context_json",
        "created_at",
        "digests",
        "dirty",
        "distributor",
        "encodes",
        "fixed",
        "input",
        "mark_started",
        "marked_running",
        "parked",
        "persistent",
        "records",
        "replaying",
        "request_context",
        "resume_data",
        "resume_targets",
        "run_id",
        "send",
        "status",
        "storage",
        "sync",
        "sync_start",
        "top",
        "tracer",
        "usage",
        "wf",
    )

    def __init__(self, *, wf: PlanUnit, run_id: str, input: Any,
                 records: dict[str, StepResult], state: dict[str, Any],
                 request_context: RequestContext, storage: Storage, sync: bool,
                 send: MemoryObjectSendStream[WorkflowEvent] | None, created_at: float,
                 resume_targets: frozenset[str] = frozenset(),
                 resume_data: Any = None, tracer: Tracer | None = None) -> None:
        self.wf = wf
        self.run_id = run_id
        self.input = input
        self.records = records
        self.replaying = bool(records)  # stored results exist: resume or restart
        self.dirty: dict[str, StepResult] = {}
        self.request_context = request_context
        self.storage = storage
        self.persistent = storage.persistent
        # A storage keeping objects by reference (InMemoryStorage) encodes nothing.
        self.encodes = self.persistent and not storage.keeps_objects
        self.blobs_written: set[str] = set()  # digests of the large values written
        self.digests: dict[int, tuple[Any, str]] = {}  # large values hashed, by identity
        # The persisted request context, for "running" snapshots: taken at the first one
        # (the start, under "sync" durability); a final snapshot takes it anew.
        self.context_json: dict[str, Any] | None = None
        self.fixed = FixedFields()
        """The header's fields that do not change, encoded once (while the input and the
        persisted request context are the same objects)."""
        self.sync_start = sync and self.persistent
        """Write a "running" snapshot as the run starts (under "sync" durability)."""
        self.sync = self.sync_start and not storage.process_local
        """Write a snapshot at every step boundary: under "sync" durability, where the
        storage can outlive the process (a process-local one, like ``InMemoryStorage``,
        gets the results with the run's end, or its suspension or failure; see
        ``mark_steps`` for the exception)."""
        self.send = send
        self.created_at = created_at
        self.resume_targets = resume_targets
        self.resume_data = resume_data
        self.tracer = tracer
        self.top = Scope(wf, "", input, state=state)
        self.status: RunStatus = "running"
        self.usage: Usage | None = None
        """Tokens reported by the steps of this execution (nested workflows included)."""
        self.distributor: Any = None
        """Where distributed fan-outs send their jobs (a ``Distributor``, on workers)."""
        self.mark_started = False
        """Store each step as "running" before it runs (on workers: a step re-run after a
        lost worker then shows as attempt 2)."""
        self.parked: str | None = None
        """The distributed fan-out the run parked at (its jobs hold the run's lease)."""
        self.marked_running = 0
        """Steps stored as "running" whose result is not recorded yet (with
        ``mark_started``): when the last one ends, its result goes with the next write
        (the next step's mark, or the run's end) instead of a write of its own."""

    def mark_steps(self) -> None:
        """Store each step as "running" before it runs, and every boundary as it comes
        (on workers, whatever the storage: a step re-run after a lost worker then shows
        as attempt 2)."""
        self.mark_started = True
        self.sync = self.sync_start

    def add_usage(self, usage: Usage) -> None:
        """Add tokens a step spent to the execution's total."""
        self.usage = usage if self.usage is None else self.usage + usage

    # -- results, snapshots, events ----------------------------------------------

    def keep(self, path: str, result: StepResult) -> None:
        """Keep a step's result for the next flush (the hot path: no await).

        For a persistent storage the result is encoded here, once (see ``encode``).

        Raises:
            Failed: The result holds a value storage cannot keep; the step is recorded
                as failed with a ``StepValidationError`` instead.
        """
        if self.persistent:
            if self.encodes and result.encoded is None:
                try:
                    self.encode(path, result)
                except StepValidationError as exc:
                    failed = StepResult("failed", error=exc, started_at=result.started_at,
                                        ended_at=time.time(), attempts=result.attempts)
                    self.encode(path, failed)
                    self.records[path] = self.dirty[path] = failed
                    raise Failed(path, exc) from None
            self.dirty[path] = result
        self.records[path] = result

    def encode(self, path: str, result: StepResult) -> None:
        """Encode a step's result for storage now, at the step (cached on the result).

        Raises:
            StepValidationError: A value in it cannot be stored; names the step, the
                path inside the value and its type. Nothing was written.
        """
        try:
            result.encoded = encode_step(result, digests=self.digests)
        except UnstorableValueError as exc:
            raise self.unstorable(exc, "", path) from None

    def unstorable(self, exc: UnstorableValueError, root: str,
                   path: str | None) -> StepValidationError:
        """The ``StepValidationError`` for a value storage refused."""
        where = exc.where(root)
        place = f"step '{path}'" if path is not None else "the run"
        return StepValidationError(
            f"workflow '{self.wf.id}', {place}: {where} is a {exc.type_name}, which the "
            f"run's storage ({type(self.storage).__name__}) cannot keep: {exc.reason}",
            workflow_id=self.wf.id, run_id=self.run_id, step_id=path, field=where)

    async def record(self, path: str, result: StepResult) -> None:
        """Keep a step's result, and write a snapshot now under "sync" durability."""
        self.keep(path, result)
        if self.sync:
            await self.flush("running")

    async def flush(self, status: RunStatus, *, result: Any = None,
                    error: BaseException | None = None, suspended: list[list[str]] | None = None,
                    tripwire: Tripwire | None = None,
                    state: dict[str, Any] | None = None, write: Write | None = None,
                    ) -> None:
        """Write the run header and the step results changed since the last flush.

        ``write`` writes them instead of ``storage.save_snapshot`` (a combined write,
        e.g. ``Storage.save_and_release``); if it raises, the results are kept for a
        retry as when the storage fails.

        Raises:
            StepValidationError: A header value (the state, the result) cannot be stored.
            StorageError: The storage failed; the step results are kept for a retry.
        """
        dirty, self.dirty = self.dirty, {}
        if not self.persistent:
            return
        if status != "running" or self.context_json is None:
            self.context_json = self.request_context.persisted()
        snapshot = RunSnapshot(
            workflow_id=self.wf.id, run_id=self.run_id, status=status, input=self.input,
            state=self.top.state if state is None else state, result=result, error=error,
            suspended=suspended or [],
            tripwire=tripwire, request_context=self.context_json,
            created_at=self.created_at, updated_at=time.time())
        save = self.storage.save_snapshot if write is None else write
        try:
            if not self.encodes:  # the storage keeps the objects themselves
                await save(snapshot, dirty)
                return
            blobs = self.encode_header(snapshot, dirty)
            await save(snapshot, dirty)
        except BaseException as exc:
            self.dirty = {**dirty, **self.dirty}  # not written: keep them for a retry
            if isinstance(exc, UnstorableValueError):
                raise self.unstorable(exc, "", next(reversed(dirty), None)) from None
            raise
        self.blobs_written.update(blobs)
        for result in dirty.values():
            result.encoded = None  # written: the value may be large, drop its copy

    def encode_header(self, snapshot: RunSnapshot, dirty: dict[str, StepResult],
                      ) -> list[str]:
        """Encode the header for ``dump_run``, with the blobs (of the header and of the
        dirty results) this execution has not written yet; returns their digests.

        Raises:
            UnstorableValueError: A header value cannot be stored.
        """
        header, blobs = encode_snapshot(snapshot, digests=self.digests, fixed=self.fixed)
        for path, result in dirty.items():
            if result.encoded is None:
                self.encode(path, result)
            blobs.update(result.encoded[1])
        written = self.blobs_written
        new = {digest: content for digest, content in blobs.items() if digest not in written}
        snapshot.encoded = (header, new)
        return list(new)

    async def event(self, type: EventType, step_id: str | None, payload: Any) -> None:
        if self.send is not None:
            try:
                await self.send.send(WorkflowEvent(type, self.run_id, step_id, payload,
                                                   time.time()))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self.send = None  # nobody listens any more; the run carries on

    async def emit_custom(self, step_id: str, event_type: str, payload: Any) -> None:
        if self.send is not None:
            await self.event("custom", step_id, {"type": event_type, "data": payload})

    def resume_for(self, path: str) -> tuple[bool, Any]:
        """Whether ``path`` is the step being resumed, and the data to resume it with."""
        if path in self.resume_targets:
            return True, self.resume_data
        return False, None


Write = Callable[[RunSnapshot, dict[str, StepResult]], Awaitable[None]]
"""Writes a run's header and step results (``Execution.flush``'s ``write``)."""

Node = Callable[[Execution, Any, Scope], Awaitable[Any]]
"""One compiled plan entry: takes the execution, the data and the scope; returns the data."""
