"""PostgreSQL storage: the durable system of record for runs and traces.

Tables (created and migrated by ``procflow._backends.postgres``)::

    procflow_runs(workflow_id, run_id, status, created_at, updated_at, seq, snapshot)
    procflow_steps(workflow_id, run_id, path, result)       -- one row a step
    procflow_traces(run_id, workflow_id, status, started_at, ended_at, seq, data)
    procflow_leases(workflow_id, run_id, owner, expires_at)   -- runs being executed
    procflow_streams(workflow_id, run_id, position, item)     -- agent streams' chunks

JSON documents are stored as text, exactly as the codec writes them, so a damaged row
reads as a ``SnapshotCorruptedError`` and is left as it is. Every write is one
transaction; ``claim_run`` locks the row (``SELECT ... FOR UPDATE``), so of two
processes claiming one run exactly one wins. Memory (threads, messages, working memory,
vectors) lives in the same database: ``Memory(storage=PostgresStorage(...))`` or
``PostgresMemoryStore``, sharing this storage's pool.

A lease is taken with one ``INSERT ... ON CONFLICT DO UPDATE ... WHERE`` (the holder's
own or an expired one), so of two processes taking it exactly one wins.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, final

from procflow._backends import AsyncResource
from procflow._backends.postgres import OPERATION_TIMEOUT, PostgresPool
from procflow.records import Lease, RunSnapshot, RunStatus, StepResult, TraceRecord
from procflow.storage._sql import RunRows, lease_request, run_rows, trace_row
from procflow.storage.base import Storage
from procflow.storage.codec import (
    listed_snapshot,
    load_run,
    load_snapshot_json,
    load_trace_header,
    load_trace_json,
)
from procflow.storage.retention import PrunedRun

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["PostgresStorage"]

_TRACE_HEADER: Final = ("run_id", "workflow_id", "status", "started_at", "ended_at")

# The finished runs of a batch that are as listed (status, last write) and hold no live
# lease; deleted, their keys returned.
_DELETE_FINISHED: Final = """
    DELETE FROM procflow_runs AS r
    USING unnest(%s::text[], %s::text[], %s::text[], %s::float8[])
        AS c(workflow_id, run_id, status, updated_at)
    WHERE r.workflow_id = c.workflow_id AND r.run_id = c.run_id AND r.status = c.status
      AND r.updated_at = c.updated_at
      AND NOT EXISTS (SELECT 1 FROM procflow_leases AS l WHERE l.workflow_id = r.workflow_id
                      AND l.run_id = r.run_id AND l.expires_at > %s)
    RETURNING r.workflow_id, r.run_id"""

_NO_RUN: Final = ("NOT EXISTS (SELECT 1 FROM procflow_runs AS r WHERE r.workflow_id = "
                  "t.workflow_id AND r.run_id = t.run_id)")
"""A trace (``t``) whose run has no record (an ephemeral run's)."""

_DELETE_ORPHAN_TRACES: Final = f"""
    DELETE FROM procflow_traces AS t
    USING unnest(%s::text[], %s::text[], %s::text[], %s::float8[])
        AS c(workflow_id, run_id, status, at)
    WHERE t.run_id = c.run_id AND t.workflow_id = c.workflow_id AND t.status = c.status
      AND COALESCE(t.ended_at, t.started_at) = c.at AND {_NO_RUN}
    RETURNING t.workflow_id, t.run_id"""

_UPSERT_RUN: Final = """
    INSERT INTO procflow_runs (workflow_id, run_id, status, created_at, updated_at, snapshot)
    VALUES (%s, %s, %s, %s, %s, %s)
    ON CONFLICT (workflow_id, run_id) DO UPDATE SET
        status = excluded.status, created_at = excluded.created_at,
        updated_at = excluded.updated_at, snapshot = excluded.snapshot
"""
_UPSERT_STEP: Final = """
    INSERT INTO procflow_steps (workflow_id, run_id, path, result) VALUES (%s, %s, %s, %s)
    ON CONFLICT (workflow_id, run_id, path) DO UPDATE SET result = excluded.result
"""
_UPSERT_TRACE: Final = """
    INSERT INTO procflow_traces (run_id, workflow_id, status, started_at, ended_at, data)
    VALUES (%s, %s, %s, %s, %s, %s)
    ON CONFLICT (run_id) DO UPDATE SET
        workflow_id = excluded.workflow_id, status = excluded.status,
        started_at = excluded.started_at, ended_at = excluded.ended_at, data = excluded.data
"""
_LOAD_RUN: Final = """
    SELECT r.snapshot, s.path, s.result FROM procflow_runs r
    LEFT JOIN procflow_steps s ON s.workflow_id = r.workflow_id AND s.run_id = r.run_id
    WHERE r.workflow_id = %s AND r.run_id = %s
"""
_ACQUIRE: Final = """
    INSERT INTO procflow_leases (workflow_id, run_id, owner, expires_at)
    VALUES (%(workflow_id)s, %(run_id)s, %(owner)s, %(expires_at)s)
    ON CONFLICT (workflow_id, run_id) DO UPDATE SET
        owner = excluded.owner, expires_at = excluded.expires_at
    WHERE procflow_leases.owner = excluded.owner OR procflow_leases.expires_at <= %(now)s
        OR procflow_leases.owner = %(steal_from)s
    RETURNING owner
"""
_RELEASE: Final = ("DELETE FROM procflow_leases WHERE workflow_id = %s AND run_id = %s "
                   "AND owner = %s")


@final
class PostgresStorage(AsyncResource, Storage):
    """A ``Storage`` on a PostgreSQL server (psycopg 3 async, a connection pool).

    The schema is created (or upgraded) on first use, unless ``create`` is false. Needs
    the extra ``procflow[postgres]`` and an asyncio event loop.

    Args:
        dsn: A libpq connection string or URL, e.g. ``"postgresql://app@db/procflow"``.
        schema: The schema holding procflow's tables (default ``public``).
        max_connections: The pool's size.
        create: Whether first use may create procflow's tables. With ``False`` (the
            read-only commands of ``procflow``), a schema without them is a
            ``StorageError`` saying so, and nothing is created (an older version of the
            tables is still upgraded).
        timeout: Seconds one operation may take, waiting for a pooled connection
            included (``None``: no limit); past it the operation raises
            ``StorageError`` (a frozen server or network never hangs a run).

    Every method raises ``StorageError`` when the database cannot be reached, read or
    written, and ``SnapshotCorruptedError`` (naming the run) for a stored row that cannot be
    decoded; nothing stored is changed by a failed read.

    Raises:
        StorageError: psycopg is not installed.
        ValueError: ``schema`` is not a plain identifier.

    Example:
        ```python
        async with PostgresStorage("postgresql://127.0.0.1/app") as storage:
            run = wf.create_run(storage=storage)
            await run.start(input_data={"value": 2})
        ```
    """

    persistent = True
    keeps_objects = False
    process_local = False
    keeps_streams = True

    def __init__(self, dsn: str, *, schema: str = "public", max_connections: int = 10,
                 create: bool = True, timeout: float | None = OPERATION_TIMEOUT) -> None:
        self.pool = PostgresPool(dsn, schema=schema, max_size=max_connections, create=create,
                                 timeout=timeout)

    def __repr__(self) -> str:
        return f"PostgresStorage({self.pool.display!r}, schema={self.pool.schema!r})"


    async def save_snapshot(self, snapshot: RunSnapshot,
                            steps: Mapping[str, StepResult]) -> None:
        """Upsert the run row and the given step rows in one transaction."""
        rows = run_rows(snapshot, steps)
        async with self.pool.connection(f"saving run {snapshot.run_id!r} of workflow "
                                        f"{snapshot.workflow_id!r}") as conn, \
                conn.transaction():
            await _save_rows(conn, rows)

    async def acquire_and_save(self, snapshot: RunSnapshot, steps: Mapping[str, StepResult],
                               *, owner: str, ttl: float) -> Lease | None:
        """Take the run's lease and, if taken, upsert the run and step rows, in one
        transaction (see ``Storage.acquire_and_save``)."""
        request = lease_request(snapshot.workflow_id, snapshot.run_id, owner=owner, ttl=ttl,
                                steal_from=None)
        rows = run_rows(snapshot, steps)
        async with self.pool.connection(f"starting run {snapshot.run_id!r} of workflow "
                                        f"{snapshot.workflow_id!r}") as conn, \
                conn.transaction():
            cursor = await conn.execute(_ACQUIRE, request.params)
            if await cursor.fetchone() is None:
                return None
            await _save_rows(conn, rows)
        return Lease(owner, request.expires_at)

    async def save_and_release(self, snapshot: RunSnapshot, steps: Mapping[str, StepResult],
                               *, trace: TraceRecord | None, owner: str | None) -> None:
        """Upsert the trace row, the run and step rows and delete ``owner``'s lease row,
        in one transaction: one commit, one wait for the server's WAL flush (see
        ``Storage.save_and_release``)."""
        rows = run_rows(snapshot, steps)
        trace_data = None if trace is None else trace_row(trace)
        async with self.pool.connection(f"saving run {snapshot.run_id!r} of workflow "
                                        f"{snapshot.workflow_id!r}") as conn, \
                conn.transaction():
            if trace_data is not None:
                await conn.execute(_UPSERT_TRACE, trace_data)
            await _save_rows(conn, rows)
            if owner is not None:
                await conn.execute(_RELEASE, (snapshot.workflow_id, snapshot.run_id, owner))

    async def load_snapshot(self, workflow_id: str, run_id: str,
                            ) -> tuple[RunSnapshot, dict[str, StepResult]] | None:
        """The run's header and all its step results (one consistent read), or ``None``.

        Raises:
            SnapshotCorruptedError: A stored row cannot be decoded (it is left as is).
        """
        async with self.pool.connection(f"loading run {run_id!r} of workflow "
                                        f"{workflow_id!r}") as conn:
            cursor = await conn.execute(_LOAD_RUN, (workflow_id, run_id))
            rows = await cursor.fetchall()
        if not rows:
            return None
        return load_run(rows[0][0], [(path, result) for _, path, result in rows
                                     if path is not None],
                        workflow_id=workflow_id, run_id=run_id)

    async def list_runs(self, *, workflow_id: str | None = None,
                        status: RunStatus | None = None,
                        limit: int | None = None) -> list[RunSnapshot]:
        """Stored headers, newest first by ``updated_at`` (ties: first stored last)."""
        if limit is not None and limit <= 0:
            return []
        where, params = _filters(workflow_id=workflow_id, status=status)
        query = (f"SELECT workflow_id, run_id, snapshot, updated_at FROM procflow_runs {where} "
                 "ORDER BY updated_at DESC, seq DESC LIMIT %s")
        async with self.pool.connection("listing runs") as conn:
            cursor = await conn.execute(query, (*params, limit))
            rows = await cursor.fetchall()
        return [listed_snapshot(header, workflow_id=wf, run_id=run, updated_at=updated)
                for wf, run, header, updated in rows]

    async def delete_run(self, workflow_id: str, run_id: str) -> None:
        """Delete the run row, its step rows, its lease and its trace in one transaction
        (no error if unknown)."""
        key = (workflow_id, run_id)
        async with self.pool.connection(f"deleting run {run_id!r} of workflow "
                                        f"{workflow_id!r}") as conn, conn.transaction():
            for table in ("procflow_steps", "procflow_runs", "procflow_leases",
                          "procflow_traces", "procflow_streams"):
                await conn.execute(f"DELETE FROM {table} WHERE workflow_id = %s AND "
                                   "run_id = %s", key)

    async def list_finished(self, *, before: float, workflow_id: str | None,
                            statuses: frozenset[str]) -> list[PrunedRun]:
        """Finished runs with a status in ``statuses`` last updated before ``before``,
        oldest first, read off the status and time columns (no header is decoded)."""
        query = ("SELECT workflow_id, run_id, status, updated_at FROM procflow_runs "
                 "WHERE updated_at < %s AND status = ANY(%s)"
                 + ("" if workflow_id is None else " AND workflow_id = %s")
                 + " ORDER BY updated_at, workflow_id, run_id")
        params: list[Any] = [before, sorted(statuses)]
        if workflow_id is not None:
            params.append(workflow_id)
        async with self.pool.connection("listing finished runs") as conn:
            cursor = await conn.execute(query, params)
            rows = await cursor.fetchall()
        return [PrunedRun(wf, run, status, float(updated)) for wf, run, status, updated in rows]

    async def delete_finished(self, runs: Sequence[PrunedRun]) -> list[PrunedRun]:
        """Delete, in one transaction, each of ``runs`` (header, step results, lease,
        trace) that is still as listed and holds no live lease; return those deleted."""
        if not runs:
            return []
        columns = ([r.workflow_id for r in runs], [r.run_id for r in runs],
                   [r.status for r in runs], [r.updated_at for r in runs])
        async with self.pool.connection(f"deleting {len(runs)} finished runs") as conn, \
                conn.transaction():
            cursor = await conn.execute(_DELETE_FINISHED, (*columns, time.time()))
            gone = {(wf, run) for wf, run in await cursor.fetchall()}
            if gone:
                keys = ([wf for wf, _ in gone], [run for _, run in gone])
                for table in ("procflow_steps", "procflow_leases", "procflow_traces",
                              "procflow_streams"):
                    await conn.execute(
                        f"DELETE FROM {table} AS t USING unnest(%s::text[], %s::text[]) "
                        "AS g(workflow_id, run_id) WHERE t.workflow_id = g.workflow_id AND "
                        "t.run_id = g.run_id", keys)
        return [r for r in runs if (r.workflow_id, r.run_id) in gone]

    async def list_orphan_traces(self, *, before: float, workflow_id: str | None,
                                 statuses: frozenset[str] | None) -> list[PrunedRun]:
        """Traces with no run record that ended before ``before``, with a status in
        ``statuses`` (``None``: any), oldest first (no trace document is decoded)."""
        query = ("SELECT t.workflow_id, t.run_id, t.status, COALESCE(t.ended_at, t.started_at) "
                 "AS at FROM procflow_traces AS t WHERE COALESCE(t.ended_at, t.started_at) < %s"
                 + ("" if statuses is None else " AND t.status = ANY(%s)")
                 + ("" if workflow_id is None else " AND t.workflow_id = %s")
                 + f" AND {_NO_RUN} ORDER BY at, t.workflow_id, t.run_id")
        params: list[Any] = [before]
        if statuses is not None:
            params.append(sorted(statuses))
        if workflow_id is not None:
            params.append(workflow_id)
        async with self.pool.connection("listing traces without a run") as conn:
            cursor = await conn.execute(query, params)
            rows = await cursor.fetchall()
        return [PrunedRun(wf, run, status, float(at), trace_only=True)
                for wf, run, status, at in rows]

    async def delete_orphan_traces(self, traces: Sequence[PrunedRun]) -> list[PrunedRun]:
        """Delete, in one statement, each of ``traces`` that is still as listed and still
        has no run record; return those deleted."""
        if not traces:
            return []
        columns = ([t.workflow_id for t in traces], [t.run_id for t in traces],
                   [t.status for t in traces], [t.updated_at for t in traces])
        async with self.pool.connection(f"deleting {len(traces)} traces without a run") \
                as conn:
            cursor = await conn.execute(_DELETE_ORPHAN_TRACES, columns)
            gone = {(wf, run) for wf, run in await cursor.fetchall()}
        return [t for t in traces if (t.workflow_id, t.run_id) in gone]

    async def claim_run(self, workflow_id: str, run_id: str, *, expected: RunStatus,
                        new: RunStatus) -> bool:
        """Atomically set the run's status to ``new`` if it is ``expected`` (row lock).

        Raises:
            SnapshotCorruptedError: The run's stored header cannot be decoded.
        """
        key = (workflow_id, run_id)
        async with self.pool.connection(f"claiming run {run_id!r} of workflow "
                                        f"{workflow_id!r}") as conn, conn.transaction():
            cursor = await conn.execute(
                "SELECT snapshot FROM procflow_runs WHERE workflow_id = %s AND run_id = %s "
                "FOR UPDATE", key)
            row = await cursor.fetchone()
            if row is None:
                return False
            if load_snapshot_json(row[0], workflow_id=workflow_id,
                                  run_id=run_id).status != expected:
                return False
            # Patch the stored JSON rather than re-encode the decoded snapshot, so that
            # nothing but the status changes.
            document = json.loads(row[0])
            document["status"] = new
            await conn.execute(
                "UPDATE procflow_runs SET status = %s, snapshot = %s WHERE workflow_id = %s "
                "AND run_id = %s",
                (new, json.dumps(document, ensure_ascii=False, separators=(",", ":")), *key))
            return True

    async def acquire_lease(self, workflow_id: str, run_id: str, *, owner: str,
                            ttl: float, steal_from: str | None = None) -> Lease | None:
        """Take or renew the run's lease in one upsert."""
        request = lease_request(workflow_id, run_id, owner=owner, ttl=ttl,
                                steal_from=steal_from)
        async with self.pool.connection(f"taking the lease of run {run_id!r}") as conn:
            cursor = await conn.execute(_ACQUIRE, request.params)
            row = await cursor.fetchone()
        return None if row is None else Lease(owner, request.expires_at)

    async def release_lease(self, workflow_id: str, run_id: str, *, owner: str) -> None:
        """Delete the lease row if ``owner`` holds it."""
        async with self.pool.connection(f"releasing the lease of run {run_id!r}") as conn:
            await conn.execute(_RELEASE, (workflow_id, run_id, owner))

    async def get_lease(self, workflow_id: str, run_id: str) -> Lease | None:
        """The run's live lease, or ``None``."""
        async with self.pool.connection(f"reading the lease of run {run_id!r}") as conn:
            cursor = await conn.execute(
                "SELECT owner, expires_at FROM procflow_leases WHERE workflow_id = %s AND "
                "run_id = %s AND expires_at > %s", (workflow_id, run_id, time.time()))
            row = await cursor.fetchone()
        return None if row is None else Lease(str(row[0]), float(row[1]))

    async def append_stream(self, workflow_id: str, run_id: str, items: Sequence[str], *,
                            start: int) -> None:
        """Insert the stream log rows ``start``, ... in one transaction (``start == 0``
        first deletes the run's old log; a position already stored is kept)."""
        key = (workflow_id, run_id)
        rows = [(workflow_id, run_id, start + i, item) for i, item in enumerate(items)]
        async with self.pool.connection(f"appending to the stream log of run {run_id!r}",
                                        ) as conn, conn.transaction():
            if start == 0:
                await conn.execute("DELETE FROM procflow_streams WHERE workflow_id = %s AND "
                                   "run_id = %s", key)
            async with conn.cursor() as cursor:
                await cursor.executemany(
                    "INSERT INTO procflow_streams (workflow_id, run_id, position, item) "
                    "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING", rows)

    async def read_stream(self, workflow_id: str, run_id: str, *, start: int = 0,
                          ) -> list[str]:
        """The stream log rows from position ``start`` on."""
        async with self.pool.connection(f"reading the stream log of run {run_id!r}") as conn:
            cursor = await conn.execute(
                "SELECT item FROM procflow_streams WHERE workflow_id = %s AND run_id = %s "
                "AND position >= %s ORDER BY position", (workflow_id, run_id, start))
            return [str(row[0]) for row in await cursor.fetchall()]

    async def save_trace(self, trace: TraceRecord) -> None:
        """Upsert the trace row (header columns and the JSON document with the spans)."""
        row = trace_row(trace)
        async with self.pool.connection(f"saving the trace of run {trace.run_id!r}") as conn:
            await conn.execute(_UPSERT_TRACE, row)

    async def load_trace(self, run_id: str) -> TraceRecord | None:
        """The trace of the run, spans included, or ``None`` if none is stored.

        Raises:
            SnapshotCorruptedError: The stored document cannot be decoded.
        """
        async with self.pool.connection(f"loading the trace of run {run_id!r}") as conn:
            cursor = await conn.execute("SELECT data FROM procflow_traces WHERE run_id = %s",
                                        (run_id,))
            row = await cursor.fetchone()
        return None if row is None else load_trace_json(row[0], run_id=run_id)

    async def list_traces(self, *, workflow_id: str | None = None, status: str | None = None,
                          limit: int | None = None) -> list[TraceRecord]:
        """Stored traces without their spans, newest first by ``started_at`` (ties: first
        stored last). Only the header columns are read.

        Raises:
            SnapshotCorruptedError: A listed trace's header columns have the wrong types.
        """
        if limit is not None and limit <= 0:
            return []
        where, params = _filters(workflow_id=workflow_id, status=status)
        query = (f"SELECT {', '.join(_TRACE_HEADER)} FROM procflow_traces {where} "
                 "ORDER BY started_at DESC, seq DESC LIMIT %s")
        async with self.pool.connection("listing traces") as conn:
            cursor = await conn.execute(query, (*params, limit))
            rows = await cursor.fetchall()
        return [load_trace_header(dict(zip(_TRACE_HEADER, row, strict=True)),
                                  run_id=str(row[0])) for row in rows]

    async def aclose(self) -> None:
        """Close the pool; later calls raise ``StorageError``."""
        await self.pool.aclose()


async def _save_rows(conn: AsyncConnection, rows: RunRows) -> None:
    """Upsert a run's header row and step rows (inside a transaction)."""
    await conn.execute(_UPSERT_RUN, rows.run)
    if rows.steps:
        async with conn.cursor() as cursor:
            await cursor.executemany(_UPSERT_STEP, rows.steps)


def _filters(**columns: str | None) -> tuple[str, list[Any]]:
    clauses = [f"{name} = %s" for name, value in columns.items() if value is not None]
    params = [value for value in columns.values() if value is not None]
    return (f"WHERE {' AND '.join(clauses)}" if clauses else ""), params
