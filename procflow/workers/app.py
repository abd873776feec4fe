"""``WorkerApp``: what one Dramatiq worker process runs.

It declares procflow's two actors on a broker and answers them: it finds the workflow
by id among its targets (an agent's loop workflow by the agent's), loads the run from
``RedisStorage`` and executes it under the run's lease. A step is stored as started
before it runs, so a run continued after a lost worker shows "attempt 2 after worker
loss" on that step. A run whose lease a live worker holds (a duplicate delivery) is sent
again a little later instead of blocking a thread.
"""

from __future__ import annotations

import asyncio  # noqa: TID251 - the job heartbeat's timer (Dramatiq's AsyncIO loop)
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.to_thread

from procflow._backends.deadline import shielded
from procflow._backends.redis import OPERATION_TIMEOUT, RedisConnection
from procflow._extras import needs
from procflow.agent import Agent
from procflow.errors import RunNotFoundError, RunStateError
from procflow.runtime.distributed import Job
from procflow.runtime.executors import SETTLED
from procflow.runtime.leases import Heartbeat, owner_is_dead, parked_owner
from procflow.storage.redis import JobClaim, RedisStorage
from procflow.workers.broker import (
    JOB_ACTOR,
    RUN_ACTOR,
    cancel_key,
    enqueue,
    job_message,
    make_broker,
    run_message,
    settled_channel,
)
from procflow.workers.channels import CancelListener, glob_escape
from procflow.workers.settings import WorkerSettings
from procflow.workflows.workflow import Workflow

with needs("dramatiq", feature="procflow.workers"):
    import dramatiq

if TYPE_CHECKING:
    from procflow.records import StepResult
    from procflow.runtime.results import WorkflowResult
    from procflow.runtime.run import Run

__all__ = ["WorkerApp"]

_log = logging.getLogger("procflow.workers")
_BUSY_DELAY: Final = 0.25
"""Seconds before a run held by a live worker is tried again."""


