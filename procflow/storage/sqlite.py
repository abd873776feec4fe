"""SQLite storage: the embedded default, one file shared safely by several processes.

Runs live in two tables of one database file, their traces in a third, the leases of
runs being executed in a fourth::

    runs(workflow_id, run_id, status, created_at, updated_at, snapshot)   -- header JSON
    steps(workflow_id, run_id, path, result)                              -- one row a step
    traces(run_id, workflow_id, status, started_at, ended_at, data)       -- trace JSON
    leases(workflow_id, run_id, owner, expires_at)                        -- one row a lease

A trace's header fields are columns, so ``list_traces`` reads only those and never the
(large) ``data`` document holding the spans.

The file is opened in WAL mode with a busy timeout, and every write is one
``BEGIN IMMEDIATE`` transaction, so readers never block writers and concurrent writers
from other processes wait for each other instead of failing. Blocking calls run in a
worker thread; one connection per instance is guarded by a lock. Small writes (a step's
result, a lease) are first tried on the event loop's thread without waiting for a lock,
and go to the worker thread only if another connection holds it.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, final

from procflow._backends import AsyncResource
from procflow._backends.sqlite import BUSY_TIMEOUT, SQLiteFile, raw_text, transaction
from procflow.errors import SnapshotCorruptedError
from procflow.records import Lease, RunSnapshot, RunStatus, StepResult, TraceRecord
from procflow.storage._sql import RunRows, lease_request, run_rows, trace_row
from procflow.storage.base import Storage
from procflow.storage.codec import (
    listed_snapshot,
    load_run,
    load_trace_header,
    load_trace_json,
)
from procflow.storage.retention import PrunedRun

__all__ = ["SQLiteStorage"]



# Writes of at most this many characters of JSON are tried on the event loop's thread
# first (``SQLiteFile.run(small=True)``): the hop to a worker thread costs more.
_SMALL: Final = 64 * 1024

_TRACE_HEADER: Final = ("run_id", "workflow_id", "status", "started_at", "ended_at")

_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS runs (
        workflow_id TEXT NOT NULL,
        run_id      TEXT NOT NULL,
        status      TEXT NOT NULL,
        created_at  REAL NOT NULL,
        updated_at  REAL NOT NULL,
        snapshot    TEXT NOT NULL,
        PRIMARY KEY (workflow_id, run_id)
    )""",
    """CREATE INDEX IF NOT EXISTS runs_by_status
        ON runs (workflow_id, status, updated_at)""",
    "CREATE INDEX IF NOT EXISTS runs_by_time ON runs (updated_at)",
    """CREATE TABLE IF NOT EXISTS steps (
        workflow_id TEXT NOT NULL,
        run_id      TEXT NOT NULL,
        path        TEXT NOT NULL,
        result      TEXT NOT NULL,
        PRIMARY KEY (workflow_id, run_id, path)
    )""",
    # ``data`` is last so that reading the header columns never touches its overflow
    # pages; it is TEXT, not JSON (a JSON-typed column would have NUMERIC affinity).
    """CREATE TABLE IF NOT EXISTS traces (
        run_id      TEXT NOT NULL PRIMARY KEY,
        workflow_id TEXT NOT NULL,
        status      TEXT NOT NULL,
        started_at  REAL NOT NULL,
        ended_at    REAL,
        data        TEXT NOT NULL
    )""",
    """CREATE INDEX IF NOT EXISTS traces_by_workflow
        ON traces (workflow_id, started_at)""",
    "CREATE INDEX IF NOT EXISTS traces_by_status ON traces (status, started_at)",
    "CREATE INDEX IF NOT EXISTS traces_by_time ON traces (started_at)",
    # An agent stream's chunks as they were produced (``append_stream``), one row each.
    """CREATE TABLE IF NOT EXISTS streams (
        workflow_id TEXT NOT NULL,
        run_id      TEXT NOT NULL,
        position    INTEGER NOT NULL,
        item        TEXT NOT NULL,
        PRIMARY KEY (workflow_id, run_id, position)
    )""",
    """CREATE TABLE IF NOT EXISTS leases (
        workflow_id TEXT NOT NULL,
        run_id      TEXT NOT NULL,
        owner       TEXT NOT NULL,
        expires_at  REAL NOT NULL,
        PRIMARY KEY (workflow_id, run_id)
    )""",
)

