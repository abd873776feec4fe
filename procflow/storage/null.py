"""``NullStorage``: keeps nothing. For transient runs (processor workflows) that must
never be persisted, resumed or listed."""

from __future__ import annotations

import time
from collections.abc import Mapping

from procflow.records import Lease, RunSnapshot, RunStatus, StepResult, TraceRecord
from procflow.storage.base import Storage

__all__ = ["NullStorage"]


class NullStorage(Storage):
    """A ``Storage`` that stores nothing: saves are dropped, loads find nothing.

    ``persistent = False`` tells the runtime it need not build snapshots at all.
    """

    persistent = False
    keeps_objects = False
    process_local = False

    async def save_snapshot(self, snapshot: RunSnapshot,
                            steps: Mapping[str, StepResult]) -> None:
        return None

    async def load_snapshot(self, workflow_id: str, run_id: str,
                            ) -> tuple[RunSnapshot, dict[str, StepResult]] | None:
        return None

    async def list_runs(self, *, workflow_id: str | None = None,
                        status: RunStatus | None = None,
                        limit: int | None = None) -> list[RunSnapshot]:
        return []

    async def delete_run(self, workflow_id: str, run_id: str) -> None:
        return None

    async def claim_run(self, workflow_id: str, run_id: str, *, expected: RunStatus,
                        new: RunStatus) -> bool:
        return False

    async def acquire_lease(self, workflow_id: str, run_id: str, *, owner: str,
                            ttl: float, steal_from: str | None = None) -> Lease | None:
        return Lease(owner, time.time() + ttl)  # nothing is shared: always granted

    async def release_lease(self, workflow_id: str, run_id: str, *, owner: str) -> None:
        return None

    async def get_lease(self, workflow_id: str, run_id: str) -> Lease | None:
        return None

    async def save_trace(self, trace: TraceRecord) -> None:
        return None

    async def load_trace(self, run_id: str) -> TraceRecord | None:
        return None

    async def list_traces(self, *, workflow_id: str | None = None, status: str | None = None,
                          limit: int | None = None) -> list[TraceRecord]:
        return []

    async def aclose(self) -> None:
        return None