class WorkerApp:
    """Procflow's actors on a Dramatiq broker, able to run the given targets.

    Args:
        targets: Workflows and agents the worker runs (found by workflow id; an agent
            by its loop workflow's id, its model, tools and processors by the agent).
        settings: Redis, queue, recovery and limits.

    Raises:
        ValueError: Two targets share a workflow id.
    """

    def __init__(self, targets: Iterable[Workflow | Agent], settings: WorkerSettings) -> None:
        self.settings = settings
        self.targets = list(targets)
        """Held here: an agent's loop refers to its agent weakly (an agent loaded from a
        file that was imported again for another target has nothing else holding it)."""
        self.workflows: dict[str, Workflow] = {}
        for target in self.targets:
            wf = target.workflow if isinstance(target, Agent) else target
            if wf.id in self.workflows and self.workflows[wf.id] is not wf:
                raise ValueError(f"two worker targets have the workflow id '{wf.id}'")
            self.workflows[wf.id] = wf
        self.broker = make_broker(settings)
        limit = round(settings.time_limit * 1000)
        for name, fn in ((RUN_ACTOR, self.run), (JOB_ACTOR, self.job)):
            declare = dramatiq.actor(broker=self.broker, actor_name=name,
                                     queue_name=settings.queue,
                                     max_retries=settings.max_retries, time_limit=limit)
            declare(fn)
        self._storage: RedisStorage | None = None
        self._redis: RedisConnection | None = None
        self._listener: CancelListener | None = None
        self._parked: dict[str, tuple[str, int]] = {}
        """Runs executing here that sent a fan-out's jobs: its join and size."""

    # -- per event loop resources (Dramatiq runs one loop thread per process) ---------

    @property
    def storage(self) -> RedisStorage:
        """The run storage (made on first use, in the worker's event loop)."""
        if self._storage is None:
            self._storage = RedisStorage(self.settings.redis_url, prefix=self.settings.prefix)
        return self._storage

    @property
    def redis(self) -> RedisConnection:
        """A client for channels, cancel flags and joins."""
        if self._redis is None:
            self._redis = RedisConnection(self.settings.redis_url, name="procflow worker",
                                          timeout=OPERATION_TIMEOUT)
        return self._redis

    def _workflow(self, workflow_id: str) -> Workflow:
        wf = self.workflows.get(workflow_id)
        if wf is None:
            raise LookupError(f"this worker does not run workflow '{workflow_id}'; it runs "
                              f"{sorted(self.workflows)} (start it with that target)")
        return wf

    def _run(self, workflow_id: str, run_id: str) -> Run:
        """The run as an unloaded object: ``run_submitted``/``run_job`` load it once its
        lease is taken."""
        run = self._workflow(workflow_id).create_run(run_id, storage=self.storage)
        run.lease_ttl = self.settings.lease_ttl
        return run

    # -- actors -------------------------------------------------------------------

    async def run(self, workflow_id: str, run_id: str, step: str | None = None,
                  resume_data: Any = None) -> None:
        """Execute a stored run (start, continue after a lost worker or a fan-out, or
        resume ``step`` with ``resume_data``). A run parked at a fan-out whose jobs all
        finished before it was parked (their last one could not send it on: the run's
        lease was still held here) continues here at once."""
        run = self._run(workflow_id, run_id)
        key = cancel_key(self.settings.prefix, run_id)
        try:
            with (await self._cancels()).watch(key, lambda: run.request_cancel()):
                result = await self._execute(run, key, step, resume_data)
                while await self._joined_meanwhile(run, result):
                    run = self._run(workflow_id, run_id)
                    try:
                        result = await self._execute(run, key, None, None)
                    except RunStateError:  # another worker continues it (the last job's
                        return  # message came after the lease was handed over)
        except RunNotFoundError:
            _dropped(workflow_id, run_id)
            return
        except RunStateError:
            if run.status in SETTLED:
                return
            # Another worker holds the lease: a duplicate delivery, or a continuation
            # that came before the parked execution let go. Try again shortly.
            resume = None if step is None else (step, resume_data)
            await enqueue(self.broker, [run_message(self.settings, workflow_id, run_id,
                                                    resume)], delay=_BUSY_DELAY)
            return
        finally:
            self._parked.pop(run_id, None)
        if result.status in SETTLED:
            with self.redis.translate("publishing a settled run"):
                await self.redis.client.publish(
                    settled_channel(self.settings.prefix, run_id), result.status)

    async def _execute(self, run: Run, key: str, step: str | None,
                       resume_data: Any) -> WorkflowResult:
        """``run_submitted`` on a worker: steps marked started, fan-outs sent to the pool,
        a cancel request made before it started honoured."""
        run.mark_steps = True
        run.distributor = self
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._cancel_if_flagged, run, key)
                result = await run.run_submitted(step, resume_data)
        except BaseExceptionGroup as group:  # the run's own error (RunStateError...) as is
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        return result

    async def _joined_meanwhile(self, run: Run, result: WorkflowResult) -> bool:
        """Whether ``run`` parked at a fan-out whose jobs are all finished already."""
        parked = self._parked.pop(run.run_id, None)
        if result.status != "running" or parked is None:
            return False
        join, total = parked
        return await self.storage.finished_jobs(run.workflow.id, run.run_id, join) >= total

    async def job(self, workflow_id: str, run_id: str, join: str, total: int,
                  unit_path: str, path: str, data: Any, reads: Sequence[str] = ()) -> None:
        """Run one job of a distributed fan-out; the last one continues the run.

        One script claims the job (its lease, the parked run's renewed, and only what
        the job reads: not the whole run), one stores its result with the join and
        releases it. A job stored finished is not run again (its join is made again: a
        worker lost between the two may not have sent the run on).
        """
        run = self._run(workflow_id, run_id)
        job = Job(unit_path, path, data, tuple(reads))
        storage, owner, ttl = self.storage, run.lease_owner, self.settings.lease_ttl
        parked = parked_owner(join)
        inner = run.job_unit(job).is_workflow
        claim = await storage.claim_job(workflow_id, run_id, path, owner=owner, ttl=ttl,
                                        parked_owner=parked, reads=job.reads, inner=inner)
        if claim is not None and claim.holder is not None and owner_is_dead(claim.holder):
            claim = await storage.claim_job(workflow_id, run_id, path, owner=owner, ttl=ttl,
                                            parked_owner=parked, reads=job.reads,
                                            inner=inner, steal_from=claim.holder)
        if claim is None:
            _dropped(workflow_id, run_id)
            return
        if claim.holder is not None:  # a duplicate of a job a live worker runs
            await enqueue(self.broker, [job_message(self.settings, workflow_id, run_id, join,
                                                    total, unit_path, path, data, reads)],
                          delay=_BUSY_DELAY)
            return
        if claim.done:
            finished = await storage.finish_job(workflow_id, run_id, path, join=join,
                                                owner=None, steps={})
        else:
            finished = await self._run_claimed(run, job, claim, join)
        if finished < 0:
            _log.warning("job %s of run %s lost its lease to another worker; that worker "
                         "finishes it", path, run_id)
            return
        if finished >= total:
            await enqueue(self.broker, [run_message(self.settings, workflow_id, run_id)])

    async def _run_claimed(self, run: Run, job: Job, claim: JobClaim, join: str) -> int:
        """Run a claimed job and store its result with the join (its lease and the parked
        run's renewed meanwhile); released unfinished if it stops on an error."""
        storage, wf_id, run_id = self.storage, run.workflow.id, run.run_id
        owner, ttl, parked = run.lease_owner, self.settings.lease_ttl, parked_owner(join)

        async def renew() -> None:
            while True:
                try:
                    if not await storage.renew_job(wf_id, run_id, job.path, owner=owner,
                                                   ttl=ttl, parked_owner=parked):
                        return  # taken over: finish_job will store nothing
                except Exception:  # a hiccup: try again while the lease still runs
                    _log.warning("could not renew the lease of job %s of run %s", job.path,
                                 run_id, exc_info=True)
                await anyio.sleep(ttl / 3)

        async def save(rows: Mapping[str, StepResult]) -> None:
            await storage.save_steps(wf_id, run_id, rows)

        beat = Heartbeat(asyncio.get_running_loop(), ttl / 3, renew)
        try:
            assert claim.snapshot is not None and claim.load_input is not None  # claimed
            rows = await run.run_claimed_job(job, claim.snapshot, claim.steps, save,
                                             claim.load_input)
            return await storage.finish_job(wf_id, run_id, job.path, join=join,
                                            owner=owner, steps=rows)
        except BaseException:
            with shielded(f"releasing the lease of job {job.path} of run {run_id!r}"):
                await beat.stop()  # first: a renewal after the release would take it back
                try:
                    await storage.release_job(wf_id, run_id, job.path, owner=owner)
                except Exception:  # the lease expires anyway
                    _log.warning("could not release the lease of job %s of run %s",
                                 job.path, run_id, exc_info=True)
            raise
        finally:
            await beat.stop()

    # -- Distributor ------------------------------------------------------------------

    async def dispatch(self, workflow_id: str, run_id: str, join: str, jobs: Sequence[Job],
                       total: int) -> None:
        """Send a parked run's unfinished jobs to the pool."""
        self._parked[run_id] = (join, total)
        await enqueue(self.broker, [
            job_message(self.settings, workflow_id, run_id, join, total, job.unit_path,
                        job.path, job.data, job.reads) for job in jobs])

    # -- cancellation -----------------------------------------------------------------

    async def _cancels(self) -> CancelListener:
        """This process's listener for cancel requests (started on first use)."""
        if self._listener is None:
            pattern = f"{glob_escape(self.settings.prefix)}:cancel:*"
            listener = await anyio.to_thread.run_sync(CancelListener, self.settings.redis_url,
                                                      pattern)
            if self._listener is None:
                self._listener = listener
            else:  # another run started one meanwhile
                await anyio.to_thread.run_sync(listener.close)
        return self._listener

    async def _cancel_if_flagged(self, run: Run, key: str) -> None:
        """Cancel ``run`` if a request came before it was watched."""
        with self.redis.translate("reading a run's cancel flag"):
            if await self.redis.client.exists(key):
                run.request_cancel()

def _dropped(workflow_id: str, run_id: str) -> None:
    _log.warning("run %s of workflow %s is not stored; message dropped", run_id, workflow_id)
