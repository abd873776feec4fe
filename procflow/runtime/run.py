"""``Run``: one execution history of a workflow: start, stream, resume, cancel, restart."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, NamedTuple

import anyio

from procflow.context import RequestContext
from procflow.errors import (
    RunNotFoundError,
    RunNotSuspendedError,
    RunStateError,
    SnapshotCorruptedError,
    StepValidationError,
    StorageError,
    TripWire,
)
from procflow.messages import new_secret_id
from procflow.records import (
    RunSnapshot,
    RunStatus,
    Span,
    SpanEntry,
    StepResult,
    TraceRecord,
    Tripwire,
)
from procflow.runtime.defaults import resolve_storage
from procflow.runtime.distributed import Distributor, Job, Parked, run_job
from procflow.runtime.events import WorkflowEvent
from procflow.runtime.execution import (
    Durability,
    Execution,
    Failed,
    OutputT,
    PlanUnit,
    StepUnit,
    Suspended,
)
from procflow.runtime.executor import run_plan
from procflow.runtime.executors import Executor, default_executor
from procflow.runtime.leases import (
    DEFAULT_LEASE_TTL,
    RunLease,
    lease_owner_id,
    owner_is_dead,
    parked_owner,
)
from procflow.runtime.results import WorkflowResult
from procflow.runtime.step_context import BailSignal
from procflow.runtime.stream import RunStream
from procflow.runtime.sync import call_sync
from procflow.runtime.tracing import ParentSpan, Tracer, finished_trace_hooks
from procflow.storage.null import NullStorage
from procflow.storage.values import UnstorableValueError, encode_value

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectSendStream

    from procflow.storage.base import Storage

__all__ = ["Run"]

_NULL_STORAGE = NullStorage()
_log = logging.getLogger("procflow.runtime")


class _Outcome(NamedTuple):
    """How one execution ended."""

    status: RunStatus
    result: Any = None
    error: BaseException | None = None
    suspended: Sequence[str] = ()
    """Paths of the suspended steps."""
    tripwire: Tripwire | None = None


_CANCELED = _Outcome("canceled")


class Run(Generic[OutputT]):
    """A run of a committed workflow. Make one with ``workflow.create_run()``;
    ``Run[Out]`` for a workflow whose output schema is ``Out``.

    Attributes:
        run_id: The run's id (unpredictable: it is the handle ``get_run`` and
            ``resume`` take).
        workflow: The workflow it runs.
        storage: Where its snapshots go.
        status: "pending" until started, then as the last execution left it.
        lease_ttl: Seconds the run's lease lasts unless renewed (see ``restart``).
        lease_owner: The id this run object takes its lease under.
        private: Set by a caller that alone holds this run object while it executes,
            for a run nothing outside this process can see or continue (an agent call
            kept in an in-memory storage): executing then takes no lease (no heartbeat
            task) and makes no cancel scope (cancel the calling task instead).
    """

    lease_ttl: float = DEFAULT_LEASE_TTL

    def __init__(self, workflow: PlanUnit, *, run_id: str | None = None,
                 storage: Storage | None = None, durability: Durability | None = None,
                 tracing: bool = True, ephemeral: bool = False,
                 parent_span: ParentSpan | None = None) -> None:
        if run_id is not None and (not isinstance(run_id, str) or not run_id):
            raise ValueError(f"run_id must be a non-empty string, got {run_id!r}")
        self.workflow = workflow
        self.run_id = run_id or new_secret_id()
        if ephemeral:
            if storage is not None:
                raise ValueError(
                    f"a run of workflow '{workflow.id}' cannot be ephemeral and have a "
                    "storage: an ephemeral run keeps nothing; drop storage= or ephemeral=True")
            self.storage: Storage = _NULL_STORAGE
            self.durability: Durability = "exit"
        else:
            self.storage = resolve_storage(storage, workflow)
            self.durability = durability or workflow.durability
        self.status: RunStatus = "pending"
        self._records: dict[str, StepResult] = {}
        self._input: Any = None
        self._state: dict[str, Any] = {}
        self._context = RequestContext()
        self._created_at = time.time()
        self._result: WorkflowResult[OutputT] | None = None
        self._suspended: list[str] = []
        self._cancel_scope: anyio.CancelScope | None = None
        self._cancel_requested = False
        self._active = False
        self.tracing = tracing
        self.trace_parent: tuple[Tracer, Span] | None = parent_span
        """Where this run's spans go inside another run's trace (instead of its own)."""
        self._spans: list[SpanEntry] = []
        self.internal = ephemeral
        """True for an ephemeral run (see ``Workflow.create_run``): nobody outside holds
        it, so it skips the cancel scope that ``cancel()`` needs (cancelling the caller
        still stops it) and ``cancel()`` refuses it."""
        self._replay_of: tuple[str, str] | None = None
        self._lease_owner: str | None = None
        self.private = False
        self._lease: RunLease | None = None
        self._executor: Executor | None = None
        self.distributor: Distributor | None = None
        """Where distributed fan-outs send their jobs (set by workers)."""
        self.mark_steps = False
        """Store each step as started before it runs (set by workers)."""

    @classmethod
    async def load(cls, workflow: PlanUnit, run_id: str, *,
                   storage: Storage | None = None) -> Run[Any]:
        """Rebuild a run from storage (``workflow.get_run``)."""
        store = resolve_storage(storage, workflow)
        loaded = await store.load_snapshot(workflow.id, run_id)
        if loaded is None:
            raise RunNotFoundError(
                f"workflow '{workflow.id}' has no stored run '{run_id}' in "
                f"{type(store).__name__}; check the run id and the storage",
                workflow_id=workflow.id, run_id=run_id)
        run: Run[Any] = cls(workflow, run_id=run_id, storage=store)
        run._restore(*loaded)
        run._spans = await _earlier_spans(store, run_id)
        return run

    def _restore(self, snap: RunSnapshot, steps: dict[str, StepResult]) -> None:
        """Take the stored header and step results as this run's."""
        workflow, run_id = self.workflow, self.run_id
        self.status = snap.status
        self._records = steps
        self._state = dict(snap.state)
        self._context = RequestContext.restored(snap.request_context)
        self._created_at = snap.created_at
        self._suspended = [".".join(p) for p in snap.suspended]
        try:
            self._input = (workflow.input.validate(snap.input)
                           if workflow.input is not None and snap.input is not None
                           else snap.input)
        except Exception as exc:
            raise SnapshotCorruptedError(
                f"stored input of run '{run_id}' (workflow '{workflow.id}') no longer matches "
                f"the workflow's input schema: {exc}", workflow_id=workflow.id,
                run_id=run_id) from exc
        self._result = None
        if snap.status not in ("pending", "running"):
            self._result = WorkflowResult(
                snap.status, snap.result, dict(steps), snap.error, dict(snap.state),
                [list(p) for p in snap.suspended], snap.tripwire, None, run_id)

    @property
    def lease_owner(self) -> str:
        """The id this run object takes its lease under (made when first needed)."""
        owner = self._lease_owner
        if owner is None:
            owner = self._lease_owner = lease_owner_id()
        return owner

    @property
    def last_result(self) -> WorkflowResult[OutputT] | None:
        """The result of this object's last execution (or of the stored run it was loaded
        from), if any; ``await run.result()`` waits for a submitted run instead."""
        return self._result

    # -- public API ---------------------------------------------------------------

    async def start(self, input_data: Any = None, *,
                    request_context: RequestContext | Mapping[str, Any] | None = None,
                    initial_state: Mapping[str, Any] | None = None) -> WorkflowResult[OutputT]:
        """Run the workflow from the beginning and return its result.

        A failure does not raise: the result has status "failed" and the error (for
        invalid input, a ``StepValidationError`` naming the field).

        Raises:
            RunStateError: The run was already started.
        """
        return await self._start(None, input_data, request_context, initial_state)

    def start_sync(self, input_data: Any = None, *,
                   request_context: RequestContext | Mapping[str, Any] | None = None,
                   initial_state: Mapping[str, Any] | None = None,
                   ) -> WorkflowResult[OutputT]:
        """``start`` for scripts and notebooks: runs the workflow in an event loop of its
        own and blocks until it ends.

        Raises:
            RuntimeError: Called inside a running event loop (``await run.start(...)``
                there instead).
            RunStateError: The run was already started.
        """
        return call_sync(lambda: self._start(None, input_data, request_context,
                                             initial_state),
                         method="Run.start_sync()", instead="await run.start(...)")

    def stream(self, input_data: Any = None, *,
               request_context: RequestContext | Mapping[str, Any] | None = None,
               initial_state: Mapping[str, Any] | None = None) -> RunStream:
        """Start the run and stream its ``WorkflowEvent``s.

        Use ``async with run.stream(...) as events: async for event in events: ...``
        (or iterate it directly to the end). ``events.result`` is the result afterwards.
        """
        return RunStream(lambda send: self._start(send, input_data, request_context,
                                                  initial_state))

    async def resume(self, step: Any = None, resume_data: Any = None, *,
                     request_context: RequestContext | Mapping[str, Any] | None = None,
                     ) -> WorkflowResult[OutputT]:
        """Resume a suspended step and continue the run.

        Args:
            step: The suspended step: a step object, its id, a dotted path
                ("outer.inner") or a list of ids. Optional when one step is suspended.
            resume_data: Given to the step as ``ctx.resume_data`` (validated against its
                ``resume_schema``).
            request_context: Entries to add to the stored request context (which holds
                only the entries marked ``persist=True``: pass credentials again here).

        Raises:
            RunNotSuspendedError: The run, or the named step, is not suspended.
            RunStateError: Several steps are suspended and ``step`` does not pick one,
                or another process resumed the run first.
            StepValidationError: ``resume_data`` does not match the step's resume schema.
        """
        return await self._resume(None, step, resume_data, request_context)

    def resume_stream(self, step: Any = None, resume_data: Any = None, *,
                      request_context: RequestContext | Mapping[str, Any] | None = None,
                      ) -> RunStream:
        """Like ``resume``, streaming the run's events (see ``stream``)."""
        return RunStream(lambda send: self._resume(send, step, resume_data, request_context))

    async def restart(self, *, request_context: RequestContext | Mapping[str, Any] | None = None,
                      ) -> WorkflowResult[OutputT]:
        """Continue a run whose process stopped (or that failed or was canceled).

        Steps that completed are not run again; the rest run from the stored state.
        A run that already succeeded returns its stored result.

        The run's lease is taken first, atomically: a run that another process is
        executing (its lease is live) is refused, and of two processes restarting the same
        stalled run exactly one runs it; the other, once the first is done, gets the
        stored result (it reloads the run after taking the lease).

        Args:
            request_context: Entries to add to the stored request context (which holds
                only the entries marked ``persist=True``: pass credentials again here).

        Raises:
            RunStateError: The run is running in this process or holds a live lease in
                another, was never started, or is suspended (use ``resume``).
        """
        self._check_idle("restart")
        if self.status == "success" and self._result is not None:
            return self._result
        await self._take_lease()
        try:
            if self.storage is not _NULL_STORAGE:
                loaded = await self.storage.load_snapshot(self.workflow.id, self.run_id)
                if loaded is not None:
                    self._restore(*loaded)
            if self.status == "success" and self._result is not None:
                await self._drop_lease()
                return self._result
            if self.status == "suspended":
                raise RunStateError(
                    f"run '{self.run_id}' is suspended at {self._suspended}; use resume() "
                    "instead of restart()", workflow_id=self.workflow.id, run_id=self.run_id)
            if self.status == "pending" and not self._records:
                raise RunStateError(
                    f"run '{self.run_id}' was never started; call start()",
                    workflow_id=self.workflow.id, run_id=self.run_id)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._drop_lease()
            raise
        if request_context is not None:
            self._context.update(_as_context(request_context))
        _log.info("run %s (workflow %s): restarting from status %s", self.run_id,
                  self.workflow.id, self.status,
                  extra={"run_id": self.run_id, "workflow_id": self.workflow.id})
        return await self._execute(None, frozenset(), None)

    async def stalled(self) -> bool:
        """Whether the stored run is "running" with no live lease (or one held by a
        process of this host that is gone): the process that ran it stopped, and
        ``restart()`` continues it."""
        if self._active or self.storage is _NULL_STORAGE:
            return False
        loaded = await self.storage.load_snapshot(self.workflow.id, self.run_id)
        if loaded is None or loaded[0].status != "running":
            return False
        lease = await self.storage.get_lease(self.workflow.id, self.run_id)
        return lease is None or owner_is_dead(lease.owner)

    async def replay_from(self, step: Any, *, run_id: str | None = None) -> Run[OutputT]:
        """Time travel: run this run again from ``step``, as a new run.

        The new run starts with this run's input, request context and stored state;
        every step that had finished before ``step`` started keeps its stored result
        (it is not run again); ``step`` and everything after it run anew.

        Args:
            step: The step (object, id or dotted path) to run again from.
            run_id: The new run's id (random by default).

        Returns:
            The new run; ``new_run.last_result`` is its result.

        Raises:
            RunStateError: This run is running, or ``step`` has no stored result.
        """
        self._check_idle("replay_from")
        path = _path_of(step)
        record = self._records.get(path)
        if record is None:
            known = sorted(p for p in self._records if "[" not in p)
            raise RunStateError(
                f"step '{path}' has no stored result in run '{self.run_id}'; steps with "
                f"results: {known}", workflow_id=self.workflow.id, run_id=self.run_id,
                step_id=path)
        t0 = record.started_at
        inside = (path + ".", path + "[")
        kept = {p: r for p, r in self._records.items()
                if r.status == "success" and r.ended_at is not None and r.ended_at < t0
                and p != path and not p.startswith(inside)}
        new: Run[OutputT] = Run(self.workflow, run_id=run_id, storage=self.storage,
                  durability=self.durability, tracing=self.tracing)
        new._input = self._input
        new._state = dict(self._state)
        new._context = self._context.copy()
        new._records = kept
        new._replay_of = (self.run_id, path)
        await new._execute(None, frozenset(), None)
        return new

    async def submit(self, input_data: Any = None, *, executor: Executor | None = None,
                     request_context: RequestContext | Mapping[str, Any] | None = None,
                     initial_state: Mapping[str, Any] | None = None) -> str:
        """Hand the run to an executor and return its id at once (``wait`` for the result).

        Args:
            input_data: The run's input.
            executor: Where it runs: a ``LocalExecutor`` (the default, see
                ``set_default_executor``) or a ``procflow.workers.DramatiqExecutor``.
            request_context: As for ``start`` (on workers only persisted entries travel).
            initial_state: As for ``start``.

        Raises:
            RunStateError: The run was already started.
            StepValidationError: The input does not match the workflow's input schema
                (a remote executor checks it before sending).
        """
        if self.status != "pending" or self._active:
            raise RunStateError(
                f"run '{self.run_id}' cannot be submitted: it is not new (status "
                f"{self.status!r})", workflow_id=self.workflow.id, run_id=self.run_id)
        chosen = executor if executor is not None else default_executor()
        self._executor = chosen
        context = None if request_context is None else _as_context(request_context)
        return await chosen.submit(self, input_data, request_context=context,
                                   initial_state=initial_state)

    async def result(self, *, timeout: float | None = None,  # noqa: ASYNC109 - the API's
                     executor: Executor | None = None) -> WorkflowResult[OutputT]:
        """The result of a submitted run once it is settled (final or suspended).

        Args:
            timeout: Seconds to wait at most (``None``: no limit).
            executor: The executor the run was submitted to (default: the one this
                object submitted it to, else the process default); a run got with
                ``get_run`` in another process passes it here.

        Raises:
            TimeoutError: The run did not settle within ``timeout`` seconds.
        """
        chosen = executor or self._executor or default_executor()
        return await chosen.wait(self, timeout=timeout)

    async def resume_submit(self, step: Any = None, resume_data: Any = None, *,
                            executor: Executor | None = None) -> str:
        """Resume a suspended run on an executor and return its id at once (``result``
        waits for the outcome): on workers (``DramatiqExecutor``) the resumed part runs
        on a worker, not in this process.

        Args:
            step: As for ``resume``.
            resume_data: As for ``resume`` (checked here; JSON-ready for workers).
            executor: Where it runs (default: the process default, a ``LocalExecutor``).

        Raises:
            RunNotSuspendedError: The run, or the named step, is not suspended.
            RunStateError: As for ``resume`` (another process resumed it first).
            StepValidationError: ``resume_data`` does not match the step's resume schema.
        """
        path, resume_data = self._resume_request("resume_submit", step, resume_data)
        chosen = executor if executor is not None else default_executor()
        self._executor = chosen
        return await chosen.resume(self, path, resume_data)

    async def prepare(self, input_data: Any = None, *,
                      request_context: RequestContext | Mapping[str, Any] | None = None,
                      initial_state: Mapping[str, Any] | None = None) -> None:
        """Validate the input and store the run as "pending", for another process to
        execute (``run_submitted``); what remote executors do on ``submit``.

        Raises:
            StepValidationError: The input does not match the workflow's input schema.
        """
        if initial_state is not None and not isinstance(initial_state, Mapping):
            raise TypeError(f"initial_state must be a mapping, got {type(initial_state).__name__}")
        wf = self.workflow
        if wf.input is not None:
            input_data = wf.input.check(input_data, what="run input", workflow_id=wf.id,
                                        step_id=None, run_id=self.run_id)
        self._input = input_data
        self._context = _as_context(request_context)
        self._state = dict(initial_state or {})
        await self._execution(None, frozenset(), None).flush("pending")

    async def run_submitted(self, step: str | None = None,
                            resume_data: Any = None) -> WorkflowResult:
        """What a worker does with a delivered run: start a stored "pending" run from its
        stored input, continue a "running" one (a redelivery after a lost worker, or a
        parked fan-out whose jobs are done), or return a settled run's stored result.
        With ``step``, the run (claimed "running" by ``resume_submit``) continues by
        resuming that step with ``resume_data``.

        The run is loaded after its lease is taken: a run object made with
        ``Run(workflow, run_id=..., storage=...)``, without ``load``, will do.

        Raises:
            RunStateError: Another live process holds the run's lease.
        """
        self._check_idle("run_submitted")
        await self._take_lease(parked=True)
        try:
            loaded = await self.storage.load_snapshot(self.workflow.id, self.run_id)
            if loaded is None:
                raise RunNotFoundError(
                    f"workflow '{self.workflow.id}' has no stored run '{self.run_id}'",
                    workflow_id=self.workflow.id, run_id=self.run_id)
            self._restore(*loaded)
            if self.status == "running" and not self._spans:  # continued: extend its trace
                self._spans = await _earlier_spans(self.storage, self.run_id)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._drop_lease()
            raise
        if self.status not in ("pending", "running"):
            await self._drop_lease()
            assert self._result is not None  # a settled stored run has its result
            return self._result
        if step is None:
            return await self._execute(None, frozenset(), None)
        _log.info("run %s (workflow %s): resuming step %s", self.run_id, self.workflow.id,
                  step, extra={"run_id": self.run_id, "workflow_id": self.workflow.id,
                               "step_path": step})
        return await self._execute(None, frozenset({step}), resume_data)

    async def run_job(self, job: Job) -> StepResult:
        """Run one job of this run's distributed fan-out (under the job's own lease) and
        store its result; a job already stored is not run again. The run is loaded after
        the lease is taken (an unloaded run object will do).

        Raises:
            RunStateError: Another live process holds the job's lease.
            RunNotFoundError: The run is not stored.
            WorkflowDefinitionError-like ``LookupError``: the job's step is not in the
                workflow.
        """
        unit = _find_unit(self.workflow, job.unit_path)
        if unit is None:
            raise LookupError(f"workflow '{self.workflow.id}' has no step at "
                              f"'{job.unit_path}' (job {job.path} of run '{self.run_id}')")
        lease = RunLease(self.storage, self.workflow.id, f"{self.run_id}#{job.path}",
                         owner=self.lease_owner, ttl=self.lease_ttl)
        await lease.take()
        try:
            loaded = await self.storage.load_snapshot(self.workflow.id, self.run_id)
            if loaded is None:
                raise RunNotFoundError(
                    f"workflow '{self.workflow.id}' has no stored run '{self.run_id}'",
                    workflow_id=self.workflow.id, run_id=self.run_id)
            self._restore(*loaded)
            ex = self._execution(None, frozenset(), None)
            return await run_job(ex, unit, job)
        finally:
            with anyio.CancelScope(shield=True):
                await lease.drop()

    def request_cancel(self) -> None:
        """Cancel the run's execution in this process, now or as soon as it starts
        (what a worker does when another process cancels the run)."""
        self._cancel_requested = True
        if self._cancel_scope is not None:
            self._cancel_scope.cancel()

    async def refresh(self) -> None:
        """Reload the run's status, results and state from storage.

        Raises:
            RunStateError: The run is executing in this process.
            RunNotFoundError: The run is not stored.
        """
        self._check_idle("refresh")
        loaded = await self.storage.load_snapshot(self.workflow.id, self.run_id)
        if loaded is None:
            raise RunNotFoundError(
                f"workflow '{self.workflow.id}' has no stored run '{self.run_id}'",
                workflow_id=self.workflow.id, run_id=self.run_id)
        self._restore(*loaded)

    async def cancel(self) -> None:
        """Cancel the run: a running execution stops (no task is left behind) and the
        run ends "canceled"; a pending or suspended run is marked "canceled". A run
        submitted to workers is cancelled where it runs, at its next step boundary (a
        running step's cancel scope is cancelled)."""
        if self.internal or (self.private and self._active):
            raise RunStateError(
                f"run '{self.run_id}' of workflow '{self.workflow.id}' is internal to a "
                "library call and cannot be cancelled on its own; cancel the call instead",
                workflow_id=self.workflow.id, run_id=self.run_id)
        self._cancel_requested = True
        if self._cancel_scope is not None:
            self._cancel_scope.cancel()
            return
        if not self._active and self._executor is not None \
                and await self._executor.cancel(self):
            return
        if self.status in ("pending", "suspended", "running"):
            ex = self._execution(None, frozenset(), None)
            await self._finish(ex, _CANCELED)

    # -- internals ----------------------------------------------------------------

    def _check_idle(self, what: str) -> None:
        if self._active:
            raise RunStateError(
                f"run '{self.run_id}' is running; {what}() must wait until it ends",
                workflow_id=self.workflow.id, run_id=self.run_id)

    async def _start(self, send: Any, input_data: Any, request_context: Any,
                     initial_state: Mapping[str, Any] | None) -> WorkflowResult[OutputT]:
        if self.status != "pending" or self._active:
            raise RunStateError(
                f"run '{self.run_id}' cannot start: it is not new (status {self.status!r}); use "
                "resume(), restart(), or create a new run", workflow_id=self.workflow.id,
                run_id=self.run_id)
        if initial_state is not None and not isinstance(initial_state, Mapping):
            raise TypeError(f"initial_state must be a mapping, got {type(initial_state).__name__}")
        self._context = _as_context(request_context)
        self._state = dict(initial_state or {})
        wf = self.workflow
        if wf.input is not None:
            try:
                input_data = wf.input.check(input_data, what="run input", workflow_id=wf.id,
                                            step_id=None, run_id=self.run_id)
            except StepValidationError as exc:
                self._input = input_data
                ex = self._execution(send, frozenset(), None)
                self._trace(ex)
                return await self._finish(ex, _Outcome("failed", error=exc))
        if getattr(self.storage, "persistent", True) and not getattr(
                self.storage, "keeps_objects", False):
            try:
                encode_value(input_data)
            except UnstorableValueError as exc:
                self._input = None
                ex = self._execution(send, frozenset(), None)
                self._trace(ex)
                return await self._finish(ex, _Outcome("failed", error=ex.unstorable(
                    exc, "input", None)))
        self._input = input_data
        return await self._execute(send, frozenset(), None)

    async def _resume(self, send: Any, step: Any, resume_data: Any,
                      request_context: Any) -> WorkflowResult[OutputT]:
        path, resume_data = self._resume_request("resume", step, resume_data)
        await self._take_lease()
        if not await self.storage.claim_run(self.workflow.id, self.run_id,
                                            expected="suspended", new="running"):
            await self._drop_lease()
            raise RunStateError(
                f"run '{self.run_id}' is no longer suspended in storage; another process "
                "may have resumed it", workflow_id=self.workflow.id, run_id=self.run_id)
        if request_context is not None:
            self._context.update(_as_context(request_context))
        _log.info("run %s (workflow %s): resuming step %s", self.run_id, self.workflow.id,
                  path, extra={"run_id": self.run_id, "workflow_id": self.workflow.id,
                               "step_path": path})
        return await self._execute(send, frozenset({path}), resume_data)

    def _resume_request(self, what: str, step: Any, resume_data: Any) -> tuple[str, Any]:
        """The suspended step's path and the checked resume data.

        Raises:
            RunNotSuspendedError: The run is not suspended.
        """
        self._check_idle(what)
        if self.status != "suspended":
            raise RunNotSuspendedError(
                f"run '{self.run_id}' of workflow '{self.workflow.id}' is not suspended "
                f"(status {self.status!r}); only a suspended run can be resumed",
                workflow_id=self.workflow.id, run_id=self.run_id)
        path = self._resolve_target(step)
        unit = _find_unit(self.workflow, path)
        if unit is not None and not unit.is_workflow and unit.resume_check is not None:
            resume_data = unit.resume_check.check(
                resume_data, what="resume data", workflow_id=self.workflow.id, step_id=path,
                run_id=self.run_id)
        return path, resume_data

    def _resolve_target(self, step: Any) -> str:
        suspended = self._suspended
        if step is None:
            if len(suspended) == 1:
                return suspended[0]
            raise RunStateError(
                f"run '{self.run_id}' has {len(suspended)} suspended steps {suspended}; "
                "name one with resume(step=...)", workflow_id=self.workflow.id,
                run_id=self.run_id)
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
                f"step '{name}' of run '{self.run_id}' is not suspended; suspended steps: "
                f"{suspended}", workflow_id=self.workflow.id, run_id=self.run_id,
                step_id=name)
        raise RunStateError(
            f"step '{name}' matches several suspended steps {matches}; pass the full path",
            workflow_id=self.workflow.id, run_id=self.run_id, step_id=name)

    def _execution(self, send: Any, targets: frozenset[str], resume_data: Any) -> Execution:
        ex = Execution(
            wf=self.workflow, run_id=self.run_id, input=self._input, records=self._records,
            state=self._state, request_context=self._context, storage=self.storage,
            sync=self.durability == "sync", send=send, created_at=self._created_at,
            resume_targets=targets, resume_data=resume_data)
        if self.distributor is not None:
            ex.distributor = self.distributor
        if self.mark_steps:
            ex.mark_started = True
        return ex

    async def _execute(self, send: MemoryObjectSendStream[WorkflowEvent] | None,
                       targets: frozenset[str], resume_data: Any) -> WorkflowResult[OutputT]:
        ex = self._execution(send, targets, resume_data)
        self._trace(ex)
        self._active = True
        self.status = "running"
        try:
            if self.internal or self.private:  # an agent call: no cancel scope, no lease
                outcome = await self._run_body(ex)
                return await self._finish(ex, outcome)
            await self._take_lease()
            with anyio.CancelScope() as scope:
                self._cancel_scope = scope
                if self._cancel_requested:
                    scope.cancel()
                outcome = await self._run_leased(ex, scope)
            self._cancel_scope = None
            if self._lease is not None and self._lease.lost:
                raise self._lease.lost_error()
            if scope.cancelled_caught:
                outcome = _CANCELED
            return await self._finish(ex, outcome)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                if not self._lease_lost:
                    await self._finish(ex, _CANCELED)
            raise
        finally:
            self._cancel_scope = None
            self._active = False
            lease = self._lease
            if lease is not None and lease.held is not None:
                if not lease.renews:  # a process-local storage's release never waits
                    await lease.drop()
                else:
                    with anyio.CancelScope(shield=True):
                        if ex.parked is not None and self.status == "running":
                            await lease.hand_over(parked_owner(ex.parked))
                        else:
                            await lease.drop()

    # -- leases -------------------------------------------------------------------

    async def _take_lease(self, *, parked: bool = False) -> None:
        """Hold the run's lease (see ``restart``); no-op if held, if nothing is stored or
        if the run is ``private``. ``parked``: take over a parked fan-out's lease."""
        if self.private or not getattr(self.storage, "persistent", True):
            return
        if self._lease is None or self._lease.held is None:
            self._lease = RunLease(self.storage, self.workflow.id, self.run_id,
                                   owner=self.lease_owner, ttl=self.lease_ttl)
        await self._lease.take(parked=parked)

    async def _drop_lease(self) -> None:
        if self._lease is not None:
            await self._lease.drop()

    @property
    def _lease_lost(self) -> bool:
        return self._lease is not None and self._lease.lost

    async def _run_leased(self, ex: Execution, scope: anyio.CancelScope) -> _Outcome:
        """The run's body, with a heartbeat renewing its lease beside it."""
        lease = self._lease
        if lease is None or lease.held is None or not lease.renews:
            return await self._run_body(ex)
        beat = lease.heartbeat(scope.cancel)
        if beat is not None:  # asyncio: a timer, and a task only for a long run
            try:
                return await self._run_body(ex)
            finally:
                await beat.stop()
        async with anyio.create_task_group() as tg:
            tg.start_soon(lease.keep, scope.cancel)
            outcome = await self._run_body(ex)
            tg.cancel_scope.cancel()
        return outcome

    async def _run_body(self, ex: Execution) -> _Outcome:
        if ex.send is not None:
            await ex.event("run-start", None, {"input": self._input})
        if ex.sync:
            await ex.flush("running")
        return await _outcome(ex)

    def _trace(self, ex: Execution) -> None:
        wf = self.workflow
        if self.trace_parent is not None:
            tracer, parent = self.trace_parent
            ex.tracer = tracer
            ex.top.span = tracer.start(wf.id, "workflow", parent,
                                       input=self._input if wf.trace_io else None)
        elif self.tracing:
            ex.tracer = Tracer(self._spans)
            ex.top.span = ex.tracer.start(f"run: {wf.id}", "run", None,
                                          input=self._input if wf.trace_io else None)
            if self._replay_of is not None:
                ex.top.span.set(replayed_from={"run_id": self._replay_of[0],
                                               "step": self._replay_of[1]},
                                reused=sorted(self._records))

    async def _save_trace(self, ex: Execution, status: RunStatus, result: Any,
                          error: BaseException | None, tripwire: Tripwire | None) -> None:
        span = ex.top.span
        if span is None:
            return
        attributes = {"tripwire": tripwire.to_dict()} if tripwire else {}
        Tracer.end(span, "running" if status == "pending" or status == "corrupted" else status,
                   output=result if self.workflow.trace_io else None, error=error, **attributes)
        if self.trace_parent is not None or ex.tracer is None:
            return
        store = (self.storage if getattr(self.storage, "persistent", True)
                 else resolve_storage(None, self.workflow))
        spans = ex.tracer.spans
        # A resumed run's trace holds each execution's run span; this one ended last.
        record = TraceRecord.from_spans(self.run_id, self.workflow.id, status, spans,
                                        truncate=self.workflow.trace_truncate, ended=span.end)
        await store.save_trace(record)
        if finished_trace_hooks:  # OpenTelemetry export, when instrumented
            _call_trace_hooks(record)

    async def _finish(self, ex: Execution, outcome: _Outcome) -> WorkflowResult[OutputT]:
        status, result, error, suspended_paths, tripwire = outcome
        suspended = list(dict.fromkeys(suspended_paths))
        paths = [p.split(".") for p in suspended]
        self.status = status
        self._suspended = suspended
        self._state = ex.top.state
        usage = ex.usage
        if usage is not None and ex.top.span is not None:
            ex.top.span.set(usage=usage.to_dict())
        # The trace first: whoever sees the run settled in storage finds its trace.
        try:
            await self._save_trace(ex, status, result, error, tripwire)
        except Exception:  # the run's outcome stands without its trace
            logging.getLogger("procflow").warning(
                "the trace of run %s could not be stored", self.run_id, exc_info=True)
        try:
            await ex.flush(status, result=result, error=error, suspended=paths,
                           tripwire=tripwire)
        except Exception as exc:  # the storage failed or refused a value: a failed run
            if not isinstance(error, StorageError):
                error = exc
            status, result, suspended, paths, tripwire = "failed", None, [], [], None
            await _write_failure(ex, error)
            self.status = status
            self._suspended = suspended
        self._result = WorkflowResult(status, result, dict(self._records), error, self._state,
                                      paths, tripwire, usage, self.run_id)

        if ex.send is not None:
            await ex.event("run-finish", None, {"result": self._result})
        return self._result

    def __repr__(self) -> str:
        return f"Run(workflow={self.workflow.id!r}, run_id={self.run_id!r}, status={self.status!r})"


