"""One SQLite file shared safely by threads and processes, for every SQLite-backed store.

The file is opened in WAL mode with a busy timeout (readers never block writers;
writers from other processes wait for each other), ``synchronous = NORMAL``, and
autocommit off the table (``isolation_level=None``) so that each write is one explicit
``BEGIN IMMEDIATE`` transaction. A "database is locked"/"busy" answer that SQLite gives
without waiting (a few WAL cases: another process switching the journal mode or
recovering the WAL index) is retried with exponential backoff until a deadline; the
transaction was rolled back, so trying again is safe.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Final, TypeVar, final

import anyio.to_thread

from procflow.errors import StorageError

__all__ = [
    "BUSY_TIMEOUT",
    "SQLiteFile",
    "connect",
    "is_busy",
    "raw_text",
    "retry_busy",
    "transaction",
]

_T = TypeVar("_T")

BUSY_TIMEOUT: Final = 10.0
"""Seconds SQLite waits for a lock, and the deadline of the retries after it."""

WAL_AUTOCHECKPOINT: Final = 8000
"""WAL pages (~32 MB) after which a commit checkpoints the WAL into the database file.
SQLite's default, 1,000, checkpointed every ~13 durable runs, each time inside a commit
(~15 ms on a 2-core VM); the same pages are rewritten run after run, so a checkpoint
every 8,000 pages copies each of them once for many runs: +26-30 % durable runs/s in one
sitting. Durability is the same (a commit is in the WAL either way)."""
_FIRST_DELAY: Final = 0.005
_MAX_DELAY: Final = 0.2


def connect(path: str | os.PathLike[str], *, busy_timeout: float = BUSY_TIMEOUT,
            ) -> sqlite3.Connection:
    """Open ``path`` (creating its parent directories) with procflow's pragmas.

    Args:
        path: The database file.
        busy_timeout: Seconds SQLite waits for another connection's lock.

    Returns:
        A connection usable from any thread (guard it with a lock), in WAL mode, with
        explicit transactions only.
    """
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None,
                                 check_same_thread=False)
    try:
        connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
        connection.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT}")
    except BaseException:
        connection.close()
        raise
    return connection


@final
class transaction:
    """``BEGIN IMMEDIATE`` (or the given BEGIN) ... ``COMMIT``, rolled back on any error.

    A class rather than a ``@contextmanager`` generator: every write makes one, and the
    generator's machinery costs more than the transaction's Python side otherwise.
    """

    __slots__ = ("_begin", "_connection")

    def __init__(self, connection: sqlite3.Connection, begin: str = "BEGIN IMMEDIATE") -> None:
        self._connection = connection
        self._begin = begin

    def __enter__(self) -> None:
        self._connection.execute(self._begin)

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        connection = self._connection
        if kind is None:
            try:
                connection.execute("COMMIT")
                return
            except BaseException:
                if connection.in_transaction:
                    connection.rollback()
                raise
        if connection.in_transaction:
            connection.rollback()


@contextmanager
def raw_text(connection: sqlite3.Connection) -> Iterator[None]:
    """TEXT values read as ``bytes`` inside (``text_factory = bytes``), for reads of
    stored documents: a value that is not valid UTF-8 (a damaged page, a foreign
    write) then reaches the caller, which decodes it per row, instead of failing the
    whole query ("Could not decode to UTF-8")."""
    connection.text_factory = bytes
    try:
        yield
    finally:
        connection.text_factory = str


def is_busy(exc: sqlite3.OperationalError) -> bool:
    """Whether ``exc`` says another connection holds a lock ("locked" or "busy")."""
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def retry_busy(function: Callable[[], _T], *, timeout: float = BUSY_TIMEOUT,
               sleep: Callable[[float], object] = time.sleep) -> _T:
    """Call ``function`` until it does not fail with a lock error, backing off between tries.

    The delays double from 5 ms up to 200 ms; after ``timeout`` seconds the last lock
    error is raised. Other errors are raised at once.

    Args:
        function: The work; it must leave no transaction open when it fails.
        timeout: Seconds after which a lock error is no longer retried.
        sleep: How to wait (blocking; this runs in a worker thread).

    Raises:
        sqlite3.OperationalError: Still locked at the deadline, or another error.
    """
    deadline = time.monotonic() + timeout
    delay = _FIRST_DELAY
    while True:
        try:
            return function()
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() >= deadline:
                raise
        sleep(delay)
        delay = min(delay * 2, _MAX_DELAY)


@final
class SQLiteFile:
    """One connection to one SQLite file, opened on first use and guarded by a lock.

    Blocking work runs in a worker thread; SQLite and OS errors become ``StorageError``
    naming the store, the file and the operation.

    Args:
        path: The database file (created, with its directories, on first use).
        schema: Statements run in one transaction when the file is opened
            (``CREATE TABLE IF NOT EXISTS ...``).
        name: The store, for messages (e.g. ``"SQLite storage"``).
        reopen: What to do after ``aclose()``, for messages (e.g. ``"create a new
            SQLiteStorage to use the file again"``).
        busy_timeout: Seconds SQLite waits for a lock, and the deadline of the retries.
    """

    __slots__ = ("_busy_timeout", "_closed", "_connection", "_lock", "_name", "_path",
                 "_reopen", "_schema")

    def __init__(self, path: str | os.PathLike[str], *, schema: Sequence[str], name: str,
                 reopen: str, busy_timeout: float = BUSY_TIMEOUT) -> None:
        self._path = Path(path)
        self._schema = tuple(schema)
        self._name = name
        self._reopen = reopen
        self._busy_timeout = busy_timeout
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._closed = False

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    def call(self, operation: str, function: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``function`` on the connection under the lock (blocking).

        Args:
            operation: What is being done, for messages (``"saving run 'r1'"``).
            function: The work; use ``transaction()`` inside it for writes.

        Raises:
            StorageError: The store is closed, or the file could not be opened, read or
                written (still locked after the busy timeout included).
        """
        with self._lock:
            if self._closed:
                raise StorageError(f"{self._name} {str(self._path)!r} is closed; "
                                   f"{self._reopen}.")
            with self._errors(operation):
                return retry_busy(lambda: self._waiting(function), timeout=self._busy_timeout)

    def _waiting(self, function: Callable[[sqlite3.Connection], _T]) -> _T:
        """``function`` on the connection with SQLite's busy timeout on (the connection
        is left with it at 0, for ``_try_now``). Hold the lock."""
        connection = self._open()
        connection.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")
        try:
            return function(connection)
        finally:
            connection.execute("PRAGMA busy_timeout = 0")

    async def run(self, operation: str, function: Callable[[sqlite3.Connection], _T], *,
                  small: bool = False) -> _T:
        """``call()`` in a worker thread.

        With ``small`` (a write of a few rows, e.g. one step's result), the work is first
        tried on the calling thread, without waiting: only if the connection is open and
        idle, and with SQLite's busy timeout at 0, so the event loop never waits for a
        lock. If another connection holds the lock, the attempt was rolled back and the
        work goes to a worker thread as usual. A hop to a worker thread costs more than
        such a write (WAL, ``synchronous = NORMAL``: no fsync at commit).
        """
        if small and self._connection is not None and self._lock.acquire(blocking=False):
            try:
                done, value = self._try_now(operation, function)
            finally:
                self._lock.release()
            if done:
                return value  # type: ignore[return-value]
        return await anyio.to_thread.run_sync(self.call, operation, function)

    def _try_now(self, operation: str, function: Callable[[sqlite3.Connection], _T],
                 ) -> tuple[bool, _T | None]:
        """``(True, result)``, or ``(False, None)`` if the file was locked (or the store
        closed: ``call()`` then says so). Hold the lock."""
        connection = self._connection
        if self._closed or connection is None:
            return False, None
        with self._errors(operation):
            try:
                return True, function(connection)  # busy timeout 0: see _waiting()
            except sqlite3.OperationalError as exc:
                if is_busy(exc):
                    return False, None
                raise

    @contextmanager
    def _errors(self, operation: str) -> Iterator[None]:
        """SQLite and OS errors as ``StorageError`` naming the store and ``operation``."""
        try:
            yield
        except sqlite3.Error as exc:
            raise StorageError(f"{self._name} {str(self._path)!r}: {operation} "
                               f"failed: {exc}") from exc
        except OSError as exc:
            raise StorageError(f"{self._name} {str(self._path)!r}: cannot open the "
                               f"database file: {exc}") from exc
        except UnicodeDecodeError as exc:  # a damaged file: sqlite3 decodes its text
            raise StorageError(f"{self._name} {str(self._path)!r}: {operation} "
                               f"failed: the database file is damaged ({exc})") from exc

    async def aclose(self) -> None:
        """Close the connection; later calls raise ``StorageError``."""
        await anyio.to_thread.run_sync(self._close)

    def _close(self) -> None:
        with self._lock:
            self._closed = True
            connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def _open(self) -> sqlite3.Connection:
        if self._connection is None:
            connection = connect(self._path, busy_timeout=self._busy_timeout)
            try:
                with transaction(connection):
                    for statement in self._schema:
                        connection.execute(statement)
                connection.execute("PRAGMA busy_timeout = 0")  # see _waiting()
            except BaseException:
                connection.close()
                raise
            self._connection = connection
        return self._connection
