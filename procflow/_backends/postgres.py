"""PostgreSQL plumbing shared by ``PostgresStorage`` and ``PostgresMemoryStore``.

One ``PostgresPool`` is a lazily opened ``psycopg_pool.AsyncConnectionPool`` (psycopg 3,
autocommit connections, asyncio only) whose connections use one schema. The first
connection creates or upgrades that schema under an advisory lock, so several processes
starting at once migrate it once. Versions are recorded in ``procflow_schema``::

    procflow_schema(id = 1, version)          -- the schema version of every table below
    v1: procflow_runs, procflow_steps, procflow_traces,
        procflow_threads, procflow_messages, procflow_working_memory
    v2: procflow_embeddings, procflow_embedding_scopes, procflow_embedding_cache
    v3: procflow_leases

An older schema is upgraded in place (every missing step, in one transaction); tables
made before the version table existed ("version 0") are adopted, since every step only
creates what is missing. A newer schema is refused with a ``StorageError`` naming both
versions. ``psycopg`` is imported only when a pool is created.
"""

from __future__ import annotations

import math
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Final, final

import anyio
import sniffio

from procflow._backends.deadline import shielded
from procflow._extras import MissingExtraError, needs
from procflow.errors import ProcflowError, StorageError

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "PostgresPool", "display_dsn"]

_SCHEMA_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_CONNECT_TIMEOUT: Final = 10.0
OPERATION_TIMEOUT: Final = 30.0
"""Seconds one storage operation (a pooled connection's statements) may take by default."""
_LOCK_KEY: Final = 0x70726F63  # "proc": the advisory lock of schema migrations

MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    (  # v1: runs, traces and memory
        """CREATE TABLE IF NOT EXISTS procflow_runs (
            workflow_id TEXT NOT NULL,
            run_id      TEXT NOT NULL,
            status      TEXT NOT NULL,
            created_at  DOUBLE PRECISION NOT NULL,
            updated_at  DOUBLE PRECISION NOT NULL,
            seq         BIGINT GENERATED ALWAYS AS IDENTITY,
            snapshot    TEXT NOT NULL,
            PRIMARY KEY (workflow_id, run_id))""",
        """CREATE INDEX IF NOT EXISTS procflow_runs_by_status
            ON procflow_runs (workflow_id, status, updated_at)""",
        "CREATE INDEX IF NOT EXISTS procflow_runs_by_time ON procflow_runs (updated_at)",
        """CREATE TABLE IF NOT EXISTS procflow_steps (
            workflow_id TEXT NOT NULL,
            run_id      TEXT NOT NULL,
            path        TEXT NOT NULL,
            result      TEXT NOT NULL,
            PRIMARY KEY (workflow_id, run_id, path))""",
        """CREATE TABLE IF NOT EXISTS procflow_traces (
            run_id      TEXT PRIMARY KEY,
            workflow_id TEXT NOT NULL,
            status      TEXT NOT NULL,
            started_at  DOUBLE PRECISION NOT NULL,
            ended_at    DOUBLE PRECISION,
            seq         BIGINT GENERATED ALWAYS AS IDENTITY,
            data        TEXT NOT NULL)""",
        """CREATE INDEX IF NOT EXISTS procflow_traces_by_workflow
            ON procflow_traces (workflow_id, started_at)""",
        "CREATE INDEX IF NOT EXISTS procflow_traces_by_time ON procflow_traces (started_at)",
        """CREATE TABLE IF NOT EXISTS procflow_threads (
            id          TEXT PRIMARY KEY,
            resource_id TEXT,
            title       TEXT,
            metadata    TEXT NOT NULL,
            created_at  DOUBLE PRECISION NOT NULL,
            updated_at  DOUBLE PRECISION NOT NULL)""",
        """CREATE INDEX IF NOT EXISTS procflow_threads_by_resource
            ON procflow_threads (resource_id, updated_at)""",
        """CREATE TABLE IF NOT EXISTS procflow_messages (
            seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id          TEXT NOT NULL UNIQUE,
            thread_id   TEXT NOT NULL,
            resource_id TEXT,
            hidden      BOOLEAN NOT NULL DEFAULT FALSE,
            data        TEXT NOT NULL)""",
        """CREATE INDEX IF NOT EXISTS procflow_messages_by_thread
            ON procflow_messages (thread_id, seq)""",
        """CREATE TABLE IF NOT EXISTS procflow_working_memory (
            key        TEXT PRIMARY KEY,
            value      TEXT NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL)""",
    ),
    (  # v2: message vectors, per embedding space, and the embedding cache
        """CREATE INDEX IF NOT EXISTS procflow_messages_by_resource
            ON procflow_messages (resource_id, seq)""",
        "CREATE SEQUENCE IF NOT EXISTS procflow_embedding_seq",
        """CREATE TABLE IF NOT EXISTS procflow_embeddings (
            space       TEXT NOT NULL,
            message_id  TEXT NOT NULL,
            thread_id   TEXT NOT NULL,
            resource_id TEXT,
            seq         BIGINT NOT NULL DEFAULT nextval('procflow_embedding_seq'),
            vector      BYTEA,
            PRIMARY KEY (space, message_id))""",
        """CREATE INDEX IF NOT EXISTS procflow_embeddings_by_thread
            ON procflow_embeddings (space, thread_id, seq)""",
        """CREATE INDEX IF NOT EXISTS procflow_embeddings_by_resource
            ON procflow_embeddings (space, resource_id, seq)""",
        """CREATE TABLE IF NOT EXISTS procflow_embedding_scopes (
            space   TEXT NOT NULL,
            scope   TEXT NOT NULL,
            version BIGINT NOT NULL,
            PRIMARY KEY (space, scope))""",
        """CREATE TABLE IF NOT EXISTS procflow_embedding_cache (
            model  TEXT NOT NULL,
            hash   TEXT NOT NULL,
            vector BYTEA NOT NULL,
            PRIMARY KEY (model, hash))""",
    ),
    (  # v3: the leases of runs being executed
        """CREATE TABLE IF NOT EXISTS procflow_leases (
            workflow_id TEXT NOT NULL,
            run_id      TEXT NOT NULL,
            owner       TEXT NOT NULL,
            expires_at  DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (workflow_id, run_id))""",
    ),
    (  # v4: agent streams' chunks as they were produced (``append_stream``)
        """CREATE TABLE IF NOT EXISTS procflow_streams (
            workflow_id TEXT NOT NULL,
            run_id      TEXT NOT NULL,
            position    INTEGER NOT NULL,
            item        TEXT NOT NULL,
            PRIMARY KEY (workflow_id, run_id, position))""",
    ),
)
SCHEMA_VERSION: Final = len(MIGRATIONS)
"""The schema version this procflow writes (``procflow_schema.version``)."""


