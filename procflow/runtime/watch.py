"""Following a run from what its storage holds: ``run.watch()`` and ``procflow watch``.

A watcher only reads. It polls the run's stored snapshot and yields a ``RunChange``
for each step whose status (or duration) changed and for each change of the run's own
status, until the run ends: finished, failed, tripped, canceled, suspended, or
*stalled* (still "running" in a storage shared between processes, with no live
process holding its lease).
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import anyio

from procflow.errors import RunNotFoundError
from procflow.runtime.leases import owner_is_dead

if TYPE_CHECKING:
    from procflow.storage.base import Storage

__all__ = ["RunChange", "watch_run"]

ENDED: Final = frozenset({"success", "failed", "tripwire", "canceled", "suspended",
                          "corrupted", "stalled"})
"""The statuses after which a watched run changes no more (until it is resumed)."""

STALL_POLLS: Final = 3
"""Polls in a row without a live lease before a "running" run is called stalled."""


@dataclass(frozen=True, slots=True)
class RunChange:
    """One change of a watched run, as its storage holds it.

    Attributes:
        run_id: The run.
        status: The run's status after the change; "stalled" when it is "running" but
            no live process holds it (``await run.restart()`` continues it).
        step: The step path whose status changed ("outer.inner" inside nested
            workflows), or ``None`` for a change of the run's own status.
        step_status: That step's status (``None`` for a run change).
        duration: Seconds the step took, once it ended (``None`` before, and for a run
            change).
        error: The run's error as text, on a run change to "failed" (else ``None``).
    """

    run_id: str
    status: str
    step: str | None = None
    step_status: str | None = None
    duration: float | None = None
    error: str | None = None

    @property
    def ended(self) -> bool:
        """Whether the run changes no more after this (until it is resumed)."""
        return self.step is None and self.status in ENDED


async def watch_run(storage: Storage, workflow_id: str, run_id: str, *,
                    interval: float = 0.2) -> AsyncGenerator[RunChange, None]:
    """Yield the run's changes as ``storage`` holds them, to its end (see ``RunChange``).

    The first poll yields the run's status and every step stored so far; each later
    one, what changed since. The iteration ends after the change to an ending status.

    Args:
        storage: Where the run is stored.
        workflow_id: Its workflow.
        run_id: The run.
        interval: Seconds between polls (> 0).

    Raises:
        ValueError: ``interval`` is not a positive number.
        RunNotFoundError: The run is not stored, or was deleted while watched.
        SnapshotCorruptedError: Its stored data cannot be decoded.
    """
    if not isinstance(interval, int | float) or isinstance(interval, bool) \
            or not math.isfinite(interval) or interval <= 0:
        raise ValueError(f"interval must be a number of seconds > 0, got {interval!r}")
    seen: dict[str, tuple[str, float | None]] = {}
    status: str | None = None
    unleased = 0
    while True:
        loaded = await storage.load_snapshot(workflow_id, run_id)
        if loaded is None:
            raise RunNotFoundError(
                f"run '{run_id}' of workflow '{workflow_id}' is not stored"
                + (" (it was deleted while watched)" if status is not None else ""),
                workflow_id=workflow_id, run_id=run_id)
        snapshot, steps = loaded
        for path, result in steps.items():
            took = (None if result.ended_at is None or result.started_at is None
                    else max(0.0, result.ended_at - result.started_at))
            now = (result.status, took)
            if seen.get(path) != now:
                seen[path] = now
                yield RunChange(run_id, snapshot.status, path, result.status, took)
        if snapshot.status != status:
            status = snapshot.status
            error = None if snapshot.error is None else str(snapshot.error)
            yield RunChange(run_id, status, error=error)
            if status in ENDED:
                return
        if status == "running" and not storage.process_local:
            unleased = 0 if await _held(storage, workflow_id, run_id) else unleased + 1
            if unleased >= STALL_POLLS:
                yield RunChange(run_id, "stalled", error=(
                    "the run is 'running' but no live process holds it (it stopped); "
                    "await run.restart() continues it"))
                return
        await anyio.sleep(interval)


async def _held(storage: Storage, workflow_id: str, run_id: str) -> bool:
    """Whether a live process holds the run's lease."""
    lease = await storage.get_lease(workflow_id, run_id)
    return (lease is not None and lease.expires_at > time.time()
            and not owner_is_dead(lease.owner))
