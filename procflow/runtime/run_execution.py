"""``RunExecution``: one execution of a run (a start, resume or restart) around the
step runner's ``Execution``: the cancel scope, the lease's heartbeat beside the run's
body, how the plan ended, and the stored outcome (trace first, then the run)."""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import anyio

from procflow._backends.deadline import shielded
from procflow.errors import StepValidationError, StorageError, TripwireError
from procflow.records import Lease, RunSnapshot, RunStatus, StepResult, TraceRecord, Tripwire
from procflow.runtime.distributed import Parked
from procflow.runtime.execution import Execution, Failed, Suspended
from procflow.runtime.leases import Start
from procflow.runtime.results import WorkflowResult
from procflow.runtime.run_data import RunData
from procflow.runtime.run_lease import LeaseKeeper
from procflow.runtime.run_trace import RunTrace, saved
from procflow.runtime.step_context import BailSignal
from procflow.runtime.step_runner import run_plan
from procflow.storage.base import Storage

__all__ = ["CANCELED", "EPHEMERAL", "PRIVATE", "SHARED", "Outcome", "RunExecution", "RunMode"]


class RunMode(enum.Enum):
    """Who holds a run, which decides whether executing it takes a lease and a cancel
    scope, and whether ``Run.cancel()`` accepts it.

    ``SHARED`` (the default): others can see the run in its storage; an execution holds
    the run's lease (with a heartbeat) and a cancel scope that ``cancel()`` uses.
    ``PRIVATE``: only its caller holds it while it executes (an agent call kept in an
    in-memory storage): no lease, no cancel scope; ``cancel()`` refuses it while it
    runs (cancel the calling task instead).
    ``EPHEMERAL`` (``create_run(ephemeral=True)``): a transient run inside a library call
    that keeps nothing: no lease, no cancel scope, and ``cancel()`` always refuses it.
    """

    SHARED = "shared"
    PRIVATE = "private"
    EPHEMERAL = "ephemeral"


# An enum member is a slow attribute on Python 3.11 (~0.2 µs); a run compares its mode a
# few times per execution, so the members are module constants too.
SHARED, PRIVATE, EPHEMERAL = RunMode.SHARED, RunMode.PRIVATE, RunMode.EPHEMERAL


class Outcome(NamedTuple):
    """How one execution ended."""

    status: RunStatus
    result: Any = None
    error: BaseException | None = None
    suspended: Sequence[str] = ()
    """Paths of the suspended steps."""
    tripwire: Tripwire | None = None


CANCELED = Outcome("canceled")