def display_dsn(dsn: str) -> str:
    """``dsn`` without its password, for messages."""
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        return "<PostgreSQL DSN>"
    try:
        parts = conninfo_to_dict(dsn)
    except ProcflowError:
        raise
    except Exception:
        return "<invalid PostgreSQL DSN>"
    host = parts.get("host") or "localhost"
    port = parts.get("port") or 5432
    return f"postgresql://{parts.get('user') or ''}@{host}:{port}/{parts.get('dbname') or ''}"


def _import_psycopg() -> None:
    try:
        with needs("postgres", feature="PostgreSQL storage"):
            import psycopg  # noqa: F401
            import psycopg_pool  # noqa: F401
    except MissingExtraError as exc:
        raise StorageError(str(exc)) from None


@final
class PostgresPool:
    """A connection pool on one database and schema, opened and migrated on first use.

    Args:
        dsn: A libpq connection string or URL (``"postgresql://user@host/db"``).
        schema: The schema holding procflow's tables (created if missing, with
            ``create``).
        max_size: At most this many connections.
        create: Whether the first connection may create the schema and tables; with
            ``False`` a schema without them is a ``StorageError`` (nothing created).
        timeout: Seconds an operation (waiting for a pooled connection included) may
            take before it is given up with ``StorageError`` (``None``: no limit); a
            frozen server or network then fails the operation instead of hanging it.
    """

    def __init__(self, dsn: str, *, schema: str = "public", max_size: int = 10,
                 create: bool = True, timeout: float | None = OPERATION_TIMEOUT) -> None:
        if not isinstance(schema, str) or not _SCHEMA_NAME.fullmatch(schema):
            raise ValueError(f"schema must be a plain SQL identifier (letters, digits, _), "
                             f"got {schema!r}")
        if max_size < 1:
            raise ValueError(f"max_size must be >= 1, got {max_size}")
        _import_psycopg()
        self.dsn = dsn
        self.schema = schema
        self.display = display_dsn(dsn)
        self._max_size = max_size
        self._create = create
        self._timeout = timeout
        self._pool: AsyncConnectionPool | None = None
        self._lock = anyio.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return f"PostgresPool({self.display!r}, schema={self.schema!r})"

    @contextmanager
    def translate(self, operation: str) -> Iterator[None]:
        """Turn psycopg's errors into ``StorageError`` naming the operation (no password)."""
        import psycopg
        import psycopg_pool

        try:
            yield
        except (psycopg.Error, psycopg_pool.PoolTimeout, OSError) as exc:
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() \
                else type(exc).__name__
            raise StorageError(f"PostgreSQL at {self.display} (schema {self.schema!r}): "
                               f"{operation} failed: {detail}") from exc

    @asynccontextmanager
    async def connection(self, operation: str) -> AsyncIterator[AsyncConnection]:
        """A pooled autocommit connection; errors inside become ``StorageError``.

        Raises:
            StorageError: The pool is closed, the server cannot be reached, the schema is
                newer than this procflow, or the statement failed.
        """
        pool = await self._open(operation)
        limit = math.inf if self._timeout is None else self._timeout
        with anyio.move_on_after(limit) as deadline, self.translate(operation):
            async with pool.connection() as connection:
                yield connection
        if deadline.cancelled_caught:
            raise StorageError(f"PostgreSQL at {self.display} (schema {self.schema!r}): "
                               f"{operation} failed: no answer within {self._timeout:g} s")

    async def _open(self, operation: str) -> AsyncConnectionPool:
        if self._pool is not None and not self._closed:
            return self._pool
        if sniffio.current_async_library() != "asyncio":
            raise StorageError("PostgreSQL storage runs on asyncio event loops only "
                               "(psycopg_pool); run it under asyncio, not trio")
        async with self._lock:
            if self._closed:
                raise StorageError(f"PostgreSQL storage at {self.display} is closed; create "
                                   "a new one to use the database again.")
            if self._pool is None:
                from psycopg_pool import AsyncConnectionPool

                pool = AsyncConnectionPool(
                    self.dsn, min_size=1, max_size=self._max_size, open=False,
                    kwargs={"autocommit": True,
                            "options": f"-c search_path={self.schema}"},
                    check=AsyncConnectionPool.check_connection)
                with self.translate(f"{operation} (connecting)"):
                    try:
                        # One connection first: a wrong address, user, password or
                        # database fails at once with the server's own reason, where the
                        # pool retries for _CONNECT_TIMEOUT seconds and then says only
                        # that it timed out.
                        await self._first_connection()
                        await pool.open(wait=True, timeout=_CONNECT_TIMEOUT)
                    except BaseException:
                        await pool.close()
                        raise
                self._pool = pool
        return self._pool

    async def _first_connection(self) -> None:
        """Connect once (within ``_CONNECT_TIMEOUT``) and bring the schema up to date."""
        import psycopg

        try:
            with anyio.fail_after(_CONNECT_TIMEOUT):
                first = await psycopg.AsyncConnection.connect(
                    self.dsn, autocommit=True, options=f"-c search_path={self.schema}")
        except TimeoutError:
            raise StorageError(f"PostgreSQL at {self.display}: no connection within "
                               f"{_CONNECT_TIMEOUT:g} s") from None
        try:
            if not self._create and await schema_version(first, self.schema) == 0:
                raise StorageError(f"PostgreSQL at {self.display}: no procflow tables in "
                                   f"schema {self.schema!r} (the first run stored there "
                                   "makes them; nothing was created)")
            await migrate(first, self.schema, where=self.display)
        finally:
            await first.close()

    async def aclose(self) -> None:
        """Close every connection; later calls raise ``StorageError``."""
        async with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            with shielded(f"closing the connections to {self.display}"):
                await pool.close()


