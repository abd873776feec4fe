"""Retention: delete finished runs older than a cut-off (``prune_runs``).

Every workflow run and every agent call is stored; nothing expires on its own. A
service calls ``prune_runs`` (or runs ``procflow prune --older-than 30d``) on a
schedule to keep its store bounded.

A built-in backend answers with two methods of its own, the retention protocol:

- ``list_finished(before=, workflow_id=, statuses=)``: the finished runs last updated
  before ``before``, oldest first, as ``PrunedRun`` rows (no header is decoded where
  the backend keeps status and time apart);
- ``delete_finished(runs)``: delete those runs — header, step results, lease and
  trace — each only if it is still finished, unchanged since it was listed (same
  ``updated_at``) and holds no live lease; the ones deleted are returned. SQLite and
  PostgreSQL delete a batch in one transaction.

So a run resumed, restarted or replayed while the store is being pruned is never
deleted under it. Any other ``Storage`` is pruned through ``list_runs`` and
``delete_run`` (without that last check).
"""

from __future__ import annotations

import math
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol, runtime_checkable

from procflow.records import TERMINAL_STATUSES
from procflow.storage.base import Storage

__all__ = ["BATCH", "PrunedRun", "RetentionStorage", "finished_statuses", "oldest_first",
           "prune_runs"]

BATCH = 500
"""Runs ``prune_runs`` hands to one ``delete_finished`` call (one transaction on SQL)."""


@dataclass(frozen=True, slots=True)
class PrunedRun:
    """A finished run that ``prune_runs`` deleted (or, with ``dry_run``, would delete).

    Attributes:
        workflow_id: Its workflow (``agent:<id>`` for an agent call).
        run_id: Its id.
        status: How it ended: "success", "failed", "tripwire" or "canceled".
        updated_at: When it was last written (seconds since the epoch).
    """

    workflow_id: str
    run_id: str
    status: str
    updated_at: float


@runtime_checkable
class RetentionStorage(Protocol):
    """A storage that lists and deletes finished runs itself (see the module docstring)."""

    async def list_finished(self, *, before: float, workflow_id: str | None,
                            statuses: frozenset[str]) -> list[PrunedRun]:
        """Finished runs with a status in ``statuses`` last updated before ``before``,
        oldest first."""
        ...

    async def delete_finished(self, runs: Sequence[PrunedRun]) -> list[PrunedRun]:
        """Delete each of ``runs`` that is still as listed and holds no live lease;
        return those deleted."""
        ...


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
    however old.

    Args:
        storage: The store to prune.
        older_than: How old a run's last update must be (``timedelta(days=30)`` or
            seconds; ``0`` prunes every finished run).
        workflow_id: Only this workflow's runs (``"agent:support"`` for an agent's).
        status: Only runs that ended so ("success", "failed", "tripwire", "canceled",
            or several).
        dry_run: List what would be deleted, delete nothing.

    Returns:
        The runs deleted (with ``dry_run``: that would be), oldest first.

    Raises:
        ValueError: ``older_than`` or ``status`` is invalid.
        StorageError: The store could not be read or written (what was deleted before
            stays deleted; running it again goes on from there).
    """
    cutoff = time.time() - _seconds(older_than)
    statuses = finished_statuses(status)
    if isinstance(storage, RetentionStorage):
        found = await storage.list_finished(before=cutoff, workflow_id=workflow_id,
                                            statuses=statuses)
        if dry_run:
            return found
        deleted: list[PrunedRun] = []
        for start in range(0, len(found), BATCH):
            deleted += await storage.delete_finished(found[start:start + BATCH])
        return deleted
    listed = [run for run in await storage.list_runs(workflow_id=workflow_id)
              if run.status in statuses and run.updated_at < cutoff]
    found = oldest_first([PrunedRun(run.workflow_id, run.run_id, run.status, run.updated_at)
                          for run in listed])
    if not dry_run:
        for run in found:
            await storage.delete_run(run.workflow_id, run.run_id)
    return found


def _age(run: PrunedRun) -> tuple[float, str, str]:
    return run.updated_at, run.workflow_id, run.run_id


def oldest_first(runs: Sequence[PrunedRun]) -> list[PrunedRun]:
    """``runs`` sorted oldest first (ties by workflow and run id)."""
    return sorted(runs, key=_age)
