"""The Memory API itself: threads, messages, working memory, options."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from procflow.memory import (
    InMemoryMemoryStore,
    Memory,
    MessageHistory,
    SemanticRecall,
    SemanticRecallOptions,
    SQLiteMemoryStore,
    WorkingMemory,
    WorkingMemoryOptions,
)


async def test_threads(tmp_path: Path) -> None:
    async with Memory(storage=tmp_path / "m.db") as memory:
        made = await memory.create_thread(resource_id="ann", title="Trip", thread_id="t1")
        await memory.create_thread(resource_id="bob")
        assert made.id == "t1" and made.title == "Trip"
        assert [t.id for t in await memory.list_threads("ann")] == ["t1"]
        assert len(await memory.list_threads()) == 2
        assert await memory.get_thread("t1") == made


async def test_get_messages_respects_the_resource() -> None:
    memory = Memory(storage=InMemoryMemoryStore())
    await memory.create_thread(thread_id="t1", resource_id="ann")
    await memory.save_messages(["hello"], thread_id="t1", resource_id="ann")
    assert [m.text for m in await memory.get_messages("t1", "ann")] == ["hello"]
    assert await memory.get_messages("t1", "bob") == []


async def test_working_memory_api_uses_the_thread_resource() -> None:
    memory = Memory(storage=InMemoryMemoryStore(), working_memory=True)
    await memory.create_thread(thread_id="t1", resource_id="ann")
    await memory.create_thread(thread_id="t2", resource_id="ann")
    assert await memory.get_working_memory("t1") is None
    await memory.update_working_memory("t1", "# Ann\n- likes tea")
    assert await memory.get_working_memory("t2") == "# Ann\n- likes tea"


class Prefs(BaseModel):
    tea: bool = False


async def test_schema_update_is_validated() -> None:
    memory = Memory(storage=InMemoryMemoryStore(),
                    working_memory=WorkingMemoryOptions(schema=Prefs))
    assert await memory.update_working_memory("t", {"tea": True}) == '{"tea":true}'
    with pytest.raises(ValueError, match="does not fit Prefs"):
        await memory.update_working_memory("t", {"tea": "lots and lots"})


def test_default_storage_is_sqlite_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    memory = Memory()
    assert isinstance(memory.storage, SQLiteMemoryStore)
    assert memory.storage.path == Path(".procflow/memory.db")


def test_enabled_options_choose_processors() -> None:
    store = InMemoryMemoryStore()
    plain = Memory(storage=store)
    assert [type(p) for p in plain.input_processors()] == [MessageHistory]
    full = Memory(storage=store, semantic_recall=True, working_memory=True)
    assert [type(p) for p in full.input_processors()] == [WorkingMemory, MessageHistory,
                                                          SemanticRecall]
    assert [type(p) for p in full.output_processors()] == [SemanticRecall, MessageHistory]


@pytest.mark.parametrize("bad", [
    pytest.param(lambda: SemanticRecallOptions(top_k=0), id="top-k"),
    pytest.param(lambda: SemanticRecallOptions(message_range=-1), id="range"),
    pytest.param(lambda: SemanticRecallOptions(scope="world"), id="scope"),  # type: ignore[arg-type]
    pytest.param(lambda: WorkingMemoryOptions(template="x", schema=Prefs), id="both"),
    pytest.param(lambda: Memory(storage=InMemoryMemoryStore(), semantic_recall="yes"),
                 id="option-type"),
])
def test_bad_options_are_refused(bad: object) -> None:
    with pytest.raises((ValueError, TypeError)):
        bad()  # type: ignore[operator]
