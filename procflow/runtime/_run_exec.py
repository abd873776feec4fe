"""``_Executing``: one execution of a run: input checks, the lease and its heartbeat,
the cancel scope, the trace and the stored outcome."""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import anyio

from procflow._backends.deadline import shielded
from procflow.errors import (
    RunNotSuspendedError,
    RunStateError,
    StepValidationError,
    StorageError,
    TripWire,
)
from procflow.records import RunStatus, TraceRecord, Tripwire
from procflow.runtime._run_state import RunBase, _as_context, _find_unit
from procflow.runtime._storable import refuse_unstorable
from procflow.runtime.defaults import resolve_storage
from procflow.runtime.distributed import Parked
from procflow.runtime.events import WorkflowEvent
from procflow.runtime.execution import Execution, Failed, OutputT, Suspended
from procflow.runtime.executor import run_plan
from procflow.runtime.leases import RunLease, parked_owner
from procflow.runtime.results import WorkflowResult
from procflow.runtime.step_context import BailSignal
from procflow.runtime.tracing import Tracer, finished_trace_hooks
from procflow.storage.values import UnstorableValueError, encode_value

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectSendStream

__all__ = ["_Executing"]

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



class _Executing(RunBase[OutputT]):
    """How a run executes (``Run`` builds its public API on this)."""

    async def _start(self, send: Any, input_data: Any, request_context: Any,
                     initial_state: Mapping[str, Any] | None) -> WorkflowResult[OutputT]:
        if self.status != "pending" or self._active:
            raise RunStateError(
                f"run '{self.run_id}' cannot start: it is not new (status {self.status!r}); use "
                "resume(), restart(), or create a new run", workflow_id=self.workflow.id,
                run_id=self.run_id)
        if initial_state is not None and not isinstance(initial_state, Mapping):
            raise TypeError(f"initial_state must be a mapping, got {type(initial_state).__name__}")
        if self._id_unchecked:  # a random id is never looked up: not on the hot path
            await self._check_new_id("start")
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

    async def _check_new_id(self, what: str) -> None:
        """A run given an id by its caller (``create_run(run_id=...)``) must not replace
        a run already stored under that id (a random id cannot collide: not looked up).

        Raises:
            RunStateError: A run of this workflow is stored under the id.
        """
        if not self._id_unchecked or self.internal:
            return
        stored = await self.storage.load_snapshot(self.workflow.id, self.run_id)
        if stored is None:
            self._id_unchecked = False  # an executor's check serves the start after it
            return
        raise RunStateError(
            f"cannot {what} run '{self.run_id}' of workflow '{self.workflow.id}': a run with "
            f"that id is already stored (status {stored[0].status!r}); get_run() it to "
            "resume, restart or replay it, delete_run() it, or choose another run id",
            workflow_id=self.workflow.id, run_id=self.run_id)

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
        refuse_unstorable(resume_data, storage=self.storage, root="resume_data",
                          workflow_id=self.workflow.id, run_id=self.run_id, step_id=path)
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
            with shielded(f"storing canceled run {self.run_id!r}"):
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
                    with shielded(f"releasing the lease of run {self.run_id!r}"):
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
            # interned: one name for every stored trace of the workflow
            ex.top.span = ex.tracer.start(sys.intern(f"run: {wf.id}"), "run", None,
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


async def _write_failure(ex: Execution, error: BaseException) -> None:
    """Best effort: store the run as failed (without its state if that was refused)."""
    states: tuple[dict[str, Any] | None, ...] = (None, {})
    for state in states:
        try:
            with shielded(f"storing failed run {ex.run_id!r}"):
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


