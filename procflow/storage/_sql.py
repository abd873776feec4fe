"""Rows and parameters shared by the SQL backends (SQLite and PostgreSQL).

Both store a run as one header row plus one row per step result, a trace as one row
of header columns plus the span document, and a lease as an upsert guarded by the
owner and the expiry; only the SQL dialect and the driver differ.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, NamedTuple

from procflow._backends import lease_ttl
from procflow.records import RunSnapshot, StepResult, TraceRecord
from procflow.storage.codec import dump_run, dump_trace

__all__ = ["LeaseRequest", "RunRows", "lease_request", "run_rows", "trace_row"]


class RunRows(NamedTuple):
    """A run encoded for SQL: its header row and its step rows."""

    run: tuple[str, str, str, float, float, str]
    steps: list[tuple[str, str, str, str]]


class LeaseRequest(NamedTuple):
    """The named parameters of a lease upsert, and the expiry it would set."""

    params: dict[str, Any]
    expires_at: float


def run_rows(snapshot: RunSnapshot, steps: Mapping[str, StepResult]) -> RunRows:
    """Encode a run now, in the caller's thread (the values may change once it returns)."""
    workflow_id, run_id = snapshot.workflow_id, snapshot.run_id
    header, rows = dump_run(snapshot, steps)
    return RunRows((workflow_id, run_id, snapshot.status, snapshot.created_at,
                    snapshot.updated_at, header),
                   [(workflow_id, run_id, path, text) for path, text in rows])


def trace_row(trace: TraceRecord) -> tuple[str, str, str, float, float | None, str]:
    """A trace as its row: header columns, then the JSON document with the spans."""
    return (trace.run_id, trace.workflow_id, trace.status, trace.started_at,
            trace.ended_at, dump_trace(trace))


def lease_request(workflow_id: str, run_id: str, *, owner: str, ttl: float,
                  steal_from: str | None) -> LeaseRequest:
    """The parameters of a lease upsert taken now for ``ttl`` seconds.

    Raises:
        ValueError: ``ttl`` is not a finite number > 0.
    """
    now = time.time()
    expires_at = now + lease_ttl(ttl)
    return LeaseRequest({"workflow_id": workflow_id, "run_id": run_id, "owner": owner,
                         "expires_at": expires_at, "now": now, "steal_from": steal_from},
                        expires_at)
