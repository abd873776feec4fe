"""What each of ``Run``'s entry points does before and around an execution: the state
checks of start, resume, restart, replay and cancel, the lease taken first, and what
executors and workers call on a run another process prepared or submitted.

``Run`` (``runtime/run.py``) is the public face; each of its methods calls one function
here with itself. The execution proper is ``RunExecution`` (``runtime/run_execution.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any

from procflow._backends.deadline import shielded
from procflow.context import RequestContext
from procflow.errors import (
    RunNotFoundError,
    RunNotSuspendedError,
    RunStateError,
    StepValidationError,
)
from procflow.records import RunSnapshot, StepResult
from procflow.runtime._storable import refuse_unstorable
from procflow.runtime.distributed import Job, JobExecution
from procflow.runtime.distributed import run_claimed_job as _run_claimed_job
from procflow.runtime.distributed import run_job as _run_job
from procflow.runtime.execution import Deferred, Execution, OutputT, PlanUnit, Unit
from procflow.runtime.leases import RunLease
from procflow.runtime.results import WorkflowResult
from procflow.runtime.run_data import NULL_STORAGE, as_context, checked_input
from procflow.runtime.run_execution import (
    CANCELED,
    EPHEMERAL,
    PRIVATE,
    SHARED,
    Outcome,
    RunExecution,
)
from procflow.runtime.run_paths import find_unit, path_of, replay_kept, resume_target
from procflow.runtime.run_trace import earlier_spans
from procflow.storage.values import UnstorableValueError, encode_value

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectSendStream

    from procflow.runtime.events import WorkflowEvent
    from procflow.runtime.run import Run
    from procflow.storage.base import Storage

__all__ = ["begin", "cancel", "check_new_id", "execute", "execution", "job_unit", "load_stored",
           "prepare", "reload", "replay", "restart", "resume", "resume_request",
           "run_claimed_job", "run_job", "run_submitted", "start", "take_lease"]

_log = logging.getLogger("procflow.runtime")


# -- executing ----------------------------------------------------------------------

def execution(run: Run[Any], send: Any, targets: frozenset[str], resume_data: Any,
              ) -> Execution:
    """The step runner's state for one execution of ``run``."""
    data = run._data
    ex = Execution(
        wf=run.workflow, run_id=run.run_id, input=data.input, records=data.records,
        state=data.state, request_context=data.context, storage=run.storage,
        sync=run.durability == "sync", send=send, created_at=data.created_at,
        resume_targets=targets, resume_data=resume_data)
    if run.distributor is not None:
        ex.distributor = run.distributor
    if run.mark_steps:
        ex.mark_steps()
    return ex


def begin(run: Run[Any], send: Any, targets: frozenset[str], resume_data: Any,
          ) -> RunExecution:
    """An execution of ``run`` with its run span open."""
    ex = execution(run, send, targets, resume_data)
    run._trace.open(ex, run._data.input, run._data.records)
    return RunExecution(ex, run._data, run._trace, run._cancel_requested)


def execute(run: Run[Any], send: MemoryObjectSendStream[WorkflowEvent] | None,
            targets: frozenset[str], resume_data: Any,
            ) -> Coroutine[Any, Any, WorkflowResult[Any]]:
    """Execute ``run`` (a shared run under its lease and a cancel scope) and store the
    outcome; ``await execute(...)`` awaits the execution's own coroutine."""
    running = begin(run, send, targets, resume_data)
    run._running = running
    run._data.status = "running"
    guarded = run.mode is SHARED
    return running.run(run._lease_keeper() if guarded else run._lease, guarded,
                       run.lease_ttl, run._idle)


async def take_lease(run: Run[Any], *, parked: bool = False) -> None:
    """Hold the run's lease (see ``Run.restart``); no-op if held, if nothing is stored or
    if the run is private. ``parked``: take over a parked fan-out's lease."""
    if run.mode is not PRIVATE:
        await run._lease_keeper().take(run.storage, ttl=run.lease_ttl, parked=parked)


# -- the user's entry points --------------------------------------------------------

