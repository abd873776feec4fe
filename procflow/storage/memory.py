"""In-process storage: dicts holding the run records by reference.

The test and benchmark backend. Nothing is serialised or copied on save: the stored
``RunSnapshot`` and ``StepResult`` objects are the ones given (they are frozen), so a
save costs two dict updates and never yields to the event loop. Traces are kept the
same way: the ``TraceRecord`` given to ``save_trace`` is the one ``load_trace`` returns.
"""

from __future__ import annotations

import dataclasses
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import final

from procflow._backends import lease_ttl
from procflow.records import (
    TERMINAL_STATUSES,
    Lease,
    RunSnapshot,
    RunStatus,
    StepResult,
    TraceRecord,
)
from procflow.storage.base import Storage
from procflow.storage.retention import PrunedRun, oldest_first, trace_time

__all__ = ["InMemoryStorage"]

_RunKey = tuple[str, str]


@final
class InMemoryStorage(Storage):
    """A ``Storage`` that keeps runs in this process's memory.

    Data lives as long as the instance; ``aclose()`` keeps it. Stored objects are shared,
    not copied, so do not mutate values (such as ``state`` dicts) after saving them.

    Example:
        ```python
        storage = InMemoryStorage()
        run = wf.create_run(storage=storage)
        ```
    """

    __slots__ = ("__weakref__", "_finished", "_leases", "_max_runs", "_runs", "_steps",
                 "_streams", "_traces")

    persistent = True
    keeps_objects = True
    """Values are kept as they are, never encoded (so any value can be stored)."""
    process_local = True
    """The storage lives and dies with this process: a lease taken here cannot outlive
    its holder, so runs hold it without expiry or heartbeat (see ``RunLease``)."""
    keeps_streams = True

    def __init__(self, *, max_runs: int | None = None) -> None:
        """Args:
            max_runs: Keep at most this many finished runs (status "success", "failed",
                "tripwire" or "canceled") and traces, forgetting the run that finished
                first (``None``: keep everything). A run that can still go on (suspended,
                waiting for an approval, or running) is never forgotten, however many
                runs finish after it. The process-wide fallback storage uses a bound so
                a long-lived process does not grow without end.
        """
        if max_runs is not None and (not isinstance(max_runs, int) or max_runs < 1):
            raise ValueError(f"max_runs must be an int >= 1 or None, got {max_runs!r}")
        self._max_runs = max_runs
        # Insertion order of ``_runs`` is the tie-break of ``list_runs`` (dicts keep the
        # first insertion's position when a key is updated).
        # OrderedDicts: evicting the oldest is O(1) (a plain dict's first key is found by
        # scanning past every slot deleted before it).
        self._runs: OrderedDict[_RunKey, RunSnapshot] = OrderedDict()
        self._steps: dict[_RunKey, dict[str, StepResult]] = {}
        # Likewise, insertion order of ``_traces`` is the tie-break of ``list_traces``.
        self._traces: OrderedDict[str, TraceRecord] = OrderedDict()
        self._leases: dict[_RunKey, Lease] = {}
        # The finished runs, in the order they finished: the ones ``max_runs`` may drop.
        self._finished: OrderedDict[_RunKey, None] = OrderedDict()
        self._streams: dict[_RunKey, list[str]] = {}

    def __repr__(self) -> str:
        return f"InMemoryStorage(runs={len(self._runs)})"

    async def save_snapshot(self, snapshot: RunSnapshot,
                            steps: Mapping[str, StepResult]) -> None:
        """Store the header and the given step results (by reference)."""
        key = (snapshot.workflow_id, snapshot.run_id)
        self._runs[key] = snapshot
        stored = self._steps.get(key)
        if stored is None:
            self._steps[key] = dict(steps)
        elif steps:
            stored.update(steps)
        if self._max_runs is not None:
            self._bound(key, snapshot.status, self._max_runs)

    def _bound(self, key: _RunKey, status: RunStatus, max_runs: int) -> None:
        """Note whether the run ``key`` has finished; past ``max_runs`` finished runs,
        forget the one that finished first (a run that can go on is never dropped)."""
        finished = self._finished
        if status not in TERMINAL_STATUSES:
            finished.pop(key, None)  # back to running: a resume, a replay
        elif key not in finished:
            finished[key] = None
            if len(finished) > max_runs:
                oldest, _ = finished.popitem(last=False)
                self._runs.pop(oldest, None)
                self._steps.pop(oldest, None)
                self._leases.pop(oldest, None)
                self._streams.pop(oldest, None)

    async def load_snapshot(self, workflow_id: str, run_id: str,
                            ) -> tuple[RunSnapshot, dict[str, StepResult]] | None:
        """Return the run's header and a new dict of its step results, or ``None``."""
        key = (workflow_id, run_id)
        snapshot = self._runs.get(key)
        if snapshot is None:
            return None
        return snapshot, dict(self._steps.get(key, {}))

    async def list_runs(self, *, workflow_id: str | None = None,
                        status: RunStatus | None = None,
                        limit: int | None = None) -> list[RunSnapshot]:
        """Stored headers, newest first by ``updated_at`` (ties: latest created first)."""
        matching = [
            (snapshot.updated_at, position, snapshot)
            for position, snapshot in enumerate(self._runs.values())
            if (workflow_id is None or snapshot.workflow_id == workflow_id)
            and (status is None or snapshot.status == status)
        ]
        matching.sort(key=lambda item: (item[0], item[1]), reverse=True)
        runs = [snapshot for _, _, snapshot in matching]
        return runs if limit is None else runs[:max(limit, 0)]

    async def delete_run(self, workflow_id: str, run_id: str) -> None:
        """Forget the run, its step results, its lease and its trace (no error if
        unknown)."""
        key = (workflow_id, run_id)
        self._runs.pop(key, None)
        self._steps.pop(key, None)
        self._leases.pop(key, None)
        self._finished.pop(key, None)
        self._streams.pop(key, None)
        trace = self._traces.get(run_id)
        if trace is not None and trace.workflow_id == workflow_id:
            del self._traces[run_id]

    async def append_stream(self, workflow_id: str, run_id: str, items: Sequence[str], *,
                            start: int) -> None:
        """Keep ``items`` at positions ``start``, ... of the run's stream log (``start ==
        0`` begins a new log); a position already kept is left as it is."""
        key = (workflow_id, run_id)
        log = self._streams.setdefault(key, [])
        if start == 0:
            log.clear()
        if start > len(log):
            raise ValueError(f"stream log of run {run_id!r}: entry {start} appended after "
                             f"{len(log)} entries (a gap)")
        log.extend(items[len(log) - start:])

    async def read_stream(self, workflow_id: str, run_id: str, *, start: int = 0,
                          ) -> list[str]:
        """The run's stream log from entry ``start`` on."""
        return self._streams.get((workflow_id, run_id), [])[start:]

    async def list_finished(self, *, before: float, workflow_id: str | None,
                            statuses: frozenset[str]) -> list[PrunedRun]:
        """Finished runs with a status in ``statuses`` last updated before ``before``,
        oldest first (see ``procflow.storage.retention``)."""
        return oldest_first([
            PrunedRun(s.workflow_id, s.run_id, s.status, s.updated_at)
            for s in self._runs.values()
            if s.status in statuses and s.updated_at < before
            and (workflow_id is None or s.workflow_id == workflow_id)])

    async def delete_finished(self, runs: Sequence[PrunedRun]) -> list[PrunedRun]:
        """Delete each of ``runs`` that is still as listed and holds no live lease;
        return those deleted."""
        deleted: list[PrunedRun] = []
        for run in runs:
            stored = self._runs.get((run.workflow_id, run.run_id))
            if stored is None or stored.status != run.status \
                    or stored.updated_at != run.updated_at \
                    or await self.get_lease(run.workflow_id, run.run_id) is not None:
                continue
            await self.delete_run(run.workflow_id, run.run_id)
            deleted.append(run)
        return deleted

    async def list_orphan_traces(self, *, before: float, workflow_id: str | None,
                                 statuses: frozenset[str] | None) -> list[PrunedRun]:
        """Traces with no run record that ended before ``before``, with a status in
        ``statuses`` (``None``: any), oldest first (see ``procflow.storage.retention``)."""
        return oldest_first([
            PrunedRun(t.workflow_id, t.run_id, t.status, trace_time(t), trace_only=True)
            for t in self._traces.values()
            if trace_time(t) < before and (statuses is None or t.status in statuses)
            and (workflow_id is None or t.workflow_id == workflow_id)
            and (t.workflow_id, t.run_id) not in self._runs])

    async def delete_orphan_traces(self, traces: Sequence[PrunedRun]) -> list[PrunedRun]:
        """Delete each of ``traces`` that is still as listed and still has no run;
        return those deleted."""
        deleted: list[PrunedRun] = []
        for listed in traces:
            stored = self._traces.get(listed.run_id)
            if stored is None or stored.workflow_id != listed.workflow_id \
                    or stored.status != listed.status \
                    or trace_time(stored) != listed.updated_at \
                    or (listed.workflow_id, listed.run_id) in self._runs:
                continue
            del self._traces[listed.run_id]
            deleted.append(listed)
        return deleted

    async def claim_run(self, workflow_id: str, run_id: str, *, expected: RunStatus,
                        new: RunStatus) -> bool:
        """Set the run's status to ``new`` if it is ``expected``."""
        key = (workflow_id, run_id)
        snapshot = self._runs.get(key)
        if snapshot is None or snapshot.status != expected:
            return False
        # No await between the check and the write: atomic within the event loop.
        self._runs[key] = dataclasses.replace(snapshot, status=new)
        if self._max_runs is not None:
            self._bound(key, new, self._max_runs)
        return True

    async def acquire_lease(self, workflow_id: str, run_id: str, *, owner: str,
                            ttl: float, steal_from: str | None = None) -> Lease | None:
        """Take or renew the run's lease (see ``Storage.acquire_lease``).

        Raises:
            ValueError: ``ttl`` is not a finite number > 0.
        """
        seconds = lease_ttl(ttl)
        key = (workflow_id, run_id)
        now = time.time()
        held = self._leases.get(key)
        # No await between the check and the write: atomic within the event loop.
        if held is not None and held.owner not in (owner, steal_from) \
                and held.expires_at > now:
            return None
        lease = self._leases[key] = Lease(owner, now + seconds)
        return lease

    async def release_lease(self, workflow_id: str, run_id: str, *, owner: str) -> None:
        """Drop the lease if ``owner`` holds it."""
        key = (workflow_id, run_id)
        held = self._leases.get(key)
        if held is not None and held.owner == owner:
            del self._leases[key]

    async def get_lease(self, workflow_id: str, run_id: str) -> Lease | None:
        """The run's live lease, or ``None``."""
        key = (workflow_id, run_id)
        held = self._leases.get(key)
        if held is None:
            return None
        if held.expires_at <= time.time():
            del self._leases[key]
            return None
        return held

    async def save_trace(self, trace: TraceRecord) -> None:
        """Store the trace (by reference), replacing any trace of the same run id."""
        traces = self._traces
        if self._max_runs is not None and trace.run_id not in traces \
                and len(traces) >= self._max_runs:
            traces.popitem(last=False)
        traces[trace.run_id] = trace

    async def load_trace(self, run_id: str) -> TraceRecord | None:
        """The stored trace of the run (the very record saved), or ``None``."""
        return self._traces.get(run_id)

    async def list_traces(self, *, workflow_id: str | None = None, status: str | None = None,
                          limit: int | None = None) -> list[TraceRecord]:
        """Stored traces without their spans, newest first by ``started_at`` (ties:
        latest first stored first).
        """
        if limit is not None and limit <= 0:
            return []
        matching = [
            (trace.started_at, position, trace)
            for position, trace in enumerate(self._traces.values())
            if (workflow_id is None or trace.workflow_id == workflow_id)
            and (status is None or trace.status == status)
        ]
        matching.sort(key=lambda item: (item[0], item[1]), reverse=True)
        if limit is not None:
            matching = matching[:limit]
        return [dataclasses.replace(trace, spans=[]) for _, _, trace in matching]

    async def aclose(self) -> None:
        """Nothing to release; the stored runs stay readable."""