async def schema_version(connection: AsyncConnection, schema: str) -> int:
    """The recorded schema version (0 when procflow's tables were never created)."""
    cursor = await connection.execute(
        "SELECT to_regclass(%s) IS NOT NULL", (f"{schema}.procflow_schema",))
    row = await cursor.fetchone()
    if row is None or not row[0]:
        return 0
    cursor = await connection.execute("SELECT version FROM procflow_schema WHERE id = 1")
    found = await cursor.fetchone()
    return 0 if found is None else int(found[0])


async def migrate(connection: AsyncConnection, schema: str, *, where: str) -> int:
    """Create or upgrade the schema to ``SCHEMA_VERSION``; returns the version found.

    Raises:
        StorageError: The schema was written by a newer procflow.
    """
    async with connection.transaction():
        await connection.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        await connection.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        await connection.execute(
            "CREATE TABLE IF NOT EXISTS procflow_schema (id INTEGER PRIMARY KEY CHECK (id = 1), "
            "version INTEGER NOT NULL)")
        found = await schema_version(connection, schema)
        if found > SCHEMA_VERSION:
            raise StorageError(
                f"PostgreSQL at {where}: schema {schema!r} has procflow schema version "
                f"{found}, newer than this procflow understands ({SCHEMA_VERSION}); "
                "upgrade procflow, or point it at another schema or database")
        for statements in MIGRATIONS[found:]:
            for statement in statements:
                await connection.execute(statement)
        if found < SCHEMA_VERSION:
            await connection.execute(
                "INSERT INTO procflow_schema (id, version) VALUES (1, %s) ON CONFLICT (id) "
                "DO UPDATE SET version = excluded.version", (SCHEMA_VERSION,))
    return found
