"""The storage contract: where runs keep their snapshots.

A run's snapshot is a header (``RunSnapshot``) plus one ``StepResult`` per step path
("step", "outer.inner", "each[3].inner"). ``save_snapshot`` upserts the header and only
the step results given (the ones that changed), so each step's result is written
once, not a cumulative history on every step.

A run being executed holds a *lease* (``acquire_lease``): an owner id and an expiry,
renewed by a heartbeat while it runs. Taking a lease is atomic (of two processes, one
wins), and a "running" run whose lease expired is *stalled*: anyone may restart it.

What the runtime asks of a backend beyond its methods is declared here as a
*capability*, a class attribute with a default (``persistent``, ``keeps_objects``,
``process_local``, ``keeps_streams``). A backend subclasses ``Storage`` and overrides
the capabilities that differ; the runtime reads them as attributes and never probes for
them. Likewise the four retention methods (``prune_runs``) have defaults built on
``list_runs`` and ``delete_run``, which the built-in backends replace with their own,
and so do the two combined writes of a run's start and end (``acquire_and_save``,
``save_and_release``), built on the single ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar, Protocol, runtime_checkable

from procflow.records import Lease, RunSnapshot, RunStatus, StepResult, TraceRecord
from procflow.storage.retention import PrunedRun, oldest_first

__all__ = ["Storage"]


@runtime_checkable
class Storage(Protocol):
    """Persists workflow runs. Implementations: InMemoryStorage, SQLiteStorage, RedisStorage,
    PostgresStorage, NullStorage.

    Subclass it to write a backend: the capabilities below then have their defaults
    (those of a durable store shared between processes, like ``SQLiteStorage``), and
    mypy checks that every method is implemented.
    """

    __slots__ = ()

    persistent: ClassVar[bool] = True
    """Whether what is saved can be loaded again. ``False`` (``NullStorage``): the runtime
    builds no snapshots, takes no lease and stores the run's trace in the storage the run
    would otherwise resolve to."""

    keeps_objects: ClassVar[bool] = False
    """Whether values are kept as they are (by reference), never encoded. ``True``
    (``InMemoryStorage``): any value can be stored, and a stored run holds the objects as
    the run left them, not a copy per step (so an agent run cannot be replayed from it)."""

    process_local: ClassVar[bool] = False
    """Whether the storage lives and dies with this process. ``True``
    (``InMemoryStorage``): no other process can take a lease over, so runs hold theirs
    without expiry or heartbeat, and an agent call keeps its run private."""

    keeps_streams: ClassVar[bool] = False
    """Whether the storage keeps a run's stream log (``append_stream``/``read_stream``):
    the chunks of an agent stream as they are produced, so a reader that lost the stream
    picks it up again (``agent.stream(resume_from=run_id)``). The built-in backends do;
    a backend without it leaves ``append_stream`` and ``read_stream`` as they are here."""

    async def save_snapshot(self, snapshot: RunSnapshot,
                            steps: Mapping[str, StepResult]) -> None:
        """Upsert a run header and the given step results, atomically.

        Args:
            snapshot: The run's header; replaces the stored one.
            steps: Step path to result; each replaces the stored result of that path.
                Paths not given are left as stored.
        """
        ...

    async def load_snapshot(self, workflow_id: str, run_id: str,
                            ) -> tuple[RunSnapshot, dict[str, StepResult]] | None:
        """Load a run's header and all its step results, or ``None`` if it is not stored.

        Raises:
            SnapshotCorruptedError: The stored data cannot be decoded; it is not modified.
        """
        ...

    async def list_runs(self, *, workflow_id: str | None = None,
                        status: RunStatus | None = None,
                        limit: int | None = None) -> list[RunSnapshot]:
        """Stored run headers, newest first, filtered by workflow and status.

        Args:
            workflow_id: Only runs of this workflow.
            status: Only runs with this status.
            limit: At most this many runs.

        Returns:
            The headers; one that cannot be decoded is listed with status "corrupted"
            (the stored data is left as it is).
        """
        ...

    async def delete_run(self, workflow_id: str, run_id: str) -> None:
        """Forget a run: its header, step results, lease and trace (a trace stored under
        the same run id by another workflow is kept). No error if it is not stored."""
        ...

    async def claim_run(self, workflow_id: str, run_id: str, *, expected: RunStatus,
                        new: RunStatus) -> bool:
        """Atomically set a stored run's status to ``new`` if it is ``expected``.

        Returns:
            Whether the status was changed (``False`` if it was not ``expected``
            or the run is not stored). Used so two resumes cannot both run a step.
        """
        ...

    async def acquire_lease(self, workflow_id: str, run_id: str, *, owner: str,
                            ttl: float, steal_from: str | None = None) -> Lease | None:
        """Take (or renew) the run's lease for ``ttl`` seconds, atomically.

        The lease is taken if nobody holds it, if its holder's lease expired, if
        ``owner`` holds it already (a renewal), or if ``steal_from`` holds it (a holder
        known to be dead). The run need not be stored.

        Args:
            owner: The taker's id.
            ttl: Seconds until the lease expires unless renewed (> 0).
            steal_from: A holder whose live lease may be taken over (compare-and-set: of
                two takers stealing from the same holder, one wins).

        Returns:
            The lease now held by ``owner``, or ``None`` if another owner holds a live
            lease.
        """
        ...

    async def release_lease(self, workflow_id: str, run_id: str, *, owner: str) -> None:
        """Drop the run's lease if ``owner`` holds it (no error otherwise)."""
        ...

    async def get_lease(self, workflow_id: str, run_id: str) -> Lease | None:
        """The run's live lease, or ``None`` (never leased, released or expired)."""
        ...

    async def save_trace(self, trace: TraceRecord) -> None:
        """Store a run's trace, replacing any trace stored for the same run id."""
        ...

    async def load_trace(self, run_id: str) -> TraceRecord | None:
        """The trace of a run (found by run id alone), or ``None``.

        Raises:
            SnapshotCorruptedError: The stored trace cannot be decoded.
        """
        ...

    async def list_traces(self, *, workflow_id: str | None = None, status: str | None = None,
                          limit: int | None = None) -> list[TraceRecord]:
        """Stored traces newest first (by ``started_at``), without their spans
        (``spans == []``), filtered by workflow and status.

        Args:
            workflow_id: Only traces of this workflow.
            status: Only traces with this status.
            limit: At most this many traces.
        """
        ...

    async def aclose(self) -> None:
        """Release connections; the storage is not used afterwards."""
        ...

    # -- combined writes; defaults on the methods above ---------------------------------

    async def acquire_and_save(self, snapshot: RunSnapshot, steps: Mapping[str, StepResult],
                               *, owner: str, ttl: float) -> Lease | None:
        """Take the run's lease (``acquire_lease``, no steal) and, only if taken, save
        ``snapshot`` and ``steps`` (``save_snapshot``): a run's start. A backend that can
        does both in one transaction. Default: the two calls.

        Returns:
            The lease now held by ``owner``, or ``None`` (another owner holds a live
            lease; nothing was saved).
        """
        lease = await self.acquire_lease(snapshot.workflow_id, snapshot.run_id, owner=owner,
                                         ttl=ttl)
        if lease is not None:
            await self.save_snapshot(snapshot, steps)
        return lease

    async def save_and_release(self, snapshot: RunSnapshot, steps: Mapping[str, StepResult],
                               *, trace: TraceRecord | None, owner: str | None) -> None:
        """Store a run's end: its ``trace`` (``save_trace``), then ``snapshot`` and
        ``steps`` (``save_snapshot``), then release ``owner``'s lease (``release_lease``);
        ``None`` skips a part. A backend that can does it in one transaction; whoever sees
        the run settled finds its trace. Default: the three calls, in that order.
        """
        if trace is not None:
            await self.save_trace(trace)
        await self.save_snapshot(snapshot, steps)
        if owner is not None:
            await self.release_lease(snapshot.workflow_id, snapshot.run_id, owner=owner)

    # -- the stream log (``keeps_streams``) ------------------------------------------

    async def append_stream(self, workflow_id: str, run_id: str, items: Sequence[str], *,
                            start: int) -> None:
        """Store ``items`` (encoded text) as the entries ``start``, ``start + 1``, ... of
        the run's stream log; ``start == 0`` begins a new log (the previous one, if any,
        is dropped). An entry already stored at a position is left as it is. The log is
        deleted with the run.

        Raises:
            NotImplementedError: The storage does not keep stream logs (``keeps_streams``).
        """
        raise _no_streams(self)

    async def read_stream(self, workflow_id: str, run_id: str, *, start: int = 0,
                          ) -> list[str]:
        """The run's stream log from entry ``start`` on, in order (``[]`` when there is
        none, or nothing past ``start`` yet).

        Raises:
            NotImplementedError: The storage does not keep stream logs (``keeps_streams``).
        """
        raise _no_streams(self)

    # -- retention (``procflow.storage.retention``); defaults on the methods above ------

    async def list_finished(self, *, before: float, workflow_id: str | None,
                            statuses: frozenset[str]) -> list[PrunedRun]:
        """Finished runs with a status in ``statuses`` last updated before ``before``,
        oldest first. Default: filtered from ``list_runs``."""
        return oldest_first([
            PrunedRun(run.workflow_id, run.run_id, run.status, run.updated_at)
            for run in await self.list_runs(workflow_id=workflow_id)
            if run.status in statuses and run.updated_at < before])

    async def delete_finished(self, runs: Sequence[PrunedRun]) -> list[PrunedRun]:
        """Delete each of ``runs`` that is still as listed and holds no live lease; return
        those deleted. Default: ``delete_run`` on each, without those checks."""
        for run in runs:
            await self.delete_run(run.workflow_id, run.run_id)
        return list(runs)

    async def list_orphan_traces(self, *, before: float, workflow_id: str | None,
                                 statuses: frozenset[str] | None) -> list[PrunedRun]:
        """Traces with no run record that ended (or, with no end, started) before
        ``before``, with a status in ``statuses`` (``None``: any), oldest first, as
        ``trace_only`` rows. Default: none (such traces are kept)."""
        return []

    async def delete_orphan_traces(self, traces: Sequence[PrunedRun]) -> list[PrunedRun]:
        """Delete each of ``traces`` that is still as listed and still has no run record;
        return those deleted. Default: none."""
        return []


def _no_streams(storage: Storage) -> NotImplementedError:
    return NotImplementedError(f"{type(storage).__name__} keeps no stream logs "
                               "(keeps_streams is False)")