# A finished run, only if it is as listed (status, last write) and holds no live lease.
_DELETE_FINISHED: Final = """
    DELETE FROM runs WHERE workflow_id = ? AND run_id = ? AND status = ? AND updated_at = ?
    AND NOT EXISTS (SELECT 1 FROM leases WHERE leases.workflow_id = runs.workflow_id
                    AND leases.run_id = runs.run_id AND expires_at > ?)"""

# a trace whose run has no record (an ephemeral run's)
_NO_RUN: Final = ("NOT EXISTS (SELECT 1 FROM runs WHERE runs.workflow_id = traces.workflow_id "
                  "AND runs.run_id = traces.run_id)")
_DELETE_ORPHAN_TRACE: Final = f"""
    DELETE FROM traces WHERE run_id = ? AND workflow_id = ? AND status = ?
    AND COALESCE(ended_at, started_at) = ? AND {_NO_RUN}"""

_UPSERT_RUN: Final = """
    INSERT INTO runs (workflow_id, run_id, status, created_at, updated_at, snapshot)
    VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (workflow_id, run_id) DO UPDATE SET
        status = excluded.status, created_at = excluded.created_at,
        updated_at = excluded.updated_at, snapshot = excluded.snapshot
"""
_UPSERT_STEP: Final = """
    INSERT INTO steps (workflow_id, run_id, path, result) VALUES (?, ?, ?, ?)
    ON CONFLICT (workflow_id, run_id, path) DO UPDATE SET result = excluded.result
"""
# An upsert, not INSERT OR REPLACE: the rowid (the tie-break of listings) is kept.
_UPSERT_TRACE: Final = """
    INSERT INTO traces (run_id, workflow_id, status, started_at, ended_at, data)
    VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (run_id) DO UPDATE SET
        workflow_id = excluded.workflow_id, status = excluded.status,
        started_at = excluded.started_at, ended_at = excluded.ended_at, data = excluded.data
"""
# The header JSON carries the status too; keep both in step within one statement.
_CLAIM: Final = """
    UPDATE runs SET status = :new, snapshot = json_set(snapshot, '$.status', :new)
    WHERE workflow_id = :workflow_id AND run_id = :run_id AND status = :expected
"""
# Taken if free, expired, or already the taker's; the upsert is one atomic statement.
_ACQUIRE: Final = """
    INSERT INTO leases (workflow_id, run_id, owner, expires_at)
    VALUES (:workflow_id, :run_id, :owner, :expires_at)
    ON CONFLICT (workflow_id, run_id) DO UPDATE SET
        owner = excluded.owner, expires_at = excluded.expires_at
    WHERE leases.owner = excluded.owner OR leases.expires_at <= :now
        OR leases.owner = :steal_from
"""
_RELEASE: Final = "DELETE FROM leases WHERE workflow_id = ? AND run_id = ? AND owner = ?"


