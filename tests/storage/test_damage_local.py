"""Damage stays local (issue 42): a SQLite row that cannot be decoded at any layer -
bytes that are not UTF-8 included - marks that run "corrupted" in listings and raises
``SnapshotCorruptedError`` for that run only; every other run stays readable."""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from procflow import create_step, create_workflow
from procflow.errors import RunNotFoundError, SnapshotCorruptedError, StorageError
from procflow.storage import SQLiteStorage

_NOT_UTF8 = "cast(x'7b2276223aff7d' as text)"  # '{"v":' + 0xff + '}'


def _workflow(storage: SQLiteStorage | None = None):  # type: ignore[no-untyped-def]
    return create_workflow(id="wf", storage=storage).then(
        create_step(id="s", execute=lambda ctx: {"n": 1})).commit()


async def _stored_runs(db: Path, count: int) -> None:
    async with SQLiteStorage(db) as storage:
        wf = _workflow(storage)
        for i in range(count):
            await wf.create_run(f"run{i}").start()


@pytest.mark.parametrize(("table", "column", "run"), [
    ("runs", "snapshot", "run5"), ("steps", "result", "run4"), ("steps", "path", "run3"),
])
async def test_one_row_of_invalid_utf8_fails_only_its_run(
        tmp_path: Path, table: str, column: str, run: str) -> None:
    db = tmp_path / "runs.db"
    await _stored_runs(db, 6)
    with sqlite3.connect(db) as connection:
        connection.execute(f"UPDATE {table} SET {column} = {_NOT_UTF8} WHERE run_id = ?",
                           (run,))

    async with SQLiteStorage(db) as storage:
        listed = {r.run_id: r.status for r in await storage.list_runs()}
        with pytest.raises(SnapshotCorruptedError) as caught:
            await _workflow(storage).get_run(run)
        others = [await _workflow(storage).get_run(f"run{i}") for i in range(6)
                  if f"run{i}" != run]

    assert caught.value.run_id == run
    assert len(listed) == 6
    assert listed[run] == ("corrupted" if table == "runs" else "success")
    assert all(r.status == "success" for r in others)


async def test_a_trace_of_invalid_utf8_fails_only_its_trace(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    await _stored_runs(db, 3)
    with sqlite3.connect(db) as connection:
        connection.execute(f"UPDATE traces SET data = {_NOT_UTF8} WHERE run_id = 'run1'")
        connection.execute(f"UPDATE traces SET status = {_NOT_UTF8} WHERE run_id = 'run2'")

    async with SQLiteStorage(db) as storage:
        with pytest.raises(SnapshotCorruptedError):
            await storage.load_trace("run1")
        listed = await storage.list_traces()
        kept = await storage.load_trace("run0")

    assert sorted(t.run_id for t in listed) == ["run0", "run1", "run2"]
    assert kept is not None and kept.spans


async def test_procflow_runs_lists_an_invalid_utf8_row_as_corrupted(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    await _stored_runs(db, 3)
    with sqlite3.connect(db) as connection:
        connection.execute(f"UPDATE runs SET snapshot = {_NOT_UTF8} WHERE run_id = 'run1'")

    done = await anyio.run_process(
        [sys.executable, "-m", "procflow", "--db", str(db), "--plain", "runs"],
        env={**os.environ, "PYTHONPATH": os.getcwd()}, check=False)

    assert done.returncode == 0, done.stderr
    rows = {line.split("\t")[0]: line.split("\t")[2] for line in done.stdout.decode().splitlines()}
    assert rows == {"run0": "success", "run1": "corrupted", "run2": "success"}


async def test_get_run_of_an_id_no_run_can_have(tmp_path: Path) -> None:
    async with SQLiteStorage(tmp_path / "runs.db") as storage:
        wf = _workflow(storage)
        with pytest.raises(RunNotFoundError, match="lone surrogate"):
            await wf.get_run("a\udcffb")
        with pytest.raises(TypeError, match="str, not int"):
            await wf.get_run(5)  # type: ignore[arg-type]


# -- random damage to a real database file -------------------------------------------

_TEMPLATE: dict[str, bytes] = {}


def _template(tmp: Path) -> bytes:
    """A database file of 8 finished runs (made once: the property test reuses it)."""
    if "db" not in _TEMPLATE:
        db = tmp / "template.db"
        anyio.run(_stored_runs, db, 8)
        with sqlite3.connect(db) as connection:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            connection.execute("PRAGMA journal_mode = DELETE")
        _TEMPLATE["db"] = db.read_bytes()
    return _TEMPLATE["db"]


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.binary(min_size=1,
                                                                          max_size=4)),
                min_size=1, max_size=4),
       st.booleans())
def test_random_byte_overwrites_never_fail_a_listing_as_a_whole(
        tmp_path_factory: pytest.TempPathFactory,
        damage: list[tuple[float, bytes]], in_documents: bool) -> None:
    """Bytes overwritten inside the stored documents (or anywhere in the file) leave a
    listing of every run, the damaged ones "corrupted"; only damage to SQLite's own
    structure may fail the whole query, and then with a ``StorageError``."""
    tmp = tmp_path_factory.mktemp("damage")
    data = bytearray(_template(tmp_path_factory.getbasetemp()))
    documents = [i for i in range(len(data) - 1) if data[i:i + 2] == b'{"'] if in_documents \
        else []
    for where, patch in damage:
        at = (documents[int(where * len(documents))] + 2 if documents
              else 100 + int(where * (len(data) - 104)))
        data[at:at + len(patch)] = patch[:len(data) - at]
    db = tmp / "runs.db"
    db.write_bytes(bytes(data))

    async def listing() -> None:
        async with SQLiteStorage(db) as storage:
            try:
                runs = await storage.list_runs()
            except SnapshotCorruptedError:
                raise
            except StorageError as exc:
                assert not in_documents, exc  # only structural damage fails a query
                assert "UTF-8" not in str(exc)
                return
            if in_documents:
                assert len(runs) == 8
            for run in runs:
                assert run.status in ("success", "corrupted")

    anyio.run(listing)


async def test_get_run_of_a_bad_id_raises_the_same_on_redis(redis_url: str,
                                                             redis_prefix: str) -> None:
    from procflow.storage import RedisStorage

    async with RedisStorage(redis_url, prefix=redis_prefix) as storage:
        wf = _workflow(storage)
        with pytest.raises(RunNotFoundError, match="lone surrogate"):
            await wf.get_run("a\udcffb")
        with pytest.raises(TypeError, match="str, not int"):
            await wf.get_run(5)  # type: ignore[arg-type]


async def test_redis_listing_survives_a_damaged_header_and_index_member(
        redis_url: str, redis_prefix: str) -> None:
    import redis.asyncio as aioredis

    from procflow.storage import RedisStorage

    async with RedisStorage(redis_url, prefix=redis_prefix) as storage:
        wf = _workflow(storage)
        for i in range(3):
            await wf.create_run(f"run{i}").start()
        client = aioredis.Redis.from_url(redis_url)
        try:
            await client.set(f"{redis_prefix}:run:wf:run1", b'{"v":\xff}')
            await client.zadd(f"{redis_prefix}:runs", {b"\xff not a member": 1e18})
        finally:
            await client.aclose()

        listed = {r.run_id: r.status for r in await storage.list_runs()}
        with pytest.raises(SnapshotCorruptedError):
            await wf.get_run("run1")

    assert listed == {"run0": "success", "run1": "corrupted", "run2": "success"}