async def start(run: Run[Any], send: Any, input_data: Any, request_context: Any,
                initial_state: Mapping[str, Any] | None) -> WorkflowResult[Any]:
    """``Run.start`` (and ``stream``): check the run is new and the input, then execute."""
    data = run._data
    if data.status != "pending" or run._running is not None:
        raise RunStateError(
            f"run '{run.run_id}' cannot start: it is not new (status {data.status!r}); use "
            "resume(), restart(), or create a new run", workflow_id=run.workflow.id,
            run_id=run.run_id)
    if initial_state is not None and not isinstance(initial_state, Mapping):
        raise TypeError(f"initial_state must be a mapping, got {type(initial_state).__name__}")
    if run._id_unchecked:  # a random id is never looked up: not on the hot path
        await check_new_id(run, "start")
    data.context = as_context(request_context)
    data.state = dict(initial_state or {})
    wf = run.workflow
    if wf.input is not None:
        try:
            input_data = wf.input.check(input_data, what="run input", workflow_id=wf.id,
                                        step_id=None, run_id=run.run_id)
        except StepValidationError as exc:
            data.input = input_data
            return await begin(run, send, frozenset(), None).finish(
                Outcome("failed", error=exc))
    if run.storage.persistent and not run.storage.keeps_objects:
        try:
            encode_value(input_data)
        except UnstorableValueError as exc:
            data.input = None
            failing = begin(run, send, frozenset(), None)
            return await failing.finish(Outcome("failed", error=failing.ex.unstorable(
                exc, "input", None)))
    data.input = input_data
    return await execute(run, send, frozenset(), None)


async def check_new_id(run: Run[Any], what: str) -> None:
    """A run given an id by its caller (``create_run(run_id=...)``) must not replace
    a run already stored under that id (a random id cannot collide: not looked up).

    Raises:
        RunStateError: A run of this workflow is stored under the id.
    """
    if not run._id_unchecked or run.mode is EPHEMERAL:
        return
    stored = await run.storage.load_snapshot(run.workflow.id, run.run_id)
    if stored is None:
        run._id_unchecked = False  # an executor's check serves the start after it
        return
    raise RunStateError(
        f"cannot {what} run '{run.run_id}' of workflow '{run.workflow.id}': a run with "
        f"that id is already stored (status {stored[0].status!r}); get_run() it to "
        "resume, restart or replay it, delete_run() it, or choose another run id",
        workflow_id=run.workflow.id, run_id=run.run_id)


async def resume(run: Run[Any], send: Any, step: Any, resume_data: Any,
                 request_context: Any) -> WorkflowResult[Any]:
    """``Run.resume``: claim the suspended run under its lease, then execute."""
    path, resume_data = resume_request(run, "resume", step, resume_data)
    await take_lease(run)
    if not await run.storage.claim_run(run.workflow.id, run.run_id,
                                       expected="suspended", new="running"):
        await run._drop_lease()
        raise RunStateError(
            f"run '{run.run_id}' is no longer suspended in storage; another process "
            "may have resumed it", workflow_id=run.workflow.id, run_id=run.run_id)
    if request_context is not None:
        run._data.context.update(as_context(request_context))
    _log_resuming(run, path)
    return await execute(run, send, frozenset({path}), resume_data)


def resume_request(run: Run[Any], what: str, step: Any, resume_data: Any,
                   ) -> tuple[str, Any]:
    """The suspended step's path and the checked resume data.

    Raises:
        RunNotSuspendedError: The run is not suspended.
    """
    run._check_idle(what)
    data, wf = run._data, run.workflow
    if data.status != "suspended":
        raise RunNotSuspendedError(
            f"run '{run.run_id}' of workflow '{wf.id}' is not suspended "
            f"(status {data.status!r}); only a suspended run can be resumed",
            workflow_id=wf.id, run_id=run.run_id)
    path = resume_target(data.suspended, step, wf.id, run.run_id)
    unit = find_unit(wf, path)
    if unit is not None and not unit.is_workflow and unit.resume_check is not None:
        resume_data = unit.resume_check.check(
            resume_data, what="resume data", workflow_id=wf.id, step_id=path,
            run_id=run.run_id)
    refuse_unstorable(resume_data, storage=run.storage, root="resume_data",
                      workflow_id=wf.id, run_id=run.run_id, step_id=path)
    return path, resume_data


