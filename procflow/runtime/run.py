"""``Run``: one execution history of a workflow: start, stream, resume, cancel, restart,
and the entry points executors and workers call.

A run is a binding — its workflow, id, storage, durability and ``RunMode`` — and a few
collaborators, each in its own module: its data between executions (``RunData``), its
trace (``RunTrace``), its lease (``LeaseKeeper``), the executor it was submitted to, and
the execution under way (``RunExecution``, which drives the step runner).
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic

from procflow.context import RequestContext
from procflow.errors import RunStateError
from procflow.messages import new_secret_id
from procflow.records import RunSnapshot, RunStatus, StepResult
from procflow.runtime import run_control as control
from procflow.runtime.defaults import resolve_storage
from procflow.runtime.distributed import Distributor, Job
from procflow.runtime.execution import Durability, OutputT, PlanUnit, Unit
from procflow.runtime.executors import Executor, default_executor
from procflow.runtime.leases import DEFAULT_LEASE_TTL, owner_is_dead
from procflow.runtime.results import WorkflowResult
from procflow.runtime.run_data import NULL_STORAGE, RunData, as_context
from procflow.runtime.run_execution import EPHEMERAL, PRIVATE, SHARED, RunExecution, RunMode
from procflow.runtime.run_lease import LeaseKeeper
from procflow.runtime.run_trace import RunTrace, earlier_spans
from procflow.runtime.stream import RunStream
from procflow.runtime.sync import call_sync
from procflow.runtime.tracing import ParentSpan, Span, Tracer
from procflow.runtime.watch import RunChange, watch_run

if TYPE_CHECKING:
    from procflow.storage.base import Storage

__all__ = ["Run", "RunMode"]


class Run(Generic[OutputT]):
    """A run of a committed workflow. Make one with ``workflow.create_run()``;
    ``Run[Out]`` for a workflow whose output schema is ``Out``.

    Attributes:
        run_id: The run's id (unpredictable: it is the handle ``get_run`` and
            ``resume`` take).
        workflow: The workflow it runs.
        storage: Where its snapshots go.
        durability: "sync" (a snapshot at every step boundary) or "exit".
        status: "pending" until started, then as the last execution left it.
        mode: Who holds the run (``RunMode``); a caller that alone holds this run
            object while it executes sets ``RunMode.PRIVATE``.
        lease_ttl: Seconds the run's lease lasts unless renewed (see ``restart``).
        lease_owner: The id this run object takes its lease under.
        distributor: Where distributed fan-outs send their jobs (set by workers).
        mark_steps: Store each step as started before it runs (set by workers).
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
        self._id_unchecked = run_id is not None
        """The caller chose the id and nothing has looked yet whether a run is stored
        under it (starting must not replace one; a random id cannot collide)."""
        if ephemeral:
            if storage is not None:
                raise ValueError(
                    f"a run of workflow '{workflow.id}' cannot be ephemeral and have a "
                    "storage: an ephemeral run keeps nothing; drop storage= or ephemeral=True")
            self.storage: Storage = NULL_STORAGE
            self.durability: Durability = "exit"
            self.mode = EPHEMERAL
        else:
            self.storage = resolve_storage(storage, workflow)
            self.durability = durability or workflow.durability
            self.mode = SHARED
        self._data = RunData()
        self._trace = RunTrace(tracing, parent_span)
        self._lease: LeaseKeeper | None = None
        self._executor: Executor | None = None
        self._running: RunExecution | None = None
        self._cancel_requested = False
        self.distributor: Distributor | None = None
        self.mark_steps = False

    @classmethod
    async def load(cls, workflow: PlanUnit, run_id: str, *, storage: Storage | None = None,
                   parent_span: ParentSpan | None = None) -> Run[Any]:
        """Rebuild a run from storage (``workflow.get_run``)."""
        store = resolve_storage(storage, workflow)
        loaded = await control.load_stored(store, workflow, run_id)
        run: Run[Any] = cls(workflow, run_id=run_id, storage=store, parent_span=parent_span)
        run._data.restore(workflow, run_id, *loaded)
        if parent_span is None:  # else its spans are in the other run's trace
            run._trace.spans = await earlier_spans(store, run_id)
        return run

    # -- public API ---------------------------------------------------------------

    async def start(self, input_data: Any = None, *,
                    request_context: RequestContext | Mapping[str, Any] | None = None,
                    initial_state: Mapping[str, Any] | None = None) -> WorkflowResult[OutputT]:
        """Run the workflow from the beginning and return its result.

        A failure does not raise: the result has status "failed" and the error (for
        invalid input, a ``StepValidationError`` naming the field).

        Raises:
            RunStateError: The run was already started, or a run of the workflow is
                already stored under the id given to ``create_run`` (it is left as is).
        """
        return await control.start(self, None, input_data, request_context, initial_state)

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
        return call_sync(lambda: control.start(self, None, input_data, request_context,
                                               initial_state),
                         method="Run.start_sync()", instead="await run.start(...)")

    def stream(self, input_data: Any = None, *,
               request_context: RequestContext | Mapping[str, Any] | None = None,
               initial_state: Mapping[str, Any] | None = None) -> RunStream:
        """Start the run and stream its ``WorkflowEvent``s.

        Use ``async with run.stream(...) as events: async for event in events: ...``
        (or iterate it directly to the end). ``events.result`` is the result afterwards.
        """
        return RunStream(lambda send: control.start(self, send, input_data, request_context,
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
        return await control.resume(self, None, step, resume_data, request_context)

    def resume_stream(self, step: Any = None, resume_data: Any = None, *,
                      request_context: RequestContext | Mapping[str, Any] | None = None,
                      ) -> RunStream:
        """Like ``resume``, streaming the run's events (see ``stream``)."""
        return RunStream(lambda send: control.resume(self, send, step, resume_data,
                                                     request_context))

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
        return await control.restart(self, request_context)

    async def stalled(self) -> bool:
        """Whether the stored run is "running" with no live lease (or one held by a
        process of this host that is gone): the process that ran it stopped, and
        ``restart()`` continues it."""
        if self._running is not None or self.storage is NULL_STORAGE:
            return False
        loaded = await self.storage.load_snapshot(self.workflow.id, self.run_id)
        if loaded is None or loaded[0].status != "running":
            return False
        lease = await self.storage.get_lease(self.workflow.id, self.run_id)
        return lease is None or owner_is_dead(lease.owner)

    def watch(self, *, interval: float = 0.2) -> AsyncIterator[RunChange]:
        """Follow the run from what its storage holds, to its end: each step whose status
        changed and each change of the run's status, as ``RunChange`` values (``async for
        change in run.watch()``). Works on a run started elsewhere (another process, a
        worker: ``await wf.get_run(run_id)``); the iteration ends after the run's
        ending status ("success", "failed", "suspended", ... or "stalled" when no live
        process holds it). ``await run.refresh()`` then loads its result.

        Args:
            interval: Seconds between reads of the storage (> 0).

        Raises:
            RunStateError: The run is ephemeral (it keeps nothing to watch).
            ValueError: ``interval`` is not a positive number.
            RunNotFoundError: The run is not stored (raised when iterated).
        """
        if self.storage is NULL_STORAGE:
            raise RunStateError(f"run '{self.run_id}' is ephemeral: it stores nothing to "
                                "watch", workflow_id=self.workflow.id, run_id=self.run_id)
        return watch_run(self.storage, self.workflow.id, self.run_id, interval=interval)

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
        return await control.replay(self, step, run_id)

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
        if self._data.status != "pending" or self._running is not None:
            raise RunStateError(
                f"run '{self.run_id}' cannot be submitted: it is not new (status "
                f"{self._data.status!r})", workflow_id=self.workflow.id, run_id=self.run_id)
        chosen = self._executor = executor if executor is not None else default_executor()
        context = None if request_context is None else as_context(request_context)
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
        path, resume_data = control.resume_request(self, "resume_submit", step, resume_data)
        chosen = self._executor = executor if executor is not None else default_executor()
        return await chosen.resume(self, path, resume_data)

    async def refresh(self) -> None:
        """Reload the run's status, results and state from storage.

        Raises:
            RunStateError: The run is executing in this process.
            RunNotFoundError: The run is not stored.
        """
        self._check_idle("refresh")
        await control.reload(self)

    async def cancel(self) -> None:
        """Cancel the run: a running execution stops (no task is left behind) and the
        run ends "canceled"; a pending or suspended run is marked "canceled". A run
        submitted to workers is cancelled where it runs, at its next step boundary (a
        running step's cancel scope is cancelled)."""
        await control.cancel(self)

    # -- what executors and workers call -----------------------------------------

    async def prepare(self, input_data: Any = None, *,
                      request_context: RequestContext | Mapping[str, Any] | None = None,
                      initial_state: Mapping[str, Any] | None = None) -> None:
        """Validate the input and store the run as "pending", for another process to
        execute (``run_submitted``); what remote executors do on ``submit``.

        Raises:
            StepValidationError: The input does not match the workflow's input schema.
        """
        await control.prepare(self, input_data, request_context, initial_state)

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
        return await control.run_submitted(self, step, resume_data)

    async def run_job(self, job: Job) -> StepResult:
        """Run one job of this run's distributed fan-out (under the job's own lease) and
        store its result; a job already stored is not run again. The run is loaded after
        the lease is taken (an unloaded run object will do).

        Raises:
            RunStateError: Another live process holds the job's lease.
            RunNotFoundError: The run is not stored.
            LookupError: The job's step is not in the workflow.
        """
        return await control.run_job(self, job)

    async def run_claimed_job(
            self, job: Job, snapshot: RunSnapshot, steps: dict[str, StepResult],
            save_steps: Callable[[Mapping[str, StepResult]], Awaitable[None]],
            load_input: Callable[[], Any],
    ) -> dict[str, StepResult]:
        """Run one job of this run's distributed fan-out that the caller claimed (it holds
        the job's lease and loaded ``snapshot`` and the ``steps`` the job needs, not the
        whole run). The run's header is not written; the job's inner rows (a nested
        workflow's) go to ``save_steps`` as they finish.

        Args:
            load_input: Decodes the run's input, left out of ``snapshot`` (called, and
                the input checked, only if a step asks for it).

        Returns:
            The rows left to store, the job's own result among them (the caller writes
            them with the join).

        Raises:
            LookupError: The job's step is not in the workflow.
        """
        return await control.run_claimed_job(self, job, snapshot, steps, save_steps,
                                             load_input)

    def job_unit(self, job: Job) -> Unit:
        """The step (or nested workflow) a job of this run runs.

        Raises:
            LookupError: The job's step is not in the workflow.
        """
        return control.job_unit(self, job)

    def request_cancel(self) -> None:
        """Cancel the run's execution in this process, now or as soon as it starts
        (what a worker does when another process cancels the run)."""
        self._cancel_requested = True
        if self._running is not None:
            self._running.cancel()

    # -- state ----------------------------------------------------------------------

    @property
    def status(self) -> RunStatus:
        """"pending" until started, then as the last execution left it."""
        return self._data.status

    @status.setter
    def status(self, value: RunStatus) -> None:
        self._data.status = value

    @property
    def last_result(self) -> WorkflowResult[OutputT] | None:
        """The result of this object's last execution (or of the stored run it was loaded
        from), if any; ``await run.result()`` waits for a submitted run instead."""
        return self._data.result

    @property
    def lease_owner(self) -> str:
        """The id this run object takes its lease under (made when first needed)."""
        return self._lease_keeper().owner

    @property
    def tracing(self) -> bool:
        """Whether the run records a trace of its own."""
        return self._trace.enabled

    @tracing.setter
    def tracing(self, value: bool) -> None:
        self._trace.enabled = value

    @property
    def trace_parent(self) -> tuple[Tracer, Span] | None:
        """Where this run's spans go inside another run's trace (instead of its own)."""
        return self._trace.parent

    @trace_parent.setter
    def trace_parent(self, value: tuple[Tracer, Span] | None) -> None:
        self._trace.parent = value

    @property
    def private(self) -> bool:
        """Deprecated: ``run.mode is RunMode.PRIVATE``."""
        _deprecated("Run.private", "run.mode is RunMode.PRIVATE")
        return self.mode is PRIVATE

    @private.setter
    def private(self, value: bool) -> None:
        _deprecated("Run.private = ...", "run.mode = RunMode.PRIVATE")
        if value:
            self.mode = PRIVATE
        elif self.mode is PRIVATE:
            self.mode = SHARED

    def _lease_keeper(self) -> LeaseKeeper:
        """The run's lease keeper (made when first needed: not every run takes a lease)."""
        keeper = self._lease
        if keeper is None:
            keeper = self._lease = LeaseKeeper(self.workflow.id, self.run_id)
        return keeper

    async def _drop_lease(self) -> None:
        if self._lease is not None:
            await self._lease.drop()

    def _idle(self) -> None:
        """The execution under way ended (``RunExecution.run`` calls this)."""
        self._running = None

    def _check_idle(self, what: str) -> None:
        if self._running is not None:
            raise RunStateError(
                f"run '{self.run_id}' is running; {what}() must wait until it ends",
                workflow_id=self.workflow.id, run_id=self.run_id)

    async def _check_new_id(self, what: str) -> None:
        """See ``run_control.check_new_id`` (``LocalExecutor`` checks before it starts)."""
        await control.check_new_id(self, what)

    def __repr__(self) -> str:
        return (f"Run(workflow={self.workflow.id!r}, run_id={self.run_id!r}, "
                f"status={self._data.status!r})")


def _deprecated(name: str, instead: str) -> None:
    warnings.warn(f"{name} is deprecated; use {instead} (procflow.runtime.RunMode)",
                  DeprecationWarning, stacklevel=3)