@final
class SQLiteStorage(AsyncResource, Storage):
    """A ``Storage`` in one SQLite file, safe to share between processes.

    The file, its parent directories and the schema are created on first use.

    Args:
        path: The database file (e.g. ``".procflow/procflow.db"``).
        timeout: Seconds an operation waits for another connection's lock (SQLite's
            busy timeout, then retries until the same deadline) before it fails with
            ``StorageError``.

    Example:
        ```python
        async with SQLiteStorage(".procflow/procflow.db") as storage:
            run = wf.create_run(storage=storage)
            await run.start(input_data={"value": 2})
        ```
    """

    persistent = True
    keeps_objects = False
    process_local = False
    keeps_streams = True

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = BUSY_TIMEOUT) -> None:
        self._file = SQLiteFile(path, schema=_SCHEMA, name="SQLite storage",
                                reopen="create a new SQLiteStorage to use the file again",
                                busy_timeout=timeout)

    @property
    def path(self) -> Path:
        """The database file."""
        return self._file.path

    def __repr__(self) -> str:
        return f"SQLiteStorage({str(self._file.path)!r})"

    # ------------------------------------------------------------------ Storage

    async def save_snapshot(self, snapshot: RunSnapshot,
                            steps: Mapping[str, StepResult]) -> None:
        """Upsert the run row and the given step rows in one transaction.

        Raises:
            StorageError: The database could not be written.
        """
        rows = run_rows(snapshot, steps)

        def save(connection: sqlite3.Connection) -> None:
            with transaction(connection):
                _save_rows(connection, rows)

        await self._file.run(f"saving run {snapshot.run_id!r} of workflow "
                             f"{snapshot.workflow_id!r}", save, small=_size(rows) <= _SMALL)

    async def acquire_and_save(self, snapshot: RunSnapshot, steps: Mapping[str, StepResult],
                               *, owner: str, ttl: float) -> Lease | None:
        """Take the run's lease and, if taken, upsert the run and step rows, in one
        transaction (see ``Storage.acquire_and_save``).

        Raises:
            ValueError: ``ttl`` is not a finite number > 0.
            StorageError: The database could not be written.
        """
        request = lease_request(snapshot.workflow_id, snapshot.run_id, owner=owner, ttl=ttl,
                                steal_from=None)
        rows = run_rows(snapshot, steps)

        def save(connection: sqlite3.Connection) -> bool:
            with transaction(connection):
                if connection.execute(_ACQUIRE, request.params).rowcount <= 0:
                    return False
                _save_rows(connection, rows)
                return True

        taken = await self._file.run(f"starting run {snapshot.run_id!r} of workflow "
                                     f"{snapshot.workflow_id!r}", save,
                                     small=_size(rows) <= _SMALL)
        return Lease(owner, request.expires_at) if taken else None

    async def save_and_release(self, snapshot: RunSnapshot, steps: Mapping[str, StepResult],
                               *, trace: TraceRecord | None, owner: str | None) -> None:
        """Upsert the trace row, the run and step rows and delete ``owner``'s lease row,
        in one transaction (see ``Storage.save_and_release``).

        Raises:
            StorageError: The database could not be written.
        """
        rows = run_rows(snapshot, steps)
        trace_data = None if trace is None else trace_row(trace)
        release = None if owner is None else (snapshot.workflow_id, snapshot.run_id, owner)

        def save(connection: sqlite3.Connection) -> None:
            with transaction(connection):
                if trace_data is not None:
                    connection.execute(_UPSERT_TRACE, trace_data)
                _save_rows(connection, rows)
                if release is not None:
                    connection.execute(_RELEASE, release)

        size = _size(rows) + (0 if trace_data is None else len(trace_data[5]))
        await self._file.run(f"saving run {snapshot.run_id!r} of workflow "
                             f"{snapshot.workflow_id!r}", save, small=size <= _SMALL)

    async def load_snapshot(self, workflow_id: str, run_id: str,
                            ) -> tuple[RunSnapshot, dict[str, StepResult]] | None:
        """Load the run's header and all its step results, or ``None`` if not stored.

        Raises:
            SnapshotCorruptedError: A stored row cannot be decoded (it is left as is).
            StorageError: The database could not be read.
        """
        key = (workflow_id, run_id)

        def load(connection: sqlite3.Connection) -> tuple[bytes, list[tuple[bytes, bytes]]] | None:
            with raw_text(connection), transaction(connection, "BEGIN"):  # one read snapshot
                row = connection.execute(
                    "SELECT snapshot FROM runs WHERE workflow_id = ? AND run_id = ?", key,
                ).fetchone()
                if row is None:
                    return None
                steps = connection.execute(
                    "SELECT path, result FROM steps WHERE workflow_id = ? AND run_id = ?", key,
                ).fetchall()
            return row[0], steps

        rows = await self._file.run(f"loading run {run_id!r} of workflow {workflow_id!r}", load)
        if rows is None:
            return None
        header, step_rows = rows
        return load_run(_text(header), [(_path(path, workflow_id=workflow_id, run_id=run_id),
                                         _text(result)) for path, result in step_rows],
                        workflow_id=workflow_id, run_id=run_id)

    async def list_runs(self, *, workflow_id: str | None = None,
                        status: RunStatus | None = None,
                        limit: int | None = None) -> list[RunSnapshot]:
        """Stored headers, newest first by ``updated_at`` (ties: first stored last).

        Raises:
            StorageError: The database could not be read.
        """
        if limit is not None and limit <= 0:
            return []
        where, params = _filters(workflow_id, status, limit)
        query = (f"SELECT workflow_id, run_id, snapshot, updated_at FROM runs {where} "
                 "ORDER BY updated_at DESC, rowid DESC LIMIT ?")

        def select(connection: sqlite3.Connection) -> list[tuple[Any, Any, Any, Any]]:
            with raw_text(connection):
                return connection.execute(query, params).fetchall()

        rows = await self._file.run("listing runs", select)
        return [listed_snapshot(_text(header), workflow_id=_text_id(wf), run_id=_text_id(run),
                                updated_at=_time(updated))
                for wf, run, header, updated in rows]

    async def delete_run(self, workflow_id: str, run_id: str) -> None:
        """Delete the run row, its step rows, its lease and its trace in one transaction
        (no error if unknown)."""
        key = (workflow_id, run_id)

        def delete(connection: sqlite3.Connection) -> None:
            with transaction(connection):
                connection.execute("DELETE FROM runs WHERE workflow_id = ? AND run_id = ?",
                                   key)
                _delete_rows_of(connection, key)

        await self._file.run(f"deleting run {run_id!r} of workflow {workflow_id!r}", delete)

    async def list_finished(self, *, before: float, workflow_id: str | None,
                            statuses: frozenset[str]) -> list[PrunedRun]:
        """Finished runs with a status in ``statuses`` last updated before ``before``,
        oldest first, read off the status and time columns (no header is decoded).

        Raises:
            StorageError: The database could not be read.
        """
        marks = ", ".join("?" * len(statuses))
        query = (f"SELECT workflow_id, run_id, status, updated_at FROM runs WHERE "
                 f"updated_at < ? AND status IN ({marks})"
                 + ("" if workflow_id is None else " AND workflow_id = ?")
                 + " ORDER BY updated_at, workflow_id, run_id")
        params: list[Any] = [before, *sorted(statuses)]
        if workflow_id is not None:
            params.append(workflow_id)

        def select(connection: sqlite3.Connection) -> list[tuple[Any, ...]]:
            return connection.execute(query, params).fetchall()

        rows = await self._file.run("listing finished runs", select)
        return [PrunedRun(_text_id(wf), _text_id(run), str(status), _time(updated))
                for wf, run, status, updated in rows]

    async def delete_finished(self, runs: Sequence[PrunedRun]) -> list[PrunedRun]:
        """Delete, in one transaction, each of ``runs`` (header, step results, lease,
        trace) that is still as listed and holds no live lease; return those deleted.

        Raises:
            StorageError: The database could not be written.
        """
        def delete(connection: sqlite3.Connection) -> list[PrunedRun]:
            now = time.time()
            deleted: list[PrunedRun] = []
            with transaction(connection):
                for run in runs:
                    key = (run.workflow_id, run.run_id)
                    if not connection.execute(_DELETE_FINISHED,
                                              (*key, run.status, run.updated_at, now)).rowcount:
                        continue
                    _delete_rows_of(connection, key)
                    deleted.append(run)
            return deleted

        return await self._file.run(f"deleting {len(runs)} finished runs", delete)

    async def list_orphan_traces(self, *, before: float, workflow_id: str | None,
                                 statuses: frozenset[str] | None) -> list[PrunedRun]:
        """Traces with no run record that ended before ``before``, with a status in
        ``statuses`` (``None``: any), oldest first (no trace document is decoded).

        Raises:
            StorageError: The database could not be read.
        """
        query = ("SELECT workflow_id, run_id, status, COALESCE(ended_at, started_at) AS at "
                 "FROM traces WHERE COALESCE(ended_at, started_at) < ?"
                 + ("" if statuses is None else
                    f" AND status IN ({', '.join('?' * len(statuses))})")
                 + ("" if workflow_id is None else " AND workflow_id = ?")
                 + f" AND {_NO_RUN} ORDER BY at, workflow_id, run_id")
        params: list[Any] = [before, *sorted(statuses or ())]
        if workflow_id is not None:
            params.append(workflow_id)

        def select(connection: sqlite3.Connection) -> list[tuple[Any, ...]]:
            return connection.execute(query, params).fetchall()

        rows = await self._file.run("listing traces without a run", select)
        return [PrunedRun(_text_id(wf), _text_id(run), str(status), _time(at), trace_only=True)
                for wf, run, status, at in rows]

    async def delete_orphan_traces(self, traces: Sequence[PrunedRun]) -> list[PrunedRun]:
        """Delete, in one transaction, each of ``traces`` that is still as listed and
        still has no run record; return those deleted.

        Raises:
            StorageError: The database could not be written.
        """
        def delete(connection: sqlite3.Connection) -> list[PrunedRun]:
            deleted: list[PrunedRun] = []
            with transaction(connection):
                for trace in traces:
                    if connection.execute(_DELETE_ORPHAN_TRACE, (
                            trace.run_id, trace.workflow_id, trace.status,
                            trace.updated_at)).rowcount:
                        deleted.append(trace)
            return deleted

        return await self._file.run(f"deleting {len(traces)} traces without a run", delete)

    async def claim_run(self, workflow_id: str, run_id: str, *, expected: RunStatus,
                        new: RunStatus) -> bool:
        """Atomically set the run's status to ``new`` if it is ``expected``.

        Raises:
            SnapshotCorruptedError: The run's stored header is not valid JSON.
            StorageError: The database could not be written.
        """
        params = {"workflow_id": workflow_id, "run_id": run_id, "expected": expected,
                  "new": new}

        def claim(connection: sqlite3.Connection) -> bool:
            with transaction(connection):
                try:
                    cursor = connection.execute(_CLAIM, params)
                except sqlite3.OperationalError as exc:
                    if "malformed JSON" not in str(exc):
                        raise
                    raise SnapshotCorruptedError(
                        f"Stored snapshot of run {run_id!r} of workflow {workflow_id!r} is "
                        f"corrupted: {exc}. The stored data was left as it is; delete the "
                        "run with delete_run() or restore it from a backup.",
                        workflow_id=workflow_id, run_id=run_id) from exc
                return cursor.rowcount > 0

        return await self._file.run(f"claiming run {run_id!r} of workflow {workflow_id!r}",
                                    claim, small=True)

    async def acquire_lease(self, workflow_id: str, run_id: str, *, owner: str,
                            ttl: float, steal_from: str | None = None) -> Lease | None:
        """Take or renew the run's lease in one upsert (see ``Storage.acquire_lease``).

        Raises:
            ValueError: ``ttl`` is not a finite number > 0.
            StorageError: The database could not be written.
        """
        request = lease_request(workflow_id, run_id, owner=owner, ttl=ttl,
                                steal_from=steal_from)

        def acquire(connection: sqlite3.Connection) -> bool:
            with transaction(connection):
                return connection.execute(_ACQUIRE, request.params).rowcount > 0

        taken = await self._file.run(f"taking the lease of run {run_id!r}", acquire,
                                     small=True)
        return Lease(owner, request.expires_at) if taken else None

    async def release_lease(self, workflow_id: str, run_id: str, *, owner: str) -> None:
        """Delete the lease row if ``owner`` holds it."""
        params = (workflow_id, run_id, owner)

        def release(connection: sqlite3.Connection) -> None:
            with transaction(connection):
                connection.execute(_RELEASE, params)

        await self._file.run(f"releasing the lease of run {run_id!r}", release, small=True)

    async def get_lease(self, workflow_id: str, run_id: str) -> Lease | None:
        """The run's live lease, or ``None``."""
        params = (workflow_id, run_id, time.time())

        def select(connection: sqlite3.Connection) -> tuple[Any, Any] | None:
            row: tuple[Any, Any] | None = connection.execute(
                "SELECT owner, expires_at FROM leases WHERE workflow_id = ? AND run_id = ? "
                "AND expires_at > ?", params).fetchone()
            return row

        row = await self._file.run(f"reading the lease of run {run_id!r}", select)
        return None if row is None else Lease(str(row[0]), float(row[1]))

    async def append_stream(self, workflow_id: str, run_id: str, items: Sequence[str], *,
                            start: int) -> None:
        """Insert the stream log rows ``start``, ... in one transaction (``start == 0``
        first deletes the run's old log; a position already stored is kept).

        Raises:
            StorageError: The database could not be written.
        """
        key = (workflow_id, run_id)
        rows = [(workflow_id, run_id, start + i, item) for i, item in enumerate(items)]

        def append(connection: sqlite3.Connection) -> None:
            with transaction(connection):
                if start == 0:
                    connection.execute(
                        "DELETE FROM streams WHERE workflow_id = ? AND run_id = ?", key)
                connection.executemany(
                    "INSERT OR IGNORE INTO streams (workflow_id, run_id, position, item) "
                    "VALUES (?, ?, ?, ?)", rows)

        await self._file.run(f"appending to the stream log of run {run_id!r}", append,
                             small=sum(len(item) for item in items) <= _SMALL)

    async def read_stream(self, workflow_id: str, run_id: str, *, start: int = 0,
                          ) -> list[str]:
        """The stream log rows from position ``start`` on.

        Raises:
            StorageError: The database could not be read.
        """
        params = (workflow_id, run_id, start)

        def select(connection: sqlite3.Connection) -> list[str]:
            return [str(row[0]) for row in connection.execute(
                "SELECT item FROM streams WHERE workflow_id = ? AND run_id = ? AND "
                "position >= ? ORDER BY position", params)]

        return await self._file.run(f"reading the stream log of run {run_id!r}", select)

    async def save_trace(self, trace: TraceRecord) -> None:
        """Upsert the trace row (header columns and the JSON document with the spans).

        Raises:
            StorageError: The database could not be written.
        """
        row = trace_row(trace)

        def save(connection: sqlite3.Connection) -> None:
            with transaction(connection):
                connection.execute(_UPSERT_TRACE, row)

        await self._file.run(f"saving the trace of run {trace.run_id!r}", save,
                             small=len(row[5]) <= _SMALL)

    async def load_trace(self, run_id: str) -> TraceRecord | None:
        """The trace of the run, spans included, or ``None`` if none is stored.

        Raises:
            SnapshotCorruptedError: The stored document cannot be decoded (it is left
                as is).
            StorageError: The database could not be read.
        """

        def load(connection: sqlite3.Connection) -> tuple[object] | None:
            with raw_text(connection):
                row: tuple[object] | None = connection.execute(
                    "SELECT data FROM traces WHERE run_id = ?", (run_id,)).fetchone()
            return row

        row = await self._file.run(f"loading the trace of run {run_id!r}", load)
        if row is None:
            return None
        return load_trace_json(_text(row[0]), run_id=run_id)

    async def list_traces(self, *, workflow_id: str | None = None, status: str | None = None,
                          limit: int | None = None) -> list[TraceRecord]:
        """Stored traces without their spans, newest first by ``started_at`` (ties: first
        stored last). Only the header columns are read, never the span documents.

        Raises:
            SnapshotCorruptedError: A listed trace's header columns have the wrong types.
            StorageError: The database could not be read.
        """
        if limit is not None and limit <= 0:
            return []
        where, params = _filters(workflow_id, status, limit)
        query = (f"SELECT {', '.join(_TRACE_HEADER)} FROM traces {where} "
                 "ORDER BY started_at DESC, rowid DESC LIMIT ?")

        def select(connection: sqlite3.Connection) -> list[tuple[Any, ...]]:
            with raw_text(connection):
                return connection.execute(query, params).fetchall()

        rows = await self._file.run("listing traces", select)
        return [load_trace_header(
                    dict(zip(_TRACE_HEADER, map(_lenient, row), strict=True)),
                    run_id=_text_id(row[0]))
                for row in rows]

    async def aclose(self) -> None:
        """Close the connection; later calls raise ``StorageError``."""
        await self._file.aclose()



