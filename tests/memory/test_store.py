"""The MemoryStore contract, run against SQLite (a real file) and the in-memory store."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from procflow.errors import MemoryCorruptedError
from procflow.memory import Memory, MemoryStore, SQLiteMemoryStore, Thread
from procflow.messages import Message


def msg(text: str, thread: str = "t1", role: str = "user") -> Message:
    made = Message.user(text) if role == "user" else Message.assistant(text)
    return made.model_copy(update={"thread_id": thread, "resource_id": "r1"})


async def test_messages_round_trip_in_save_order(store: MemoryStore) -> None:
    saved = [msg("a"), msg("b", role="assistant"), msg("c")]
    await store.save_messages(saved)
    assert await store.get_messages("t1") == saved
    assert [m.text for m in await store.get_messages("t1", last=2)] == ["b", "c"]
    assert await store.get_messages("t1", last=0) == []
    assert await store.get_messages("nope") == []


async def test_upsert_keeps_the_place(store: MemoryStore) -> None:
    first, second = msg("a"), msg("b")
    await store.save_messages([first, second])
    await store.save_messages([first.with_text("a2")])
    assert [m.text for m in await store.get_messages("t1")] == ["a2", "b"]


async def test_saving_creates_the_thread(store: MemoryStore) -> None:
    await store.save_messages([msg("a", thread="t9")])
    thread = await store.get_thread("t9")
    assert thread is not None and thread.resource_id == "r1"
    assert [t.id for t in await store.list_threads("r1")] == ["t9"]
    assert await store.list_threads("other") == []


async def test_neighbours_by_id(store: MemoryStore) -> None:
    saved = [msg(str(i)) for i in range(6)] + [msg("x", thread="t2")]
    await store.save_messages(saved)
    got = await store.get_messages_by_id([saved[3].id, saved[6].id], before=1, after=1)
    assert [m.text for m in got] == ["2", "3", "4", "x"]


async def test_working_memory(store: MemoryStore) -> None:
    assert await store.get_working_memory("resource:r1") is None
    await store.set_working_memory("resource:r1", "# notes")
    assert await store.get_working_memory("resource:r1") == "# notes"


async def test_thread_round_trip(store: MemoryStore) -> None:
    now = datetime(2024, 5, 1, tzinfo=UTC)
    thread = Thread(id="t", resource_id="r", created_at=now, updated_at=now, title="hi",
                    metadata={"k": 1})
    await store.save_thread(thread)
    assert await store.get_thread("t") == thread


async def test_messages_without_thread_are_refused(store: MemoryStore) -> None:
    with pytest.raises(ValueError, match="no thread_id"):
        await store.save_messages([Message.user("x")])


async def test_corrupted_row_names_thread_and_row(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    memory = Memory(storage=path)
    good = await memory.save_messages(["fine", "also fine"], thread_id="t1")
    await memory.save_messages(["other thread"], thread_id="t2")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE messages SET data = '{not json' WHERE id = ?", (good[1].id,))
    with pytest.raises(MemoryCorruptedError, match=f"{good[1].id}.*'t1'") as caught:
        await memory.get_messages("t1")
    assert caught.value.thread_id == "t1" and caught.value.row_id == good[1].id
    assert [m.text for m in await memory.get_messages("t2")] == ["other thread"]
    assert [m.text for m in await memory.get_messages("t1", last=0)] == []
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT data FROM messages WHERE id = ?",
                          (good[1].id,)).fetchone() == ("{not json",)
    await memory.aclose()


async def test_closed_store_raises(tmp_path: Path) -> None:
    from procflow.errors import StorageError

    store = SQLiteMemoryStore(tmp_path / "m.db")
    await store.aclose()
    with pytest.raises(StorageError, match="closed"):
        await store.get_messages("t")


async def test_sqlite_outlives_the_store_object(tmp_path: Path) -> None:
    async with SQLiteMemoryStore(tmp_path / "m.db") as first:
        await first.save_messages([msg("persisted")])
    async with SQLiteMemoryStore(tmp_path / "m.db") as second:
        assert [m.text for m in await second.get_messages("t1")] == ["persisted"]