class RunExecution:
    """One execution of a run: ``run`` it, or ``finish`` it with a known outcome."""

    __slots__ = ("cancel_requested", "combines", "data", "ex", "scope", "started", "trace")

    def __init__(self, ex: Execution, data: RunData, trace: RunTrace,
                 cancel_requested: bool = False) -> None:
        self.ex = ex
        self.data = data
        """The run's data: the outcome is left here."""
        self.trace = trace
        self.scope: anyio.CancelScope | None = None
        """The cancel scope around the run's body while it runs (guarded executions)."""
        self.cancel_requested = cancel_requested
        storage = ex.storage
        self.combines = (ex.persistent and not storage.process_local
                         and Storage in type(storage).__mro__)
        """Write the run's start with its lease and its end with its trace and the
        lease's release (``Storage.acquire_and_save``, ``save_and_release``). Only for a
        durable ``Storage`` subclass: a store in this process has no commit to save
        (its writes stay the plain ones), and a proxy forwarding other methods to a
        backend (``__getattr__``) keeps seeing every single write it overrides."""
        self.started = False
        """The run's start was stored with its lease."""

    def cancel(self) -> bool:
        """Cancel the run's body, now or as soon as it starts; whether it was running."""
        self.cancel_requested = True
        if self.scope is not None:
            self.scope.cancel()
            return True
        return False

    async def run(self, lease: LeaseKeeper | None, guarded: bool, ttl: float,
                  idle: Callable[[], None]) -> WorkflowResult[Any]:
        """Run the body to its end and store the outcome; then call ``idle`` and release
        the run's ``lease`` if held (or hand it to the fan-out the run parked at).
        ``guarded``: under the lease (taken first) and a cancel scope; a run only its
        caller holds has neither (cancel the caller instead).

        Raises:
            RunStateError: Another live process holds the run's lease, or it was lost.
        """
        try:
            if not guarded or lease is None:
                return await self.finish(await self._body())
            self.started = await lease.take(self.ex.storage, ttl=ttl, start=self._start())
            with anyio.CancelScope() as scope:
                self.scope = scope
                if self.cancel_requested:
                    scope.cancel()
                outcome = await lease.beside(self._body, scope.cancel)
            self.scope = None
            lease.check_kept()
            if scope.cancelled_caught:
                outcome = CANCELED
            return await self.finish(outcome, lease)
        except anyio.get_cancelled_exc_class():
            with shielded(f"storing canceled run {self.ex.run_id!r}"):
                if lease is None or not lease.lost:
                    await self.finish(CANCELED, lease)
            raise
        finally:
            self.scope = None
            idle()
            if lease is not None:
                await lease.release(self.ex.parked if self.data.status == "running" else None)

    async def _body(self) -> Outcome:
        ex = self.ex
        if ex.send is not None:
            await ex.event("run-start", None, {"input": self.data.input})
        if ex.sync_start and not self.started:
            await ex.flush("running")
        return await _outcome(ex)

    def _start(self) -> Start | None:
        """How the lease is taken with the run's start ("running" snapshot under "sync"
        durability) in one write, or ``None``."""
        ex = self.ex
        if not ex.sync_start or not self.combines:
            return None

        async def start(owner: str, ttl: float) -> Lease | None:
            taken: list[Lease] = []

            async def write(snapshot: RunSnapshot, steps: dict[str, StepResult]) -> None:
                lease = await ex.storage.acquire_and_save(snapshot, steps, owner=owner,
                                                          ttl=ttl)
                if lease is None:
                    raise _NotTaken  # nothing written: the flush keeps its results
                taken.append(lease)

            try:
                await ex.flush("running", write=write)
            except _NotTaken:
                return None
            return taken[0]

        return start

    async def finish(self, outcome: Outcome, lease: LeaseKeeper | None = None,
                     ) -> WorkflowResult[Any]:
        """Store the outcome (the trace first: whoever sees the run settled in storage
        finds its trace) and leave it in the run's data. With the run's ``lease``, a
        settled run's last write releases it too (one write where the storage can)."""
        ex, data = self.ex, self.data
        status, result, error, suspended_paths, tripwire = outcome
        suspended = list(dict.fromkeys(suspended_paths))
        paths = [p.split(".") for p in suspended]
        data.status = status
        data.suspended = suspended
        data.state = ex.top.state
        usage = ex.usage
        if usage is not None and ex.top.span is not None:
            ex.top.span.set(usage=usage.to_dict())
        record = None
        try:
            record = self.trace.end(ex, status, result, error, tripwire)
        except Exception:  # the run's outcome stands without its trace
            _trace_not_stored(ex)
        owner = None if lease is None or status == "running" else lease.releasable()
        if not (self.combines and (record is not None or owner is not None)
                and await self._write_end(outcome, paths, record, owner, lease)):
            if record is not None:
                try:
                    await RunTrace.save(ex, record)
                except Exception:  # the run's outcome stands without its trace
                    _trace_not_stored(ex)
            try:
                await ex.flush(status, result=result, error=error, suspended=paths,
                               tripwire=tripwire)
            except Exception as exc:  # the storage failed or refused a value: a failed run
                if not isinstance(error, StorageError):
                    error = exc
                status, result, suspended, paths, tripwire = "failed", None, [], [], None
                await _write_failure(ex, error)
                data.status = status
                data.suspended = suspended
        data.result = WorkflowResult(status, result, dict(data.records), error, data.state,
                                     paths, tripwire, usage, ex.run_id)
        if ex.send is not None:
            await ex.event("run-finish", None, {"result": data.result})
        return data.result

    async def _write_end(self, outcome: Outcome, paths: list[list[str]],
                         record: TraceRecord | None, owner: str | None,
                         lease: LeaseKeeper | None) -> bool:
        """The trace, the final snapshot and the lease's release in one write
        (``Storage.save_and_release``); whether it was written (if not, ``finish``
        writes each on its own, and says what failed)."""
        ex = self.ex
        storage = ex.storage

        async def write(snapshot: RunSnapshot, steps: dict[str, StepResult]) -> None:
            await storage.save_and_release(snapshot, steps, trace=record, owner=owner)

        try:
            await ex.flush(outcome.status, result=outcome.result, error=outcome.error,
                           suspended=paths, tripwire=outcome.tripwire, write=write)
        except Exception:
            return False
        if record is not None:
            saved(record)
        if owner is not None and lease is not None:
            lease.released()
        return True


class _NotTaken(Exception):
    """Internal: another owner holds the lease a run's start was to be written with."""


def _trace_not_stored(ex: Execution) -> None:
    logging.getLogger("procflow").warning(
        "the trace of run %s could not be stored", ex.run_id, exc_info=True)


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


async def _outcome(ex: Execution) -> Outcome:
    wf = ex.wf
    try:
        out = await run_plan(ex, wf, ex.input, ex.top)
        if wf.output is not None:
            out = wf.output.check(out, what="output", workflow_id=wf.id, step_id=None,
                                  run_id=ex.run_id)
        return Outcome("success", out)
    except Suspended as sus:
        return Outcome("suspended", suspended=sus.paths)
    except Parked:  # distributed jobs run elsewhere; the run continues when they are done
        return Outcome("running")
    except Failed as failed:
        return Outcome("failed", error=failed.error)
    except BailSignal as bail:
        try:
            out = bail.result
            if wf.output is not None:
                out = wf.output.check(out, what="bail result", workflow_id=wf.id,
                                      step_id=None, run_id=ex.run_id)
        except StepValidationError as exc:
            return Outcome("failed", error=exc)
        return Outcome("success", out)
    except TripwireError as trip:
        return Outcome("tripwire", error=trip, tripwire=Tripwire.from_dict(trip.to_dict()))
    except Exception as exc:  # an error outside any step: report it, never crash the caller
        return Outcome("failed", error=exc)
