"""Distributed fan-out: ``foreach``/``parallel(..., distribute=True)`` on a worker pool.

On a worker (an ``Execution`` with a ``Distributor``), a distributed fan-out does not
run its items: it sends every item without a stored result as a ``Job`` to the pool and
*parks* the run (``Parked``): the execution ends and hands the run's lease to the
fan-out (``parked_owner``), which its jobs renew while they run, so the run stays
"running", not stalled. Each job runs on some worker, stores its result under its own
path (``"each[3]"``) and reports to the distributor's join; the last one sends the run
on. The run continues from its snapshot: the fan-out finds every item's result stored
and returns them in item order. No actor waits for another message, and a job lost with
its worker is sent again alone (a stored result is never run again).

A job never writes the run's header (the parked run owns it): on workers it claims its
own lease and loads only what it needs (the header, the rows it may read, ``Job.reads``)
in one step, runs in a ``JobExecution`` that writes only step rows, and leaves its own
result to be written with the join, atomically (``run_claimed_job``). ``run_job`` runs
a job with any storage (an ``InMemoryStorage`` in tests): on the whole stored run, its
header written back with the job's result.

Without a distributor (a local run), ``distribute=True`` runs the items in process.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic_core import to_jsonable_python

from procflow.records import StepResult
from procflow.runtime.execution import Execution, Failed, Scope, Suspended, Unit
from procflow.runtime.step_runner import run_unit
from procflow.runtime.tracing import Span, SpanKind, Tracer

__all__ = ["Distributor", "Job", "JobExecution", "Parked", "fan_out", "run_claimed_job",
           "run_job"]


@dataclass(frozen=True, slots=True)
class Job:
    """One item or branch of a distributed fan-out.

    Attributes:
        unit_path: Where its step is in the workflow ("enrich", "outer.enrich").
        path: Where its result is stored ("enrich[3]").
        data: Its input, JSON-ready (the step's input schema validates it again).
        reads: The paths of the stored results it may read (``ctx.get_step_result``):
            the successful steps of its scope when it was sent.
    """

    unit_path: str
    path: str
    data: Any
    reads: tuple[str, ...] = ()


class Distributor(Protocol):
    """Sends a parked run's jobs to the pool and continues the run when all are done."""

    async def dispatch(self, workflow_id: str, run_id: str, join: str, jobs: Sequence[Job],
                       total: int) -> None:
        """Send ``jobs`` (the unfinished ones of ``total``) for the fan-out ``join``."""
        ...


class Parked(Exception):
    """Internal: the run waits for distributed jobs; this execution ends here."""

    def __init__(self, join: str) -> None:
        super().__init__(join)
        self.join = join


async def fan_out(ex: Execution, distributor: Distributor, units: Sequence[Unit],
                  inputs: Sequence[Any], unit_paths: Sequence[str], paths: Sequence[str],
                  join: str, parent: Span | None = None) -> list[Any]:
    """The outputs of the jobs, in order, if all are stored; else send the missing ones
    and park the run. A job run again after its worker was lost gets a span under
    ``parent`` (the fan-out's) noting "attempt N after worker loss", as a chain step does.

    Raises:
        Failed: A job failed (the first one, in order).
        Suspended: Jobs suspended.
        Parked: Jobs were sent; the run continues when they are done.
    """
    stored = [ex.records.get(p) for p in paths]
    missing = [i for i, rec in enumerate(stored)
               if rec is None or rec.status not in ("success", "failed", "suspended")]
    if missing:
        reads = _reads(ex, unit_paths[0])
        jobs = [Job(unit_paths[i], paths[i], to_jsonable_python(inputs[i], fallback=repr),
                    reads) for i in missing]
        await distributor.dispatch(ex.wf.id, ex.run_id, join, jobs, len(paths))
        ex.parked = join
        raise Parked(join)
    if parent is not None and ex.tracer is not None:
        _note_lost(ex.tracer, parent, units, stored, paths)
    suspended: list[str] = []
    outputs: list[Any] = []
    for unit, rec, path in zip(units, stored, paths, strict=True):
        assert rec is not None  # every job is stored (checked above)
        if rec.status == "failed":
            raise Failed(path, rec.error or RuntimeError(f"job {path} failed"))
        if rec.status == "suspended":
            suspended.append(path)
            continue
        output = rec.output
        outputs.append(unit.output.validate(output)
                       if unit.output is not None and output is not None else output)
    if suspended:
        raise Suspended(suspended)
    return outputs


def _note_lost(tracer: Tracer, parent: Span, units: Sequence[Unit],
               stored: Sequence[StepResult | None], paths: Sequence[str]) -> None:
    """A span for each job that ran again after a lost worker (the others have none: a
    job's own spans stay on its worker)."""
    for unit, rec, path in zip(units, stored, paths, strict=True):
        if rec is None or not rec.lost:
            continue
        kind: SpanKind = getattr(unit, "span_kind", "workflow")  # a nested workflow's: none
        span = tracer.open(unit.id, kind, parent, path, rec.started_at)
        span.set(attempt=rec.lost + 1, note=f"attempt {rec.lost + 1} after worker loss")
        Tracer.end(span, "running" if rec.status == "running" else rec.status)
        span.end = rec.ended_at if rec.ended_at is not None else span.end


def _reads(ex: Execution, unit_path: str) -> tuple[str, ...]:
    """The stored results a job of the fan-out may read: ``ctx.get_step_result(id)`` in
    the job's scope reads ``prefix + id``, and an id holds no "." or "[" (so neither the
    fan-out's items nor anything nested is among them)."""
    prefix = _scope_prefix(unit_path)
    size = len(prefix)
    return tuple(path for path, rec in ex.records.items()
                 if rec.status == "success" and path.startswith(prefix)
                 and "." not in path[size:] and "[" not in path[size:])


def _scope_prefix(unit_path: str) -> str:
    """The path prefix of the scope a job's step runs in ("outer." for "outer.enrich")."""
    return unit_path.rpartition(".")[0] + "." if "." in unit_path else ""


class JobExecution(Execution):
    """The execution of one job on a worker: its writes hold only step rows (never the
    run's header), and its own result is kept for ``RedisStorage.finish_job``, which
    writes it with the join."""

    __slots__ = ("job_path", "save_steps")

    def __init__(self, *, job_path: str,
                 save_steps: Callable[[Mapping[str, StepResult]], Awaitable[None]],
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.job_path = job_path
        self.save_steps = save_steps
        # The job's step is stored "running" first: run again after its worker was
        # lost, it counts the lost attempt (``StepResult.lost``) and the trace says so.
        self.mark_steps()

    async def flush(self, status: Any, **_: Any) -> None:
        """Write the rows finished since the last write (a nested workflow's steps) and
        the job's "running" mark, but not the job's result (``finish_job`` writes it)."""
        own = self.dirty.pop(self.job_path, None)
        dirty = self.dirty
        if own is not None and own.status == "running":
            dirty[self.job_path] = own
            own = None
        self.dirty = {} if own is None else {self.job_path: own}
        if not dirty:
            return
        try:
            await self.save_steps(dirty)
        except BaseException:
            self.dirty = {**dirty, **self.dirty}  # not written: kept for a retry
            raise
        for result in dirty.values():
            result.encoded = None


async def run_claimed_job(ex: JobExecution, unit: Unit, job: Job) -> dict[str, StepResult]:
    """Run a claimed job (its result not stored: ``RedisStorage.claim_job``).

    Returns:
        The rows not written yet, the job's own result among them: the caller stores
        them with the join.
    """
    scope = Scope(ex.wf, _scope_prefix(job.unit_path), ex.input, base=ex.top.state)
    with contextlib.suppress(Failed, Suspended):  # recorded under the job's path
        await run_unit(ex, unit, job.data, scope, path=job.path, keep=True)
    if job.path not in ex.dirty:
        raise RuntimeError(f"job {job.path} of run '{ex.run_id}' ended without a result")
    return ex.dirty


async def run_job(ex: Execution, unit: Unit, job: Job) -> StepResult:
    """Run one job of a parked run and store its result (a stored one is kept as is).

    Returns:
        The job's stored result.
    """
    rec = ex.records.get(job.path)
    if rec is not None and rec.status in ("success", "failed", "suspended"):
        return rec
    scope = Scope(ex.wf, _scope_prefix(job.unit_path), ex.input, base=ex.top.state)
    with contextlib.suppress(Failed, Suspended):  # recorded under the job's path
        await run_unit(ex, unit, job.data, scope, path=job.path, keep=True)
    await ex.flush("running")
    return ex.records[job.path]
