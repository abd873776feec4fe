"""Retention: delete finished runs older than a cut-off (``prune_runs``).

Every workflow run and every agent call is stored; nothing expires on its own. A
service calls ``prune_runs`` (or runs ``procflow prune --older-than 30d``) on a
schedule to keep its store bounded.

A storage answers with two methods of the ``Storage`` protocol:

- ``list_finished(before=, workflow_id=, statuses=)``: the finished runs last updated
  before ``before``, oldest first, as ``PrunedRun`` rows (no header is decoded where
  the backend keeps status and time apart);
- ``delete_finished(runs)``: delete those runs — header, step results, lease and
  trace — each only if it is still finished, unchanged since it was listed (same
  ``updated_at``) and holds no live lease; the ones deleted are returned. SQLite and
  PostgreSQL delete a batch in one transaction.

So a run resumed, restarted or replayed while the store is being pruned is never
deleted under it. The built-in backends implement both; ``Storage``'s defaults, which a
backend of your own inherits, go through ``list_runs`` and ``delete_run`` (without that
last check).

A trace can also be stored without a run: an ephemeral run (``create_run(ephemeral=
True)``, traced) keeps no record of its own and leaves its trace in the default
storage. The built-in backends prune those too, by the time the trace ended, with two
more methods (``Storage``'s defaults find none): ``list_orphan_traces`` (same arguments as
``list_finished``) and ``delete_orphan_traces`` (each only if it is unchanged and still
has no run). A run finishing saves its trace a moment before its record, so a trace
is taken for an orphan only once it ended ``ORPHAN_GRACE`` seconds ago.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from procflow.records import TERMINAL_STATUSES, TraceRecord

if TYPE_CHECKING:
    from procflow.storage.base import Storage

__all__ = ["BATCH", "ORPHAN_GRACE", "PrunedRun", "finished_statuses", "oldest_first",
           "prune_runs", "trace_time"]

BATCH = 500
"""Runs ``prune_runs`` hands to one ``delete_finished`` call (one transaction on SQL)."""

ORPHAN_GRACE = 60.0
"""Seconds a trace without a run must have ended before ``prune_runs`` deletes it
(whatever ``older_than``): a finishing run saves its trace just before its record."""


@dataclass(frozen=True, slots=True)
class PrunedRun:
    """A finished run that ``prune_runs`` deleted (or, with ``dry_run``, would delete).

    Attributes:
        workflow_id: Its workflow (``agent:<id>`` for an agent call).
        run_id: Its id.
        status: How it ended: "success", "failed", "tripwire" or "canceled".
        updated_at: When it was last written (seconds since the epoch); for a trace
            without a run, when the trace ended.
        trace_only: A trace stored without a run (an ephemeral run's): only the trace
            is deleted.
    """

    workflow_id: str
    run_id: str
    status: str
    updated_at: float
    trace_only: bool = False


def finished_statuses(status: str | Collection[str] | None) -> frozenset[str]:
    """The statuses to prune: all finished ones by default.

    Raises:
        ValueError: A status is not a finished one (a run that can still go on —
            running, pending, suspended — is never pruned).
    """
    if status is None:
        return frozenset(TERMINAL_STATUSES)
    wanted = frozenset([status] if isinstance(status, str) else status)
    wrong = sorted(str(s) for s in wanted - TERMINAL_STATUSES)
    if wrong or not wanted:
        raise ValueError(f"prune_runs: status must be finished ones among "
                         f"{sorted(TERMINAL_STATUSES)}, got {wrong or sorted(wanted)}; runs that "
                         "can still go on are never pruned")
    return wanted


def _seconds(older_than: timedelta | float) -> float:
    seconds = (older_than.total_seconds() if isinstance(older_than, timedelta)
               else older_than)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) \
            or not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"prune_runs: older_than must be a timedelta or a number of seconds "
                         f">= 0, got {older_than!r}")
    return float(seconds)


async def prune_runs(storage: Storage, *, older_than: timedelta | float,
                     workflow_id: str | None = None,
                     status: str | Collection[str] | None = None,
                     dry_run: bool = False) -> list[PrunedRun]:
    """Delete the finished runs last updated more than ``older_than`` ago.

    Each run goes with its step results, its lease and its trace. Runs that can still
    go on (running, pending, suspended, waiting for an approval) are never deleted,
    however old. On the built-in backends, a trace stored without a run (an ephemeral
    run's) that ended before the cut-off, and at least ``ORPHAN_GRACE`` seconds ago, is
    deleted too (a ``trace_only`` row; of any status unless ``status`` is given: no run
    can go on from it).

    Args:
        storage: The store to prune.
        older_than: How old a run's last update must be (``timedelta(days=30)`` or
            seconds; ``0`` prunes every finished run).
        workflow_id: Only this workflow's runs (``"agent:support"`` for an agent's).
        status: Only runs that ended so ("success", "failed", "tripwire", "canceled",
            or several).
        dry_run: List what would be deleted, delete nothing.

    Returns:
        The runs (and lone traces) deleted (with ``dry_run``: that would be), oldest
        first.

    Raises:
        ValueError: ``older_than`` or ``status`` is invalid.
        StorageError: The store could not be read or written (what was deleted before
            stays deleted; running it again goes on from there).
    """
    cutoff = time.time() - _seconds(older_than)
    statuses = finished_statuses(status)
    found = await storage.list_finished(before=cutoff, workflow_id=workflow_id,
                                        statuses=statuses)
    if not dry_run:
        found = await _in_batches(storage.delete_finished, found)
    # of any status unless one is asked for: no run can go on from a lone trace
    lone = await storage.list_orphan_traces(
        before=min(cutoff, time.time() - ORPHAN_GRACE), workflow_id=workflow_id,
        statuses=None if status is None else statuses)
    if not dry_run:
        lone = await _in_batches(storage.delete_orphan_traces, lone)
    return oldest_first(found + lone)


async def _in_batches(delete: Callable[[Sequence[PrunedRun]], Awaitable[list[PrunedRun]]],
                      found: list[PrunedRun]) -> list[PrunedRun]:
    """``delete`` called on ``BATCH`` rows at a time (one transaction each on SQL);
    the rows it deleted."""
    deleted: list[PrunedRun] = []
    for start in range(0, len(found), BATCH):
        deleted += await delete(found[start:start + BATCH])
    return deleted


def trace_time(trace: TraceRecord) -> float:
    """When a trace ended (when it started, if it has no end): a lone trace's age."""
    return trace.started_at if trace.ended_at is None else trace.ended_at


def _age(run: PrunedRun) -> tuple[float, str, str]:
    return run.updated_at, run.workflow_id, run.run_id


def oldest_first(runs: Sequence[PrunedRun]) -> list[PrunedRun]:
    """``runs`` sorted oldest first (ties by workflow and run id)."""
    return sorted(runs, key=_age)