async def restart(run: Run[Any], request_context: Any) -> WorkflowResult[Any]:
    """``Run.restart``: take the lease, reload the stored run, then execute."""
    run._check_idle("restart")
    data = run._data
    if data.status == "success" and data.result is not None:
        return data.result
    await take_lease(run)
    try:
        if run.storage is not NULL_STORAGE:
            loaded = await run.storage.load_snapshot(run.workflow.id, run.run_id)
            if loaded is not None:
                data.restore(run.workflow, run.run_id, *loaded)
        if data.status == "success" and data.result is not None:
            await run._drop_lease()
            return data.result
        _check_restartable(run)
    except BaseException:
        with shielded(f"releasing the lease of run {run.run_id!r}"):
            await run._drop_lease()
        raise
    if request_context is not None:
        data.context.update(as_context(request_context))
    _log.info("run %s (workflow %s): restarting from status %s", run.run_id,
              run.workflow.id, data.status,
              extra={"run_id": run.run_id, "workflow_id": run.workflow.id})
    return await execute(run, None, frozenset(), None)


def _check_restartable(run: Run[Any]) -> None:
    data = run._data
    if data.status == "suspended":
        raise RunStateError(
            f"run '{run.run_id}' is suspended at {data.suspended}; use resume() "
            "instead of restart()", workflow_id=run.workflow.id, run_id=run.run_id)
    if data.status == "pending" and not data.records:
        raise RunStateError(
            f"run '{run.run_id}' was never started; call start()",
            workflow_id=run.workflow.id, run_id=run.run_id)


async def replay(run: Run[OutputT], step: Any, run_id: str | None) -> Run[OutputT]:
    """``Run.replay_from``: a new run (with ``run_id``) runs ``run`` again from ``step``.

    Raises:
        RunStateError: ``run`` is running, or ``step`` has no stored result.
    """
    from procflow.runtime.run import Run  # the module that imports this one

    run._check_idle("replay_from")
    path = path_of(step)
    data = run._data
    if path not in data.records:
        known = sorted(p for p in data.records if "[" not in p)
        raise RunStateError(
            f"step '{path}' has no stored result in run '{run.run_id}'; steps with "
            f"results: {known}", workflow_id=run.workflow.id, run_id=run.run_id,
            step_id=path)
    new: Run[OutputT] = Run(run.workflow, run_id=run_id, storage=run.storage,
                            durability=run.durability, tracing=run._trace.enabled)
    new._data.input = data.input
    new._data.state = dict(data.state)
    new._data.context = data.context.copy()
    new._data.records = replay_kept(data.records, path)
    new._trace.replay_of = (run.run_id, path)
    await check_new_id(new, "replay into")
    await execute(new, None, frozenset(), None)
    return new


async def cancel(run: Run[Any]) -> None:
    """``Run.cancel``: cancel the execution under way, forward to the executor, or mark
    the stored run "canceled"."""
    running = run._running
    if run.mode is EPHEMERAL or (run.mode is PRIVATE and running is not None):
        raise RunStateError(
            f"run '{run.run_id}' of workflow '{run.workflow.id}' is internal to a "
            "library call and cannot be cancelled on its own; cancel the call instead",
            workflow_id=run.workflow.id, run_id=run.run_id)
    run._cancel_requested = True
    if running is not None and running.cancel():
        return
    if running is None and run._executor is not None and await run._executor.cancel(run):
        return
    if run._data.status in ("pending", "suspended", "running"):
        await RunExecution(execution(run, None, frozenset(), None), run._data,
                           run._trace).finish(CANCELED)


# -- loading ------------------------------------------------------------------------

async def load_stored(store: Storage, workflow: PlanUnit, run_id: str,
                      ) -> tuple[RunSnapshot, dict[str, StepResult]]:
    """A stored run's header and step results.

    Raises:
        RunNotFoundError: The run is not stored.
    """
    loaded = await store.load_snapshot(workflow.id, run_id)
    if loaded is None:
        raise RunNotFoundError(
            f"workflow '{workflow.id}' has no stored run '{run_id}' in "
            f"{type(store).__name__}; check the run id and the storage",
            workflow_id=workflow.id, run_id=run_id)
    return loaded


async def reload(run: Run[Any]) -> None:
    """Take the stored run as ``run``'s.

    Raises:
        RunNotFoundError: The run is not stored.
    """
    run._data.restore(run.workflow, run.run_id,
                      *await load_stored(run.storage, run.workflow, run.run_id))


