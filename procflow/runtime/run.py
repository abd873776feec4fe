"""``Run``: one execution history of a workflow: start, stream, resume, cancel, restart."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from procflow._backends.deadline import shielded
from procflow.context import RequestContext
from procflow.errors import RunNotFoundError, RunStateError
from procflow.records import StepResult
from procflow.runtime._run_exec import _CANCELED
from procflow.runtime._run_remote import _Remote
from procflow.runtime._run_state import _NULL_STORAGE, _as_context, _earlier_spans, _path_of
from procflow.runtime.defaults import resolve_storage
from procflow.runtime.execution import OutputT, PlanUnit
from procflow.runtime.executors import Executor, default_executor
from procflow.runtime.leases import owner_is_dead
from procflow.runtime.results import WorkflowResult
from procflow.runtime.stream import RunStream
from procflow.runtime.sync import call_sync

if TYPE_CHECKING:
    from procflow.storage.base import Storage

__all__ = ["Run"]

_log = logging.getLogger("procflow.runtime")


class Run(_Remote[OutputT]):
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
            with shielded(f"releasing the lease of run {self.run_id!r}"):
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
        records = self._records
        kept = {p: r for p, r in records.items()
                if r.status == "success" and r.ended_at is not None and r.ended_at < t0
                and p != path and not p.startswith(inside)
                and not _superseded(records, p, r)}
        new: Run[OutputT] = Run(self.workflow, run_id=run_id, storage=self.storage,
                  durability=self.durability, tracing=self.tracing)
        new._input = self._input
        new._state = dict(self._state)
        new._context = self._context.copy()
        new._records = kept
        new._replay_of = (self.run_id, path)
        await new._check_new_id("replay into")
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

    async def refresh(self) -> None:
        """Reload the run's status, results and state from storage.

        Raises:
            RunStateError: The run is executing in this process.
            RunNotFoundError: The run is not stored.
        """
        self._check_idle("refresh")
        await self._reload()

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
