"""The shared SQLite plumbing: pragmas, transactions, and the lock retry with backoff,
against a real file held locked by another connection."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest

from procflow._backends.sqlite import SQLiteFile, connect, retry_busy, transaction
from procflow.errors import StorageError

SCHEMA = ("CREATE TABLE IF NOT EXISTS items (name TEXT PRIMARY KEY)",)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "sub" / "db.sqlite"


@pytest.fixture
def locker(path: Path) -> Iterator[sqlite3.Connection]:
    """Another connection to the file, which the test makes hold the write lock."""
    connection = connect(path)
    connection.execute(SCHEMA[0])
    yield connection
    if connection.in_transaction:
        connection.rollback()
    connection.close()


def insert(name: str) -> Callable[[sqlite3.Connection], None]:
    def work(connection: sqlite3.Connection) -> None:
        with transaction(connection):
            connection.execute("INSERT INTO items VALUES (?)", (name,))

    return work


def names(connection: sqlite3.Connection) -> list[str]:
    return [row[0] for row in connection.execute("SELECT name FROM items ORDER BY name")]


def test_connect_creates_directories_and_sets_the_pragmas(path: Path) -> None:
    connection = connect(path, busy_timeout=2.5)
    try:
        assert path.parent.is_dir()
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert connection.execute("PRAGMA busy_timeout").fetchone()[0] == 2500
        assert connection.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    finally:
        connection.close()


def test_a_failed_transaction_is_rolled_back(path: Path) -> None:
    connection = connect(path)
    connection.execute(SCHEMA[0])
    with pytest.raises(RuntimeError), transaction(connection):
        connection.execute("INSERT INTO items VALUES ('a')")
        raise RuntimeError("boom")

    assert not connection.in_transaction and names(connection) == []
    connection.close()


def test_a_locked_file_is_retried_with_growing_delays(path: Path,
                                                      locker: sqlite3.Connection) -> None:
    writer = connect(path, busy_timeout=0)  # SQLite itself does not wait
    locker.execute("BEGIN IMMEDIATE")
    delays: list[float] = []

    def sleep(delay: float) -> None:
        delays.append(delay)
        if len(delays) == 4:
            locker.execute("COMMIT")  # the other connection lets go

    retry_busy(lambda: insert("a")(writer), timeout=60, sleep=sleep)

    assert names(writer) == ["a"]
    assert len(delays) == 4 and delays == sorted(delays) and delays[-1] == 8 * delays[0]
    writer.close()


def test_the_delay_is_capped(path: Path, locker: sqlite3.Connection) -> None:
    writer = connect(path, busy_timeout=0)
    locker.execute("BEGIN IMMEDIATE")
    delays: list[float] = []

    def sleep(delay: float) -> None:
        delays.append(delay)
        if len(delays) == 12:
            locker.execute("COMMIT")

    retry_busy(lambda: insert("a")(writer), timeout=60, sleep=sleep)

    assert delays[-1] == delays[-2] == max(delays)
    writer.close()


def test_other_errors_are_not_retried(path: Path) -> None:
    connection = connect(path)
    calls: list[float] = []

    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        retry_busy(lambda: connection.execute("SELECT * FROM missing"), sleep=calls.append)

    assert calls == []
    connection.close()


async def test_a_store_waits_for_a_lock_held_by_another_connection(
        path: Path, locker: sqlite3.Connection) -> None:
    store = SQLiteFile(path, schema=SCHEMA, name="Test store", reopen="make a new one",
                       busy_timeout=30)
    locker.execute("BEGIN IMMEDIATE")
    locker.execute("INSERT INTO items VALUES ('first')")
    threading.Timer(0.2, locker.execute, ("COMMIT",)).start()

    await store.run("inserting", insert("second"))

    assert await store.run("listing", names) == ["first", "second"]
    await store.aclose()


async def test_a_lock_held_past_the_timeout_is_a_storage_error(
        path: Path, locker: sqlite3.Connection) -> None:
    store = SQLiteFile(path, schema=SCHEMA, name="Test store", reopen="make a new one",
                       busy_timeout=0.05)
    await store.run("creating", names)
    locker.execute("BEGIN IMMEDIATE")

    with pytest.raises(StorageError) as info:
        await store.run("inserting 'a'", insert("a"))

    message = str(info.value)
    assert "Test store" in message and str(path) in message
    assert "inserting 'a'" in message and "locked" in message
    await store.aclose()


async def test_a_closed_store_says_how_to_reopen(path: Path) -> None:
    store = SQLiteFile(path, schema=SCHEMA, name="Test store", reopen="make a new one")
    await store.run("listing", names)
    await store.aclose()

    with pytest.raises(StorageError, match="is closed; make a new one"):
        await store.run("listing", names)


async def test_concurrent_writers_on_two_stores_all_land(path: Path) -> None:
    one, two = (SQLiteFile(path, schema=SCHEMA, name="Test store", reopen="-")
                for _ in range(2))

    async with anyio.create_task_group() as group:
        for i in range(20):
            group.start_soon(one.run if i % 2 else two.run, "inserting", insert(f"{i:02}"))

    assert await one.run("listing", names) == [f"{i:02}" for i in range(20)]
    await one.aclose()
    await two.aclose()