def _save_rows(connection: sqlite3.Connection, rows: RunRows) -> None:
    """Upsert a run's header row and step rows (inside a transaction)."""
    connection.execute(_UPSERT_RUN, rows.run)
    if rows.steps:
        connection.executemany(_UPSERT_STEP, rows.steps)


def _size(rows: RunRows) -> int:
    """Characters of JSON in a run's rows."""
    return len(rows.run[5]) + sum(len(row[3]) for row in rows.steps)


def _filters(workflow_id: str | None, status: str | None,
             limit: int | None) -> tuple[str, list[Any]]:
    """A listing's WHERE clause and its parameters, the LIMIT's last (-1: no limit)."""
    clauses: list[str] = []
    params: list[Any] = []
    for column, value in (("workflow_id", workflow_id), ("status", status)):
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(value)
    params.append(-1 if limit is None else limit)
    return (f"WHERE {' AND '.join(clauses)}" if clauses else ""), params


def _delete_rows_of(connection: sqlite3.Connection, key: tuple[str, str]) -> None:
    """Delete what a run has besides its header row: step rows, lease, trace, stream log."""
    for table in ("steps", "leases", "traces", "streams"):
        connection.execute(f"DELETE FROM {table} WHERE workflow_id = ? AND run_id = ?", key)


def _text_id(value: object) -> str:
    """A stored id column as text, for messages (garbage of another type included;
    bytes that are not UTF-8 with their bad bytes as ``\\xff`` escapes)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return value if isinstance(value, str) else repr(value)


def _lenient(value: object) -> object:
    """A column read by ``raw_text`` as ``str`` (damaged text with escapes), other
    types as they are: the header check then judges the types."""
    return _text_id(value) if isinstance(value, bytes) else value


def _path(value: object, *, workflow_id: str, run_id: str) -> str:
    """A stored step path (read as bytes); not UTF-8: the run is corrupted."""
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            pass
    if isinstance(value, str):
        return value
    raise SnapshotCorruptedError(
        f"Stored step row of run {run_id!r} of workflow {workflow_id!r} is corrupted: its "
        f"path {value!r} is not text. The stored data was left as it is; delete the run "
        "with delete_run() or restore it from a backup.",
        workflow_id=workflow_id, run_id=run_id)


def _time(value: object) -> float:
    """A stored time column as a float (0 for garbage)."""
    return float(value) if isinstance(value, int | float) else 0.0


def _text(value: object) -> str | bytes:
    """A stored JSON column as the codec takes it (garbage of another type included)."""
    return value if isinstance(value, str | bytes) else str(value)
