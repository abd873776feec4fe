"""``_Remote``: what executors and workers call on a run that another process
prepared or submitted: store it, run it when delivered, run one job of its fan-out,
cancel it."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from procflow._backends.deadline import shielded
from procflow.context import RequestContext
from procflow.errors import SnapshotCorruptedError
from procflow.records import RunSnapshot, StepResult
from procflow.runtime._run_exec import _Executing
from procflow.runtime._run_state import _as_context, _earlier_spans, _find_unit
from procflow.runtime.distributed import Job, JobExecution, run_claimed_job, run_job
from procflow.runtime.execution import Deferred, OutputT, Unit
from procflow.runtime.leases import RunLease
from procflow.runtime.results import WorkflowResult

__all__ = ["_Remote"]

_log = logging.getLogger("procflow.runtime")


class _Remote(_Executing[OutputT]):
    """A run's entry points for executors and workers."""

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
        await self._check_new_id("submit")
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
            await self._reload()
            if self.status == "running" and not self._spans:  # continued: extend its trace
                self._spans = await _earlier_spans(self.storage, self.run_id)
        except BaseException:
            with shielded(f"releasing the lease of run {self.run_id!r}"):
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
        unit = self.job_unit(job)
        lease = RunLease(self.storage, self.workflow.id, f"{self.run_id}#{job.path}",
                         owner=self.lease_owner, ttl=self.lease_ttl)
        await lease.take()
        try:
            await self._reload()
            ex = self._execution(None, frozenset(), None)
            return await run_job(ex, unit, job)
        finally:
            with shielded(f"releasing the lease of run {self.run_id!r}"):
                await lease.drop()

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
        unit = self.job_unit(job)
        # What ``_restore`` takes of a stored run, but the input: a job runs no other step.
        self._records = steps
        self._state = dict(snapshot.state)
        self._context = RequestContext.restored(snapshot.request_context)
        self._created_at = snapshot.created_at
        self._input = Deferred(lambda: self._checked_input(load_input()))
        ex = JobExecution(
            job_path=job.path, save_steps=save_steps, wf=self.workflow, run_id=self.run_id,
            input=self._input, records=self._records, state=self._state,
            request_context=self._context, storage=self.storage, sync=True, send=None,
            created_at=self._created_at)
        return await run_claimed_job(ex, unit, job)

    def _checked_input(self, data: Any) -> Any:
        """A stored input as the workflow's input schema makes it (see ``_restore``)."""
        schema = self.workflow.input
        if schema is None or data is None:
            return data
        try:
            return schema.validate(data)
        except Exception as exc:
            raise SnapshotCorruptedError(
                f"stored input of run '{self.run_id}' (workflow '{self.workflow.id}') no "
                f"longer matches the workflow's input schema: {exc}",
                workflow_id=self.workflow.id, run_id=self.run_id) from exc

    def job_unit(self, job: Job) -> Unit:
        """The step (or nested workflow) a job of this run runs.

        Raises:
            LookupError: The job's step is not in the workflow.
        """
        unit = _find_unit(self.workflow, job.unit_path)
        if unit is None:
            raise LookupError(f"workflow '{self.workflow.id}' has no step at "
                              f"'{job.unit_path}' (job {job.path} of run '{self.run_id}')")
        return unit

    def request_cancel(self) -> None:
        """Cancel the run's execution in this process, now or as soon as it starts
        (what a worker does when another process cancels the run)."""
        self._cancel_requested = True
        if self._cancel_scope is not None:
            self._cancel_scope.cancel()