# -- what executors and workers call ------------------------------------------------

async def prepare(run: Run[Any], input_data: Any, request_context: Any,
                  initial_state: Mapping[str, Any] | None) -> None:
    """``Run.prepare``: check the input and store the run as "pending"."""
    if initial_state is not None and not isinstance(initial_state, Mapping):
        raise TypeError(f"initial_state must be a mapping, got {type(initial_state).__name__}")
    await check_new_id(run, "submit")
    wf, data = run.workflow, run._data
    if wf.input is not None:
        input_data = wf.input.check(input_data, what="run input", workflow_id=wf.id,
                                    step_id=None, run_id=run.run_id)
    data.input = input_data
    data.context = as_context(request_context)
    data.state = dict(initial_state or {})
    await execution(run, None, frozenset(), None).flush("pending")


async def run_submitted(run: Run[Any], step: str | None,
                        resume_data: Any) -> WorkflowResult[Any]:
    """``Run.run_submitted``: under the lease, load the run and start, continue or
    resume it (or return its stored result if it is settled)."""
    run._check_idle("run_submitted")
    await take_lease(run, parked=True)
    try:
        await reload(run)
        if run._data.status == "running" and not run._trace.spans:  # continued: extend its trace
            run._trace.spans = await earlier_spans(run.storage, run.run_id)
    except BaseException:
        with shielded(f"releasing the lease of run {run.run_id!r}"):
            await run._drop_lease()
        raise
    if run._data.status not in ("pending", "running"):
        await run._drop_lease()
        assert run._data.result is not None  # a settled stored run has its result
        return run._data.result
    if step is None:
        return await execute(run, None, frozenset(), None)
    _log_resuming(run, step)
    return await execute(run, None, frozenset({step}), resume_data)


async def run_job(run: Run[Any], job: Job) -> StepResult:
    """``Run.run_job``: run one job of the run's fan-out under the job's own lease."""
    unit = job_unit(run, job)
    lease = RunLease(run.storage, run.workflow.id, f"{run.run_id}#{job.path}",
                     owner=run.lease_owner, ttl=run.lease_ttl)
    await lease.take()
    try:
        await reload(run)
        return await _run_job(execution(run, None, frozenset(), None), unit, job)
    finally:
        with shielded(f"releasing the lease of run {run.run_id!r}"):
            await lease.drop()


async def run_claimed_job(
        run: Run[Any], job: Job, snapshot: RunSnapshot, steps: dict[str, StepResult],
        save_steps: Callable[[Mapping[str, StepResult]], Awaitable[None]],
        load_input: Callable[[], Any],
) -> dict[str, StepResult]:
    """``Run.run_claimed_job``: run one claimed job from the rows the caller loaded."""
    unit = job_unit(run, job)
    wf, run_id, data = run.workflow, run.run_id, run._data
    # What ``RunData.restore`` takes of a stored run, but the input: a job runs no other
    # step, so it is decoded (and checked) only if a step asks for it.
    data.records = steps
    data.state = dict(snapshot.state)
    data.context = RequestContext.restored(snapshot.request_context)
    data.created_at = snapshot.created_at
    data.input = Deferred(lambda: checked_input(wf, run_id, load_input()))
    ex = JobExecution(
        job_path=job.path, save_steps=save_steps, wf=wf, run_id=run_id,
        input=data.input, records=data.records, state=data.state,
        request_context=data.context, storage=run.storage, sync=True, send=None,
        created_at=data.created_at)
    return await _run_claimed_job(ex, unit, job)


def job_unit(run: Run[Any], job: Job) -> Unit:
    """The step (or nested workflow) a job of ``run`` runs.

    Raises:
        LookupError: The job's step is not in the workflow.
    """
    unit = find_unit(run.workflow, job.unit_path)
    if unit is None:
        raise LookupError(f"workflow '{run.workflow.id}' has no step at "
                          f"'{job.unit_path}' (job {job.path} of run '{run.run_id}')")
    return unit


def _log_resuming(run: Run[Any], path: str) -> None:
    _log.info("run %s (workflow %s): resuming step %s", run.run_id, run.workflow.id,
              path, extra={"run_id": run.run_id, "workflow_id": run.workflow.id,
                           "step_path": path})