async def _write_failure(ex: Execution, error: BaseException) -> None:
    """Best effort: store the run as failed (without its state if that was refused)."""
    states: tuple[dict[str, Any] | None, ...] = (None, {})
    for state in states:
        try:
            with anyio.CancelScope(shield=True):
                await ex.flush("failed", error=error, state=state)
            return
        except Exception:
            continue
    logging.getLogger("procflow").warning(
        "run %s failed and its status could not be stored", ex.run_id, exc_info=True)


def _call_trace_hooks(record: TraceRecord) -> None:
    for hook in list(finished_trace_hooks):
        try:
            hook(record)
        except Exception:  # an exporter's failure must not fail the run
            logging.getLogger("procflow").warning(
                "trace hook %r failed for run %s", hook, record.run_id, exc_info=True)


async def _outcome(ex: Execution) -> _Outcome:
    wf = ex.wf
    try:
        out = await run_plan(ex, wf, ex.input, ex.top)
        if wf.output is not None:
            out = wf.output.check(out, what="output", workflow_id=wf.id, step_id=None,
                                  run_id=ex.run_id)
        return _Outcome("success", out)
    except Suspended as sus:
        return _Outcome("suspended", suspended=sus.paths)
    except Parked:  # distributed jobs run elsewhere; the run continues when they are done
        return _Outcome("running")
    except Failed as failed:
        return _Outcome("failed", error=failed.error)
    except BailSignal as bail:
        try:
            out = bail.result
            if wf.output is not None:
                out = wf.output.check(out, what="bail result", workflow_id=wf.id,
                                      step_id=None, run_id=ex.run_id)
        except StepValidationError as exc:
            return _Outcome("failed", error=exc)
        return _Outcome("success", out)
    except TripWire as trip:
        return _Outcome("tripwire", error=trip, tripwire=Tripwire.from_dict(trip.to_dict()))
    except Exception as exc:  # an error outside any step: report it, never crash the caller
        return _Outcome("failed", error=exc)


def _as_context(value: Any) -> RequestContext:
    if value is None:
        return RequestContext()
    if isinstance(value, RequestContext):
        return value
    if isinstance(value, Mapping):
        return RequestContext(value)
    raise TypeError(f"request_context must be a RequestContext or a mapping, got "
                    f"{type(value).__name__}")


def _path_of(step: Any) -> str:
    if isinstance(step, str):
        return step
    if isinstance(step, Sequence):
        return ".".join(str(s) for s in step)
    step_id = getattr(step, "id", None)
    if isinstance(step_id, str):
        return step_id
    raise TypeError(f"expected a step, a step id or a path, got {step!r}")


def _find_unit(wf: PlanUnit, path: str) -> StepUnit | PlanUnit | None:
    """The step or nested workflow at a dotted path, or ``None``."""
    current: StepUnit | PlanUnit | None = wf
    for segment in path.split("."):
        if current is None or not current.is_workflow:
            return None
        current = current.get_step(segment.split("[", 1)[0])
    return current


async def _earlier_spans(store: Storage, run_id: str) -> list[SpanEntry]:
    """The spans of a run's stored trace; a damaged trace reads as missing (the run's
    snapshot is what loading and resuming need)."""
    try:
        trace = await store.load_trace(run_id)
        if trace is None:
            return []
        return [_span_from_row(row) for row in trace.spans]
    except (SnapshotCorruptedError, KeyError, TypeError, ValueError):
        logging.getLogger("procflow").warning(
            "the stored trace of run %s is corrupted; the run is loaded without it", run_id,
            exc_info=True)
        return []


def _span_from_row(row: Mapping[str, Any]) -> Span:
    """A span of an earlier execution, from its stored row."""
    return Span(str(row["span_id"]), row.get("parent_id"), str(row["name"]), row["kind"],
                row.get("path"), float(row["start"]), row.get("end"), row["status"],
                row.get("input"), row.get("output"), row.get("error"),
                dict(row.get("attributes") or {}))
