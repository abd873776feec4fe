"""Vectors kept beside the messages: restarts, changed embedders, writers elsewhere,
failing embedders, and exact search that agrees with plain cosine."""

from __future__ import annotations

import hashlib
import math
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from procflow.memory import (
    HashEmbedder,
    InMemoryMemoryStore,
    Memory,
    MemoryStore,
    MessageIndex,
    SemanticRecallOptions,
    VectorStore,
)
from procflow.memory.vector import cosine
from procflow.messages import Message

from .conftest import make_store

BACKENDS = ["sqlite", "in-memory", pytest.param("postgres", marks=pytest.mark.postgres),
            pytest.param("redis", marks=pytest.mark.redis)]
RECALL = SemanticRecallOptions(top_k=1, message_range=0)


def msg(text: str, thread: str = "t1", resource: str | None = "r1") -> Message:
    return Message.user(text).model_copy(update={"thread_id": thread, "resource_id": resource})


class Table:
    """A deterministic embedder: each text's vector is given (or derived from its hash)."""

    def __init__(self, name: str = "table", dims: int = 4, **known: list[float]) -> None:
        self.name, self.dims, self.known, self.calls = name, dims, known, 0

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        return [self.known.get(t) or _hashed(t, self.dims) for t in texts]


def _hashed(text: str, dims: int) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [b - 127.5 for b in digest[:dims]]


class Broken:
    name = "broken"

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise RuntimeError("embedding service down")


async def recall(index: MessageIndex, text: str, scope: str = "resource:r1") -> list[str]:
    return [m.id for m in await index.search(text, scope=scope, top_k=3)]


@pytest.mark.parametrize("kind", BACKENDS)
async def test_a_new_store_object_recalls_what_an_earlier_one_stored(
        kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    first = make_store(kind, request, tmp_path)
    cake, rain = msg("I ate chocolate cake"), msg("it will rain tomorrow")
    memory = Memory(storage=first, semantic_recall=RECALL)
    await memory.save_messages([cake, rain], thread_id="t1", resource_id="r1")
    if kind != "in-memory":  # the in-memory store is its own "disk": keep it
        await first.aclose()
        first = make_store(kind, request, tmp_path)

    index = MessageIndex(first, HashEmbedder())  # a fresh process: nothing cached
    hits = await recall(index, "chocolate cake")
    await first.aclose()

    assert hits[0] == cake.id


@pytest.mark.parametrize("kind", BACKENDS)
async def test_a_changed_embedder_reembeds_and_never_mixes_spaces(
        kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    store = make_store(kind, request, tmp_path)
    assert isinstance(store, VectorStore)
    old = MessageIndex(store, Table("old", near=[1, 0, 0, 0], far=[0, 1, 0, 0],
                                    q=[1, 0, 0, 0]))
    near, far = msg("near"), msg("far")
    await store.save_messages([near, far])
    await old.index([near, far])
    assert await recall(old, "q") == [near.id, far.id]

    # The new embedder puts "far" closest to the query: a mix of spaces would not.
    new = MessageIndex(store, Table("new", near=[0, 0, 1, 0], far=[1, 0, 0, 0],
                                    q=[1, 0, 0, 0]))
    hits = await recall(new, "q")
    await store.aclose()

    assert hits == [far.id, near.id]


async def test_reindex_embeds_every_message_of_the_scope_once(tmp_path: Path) -> None:
    store = InMemoryMemoryStore()
    await store.save_messages([msg(f"text {i}") for i in range(5)] + [msg("text 0")])
    embedder = Table("t")
    memory = Memory(storage=store, semantic_recall=True, embedder=embedder)

    assert await memory.reindex(resource_id="r1") == 6
    assert await memory.reindex(resource_id="r1") == 0
    with pytest.raises(ValueError, match="thread_id= or resource_id="):
        await memory.reindex()


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres",
                                                         marks=pytest.mark.postgres)])
async def test_a_cached_scope_sees_another_writers_vectors(
        kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    reader_store, writer_store = (make_store(kind, request, tmp_path) for _ in range(2))
    reader = MessageIndex(reader_store, HashEmbedder())
    writer = MessageIndex(writer_store, HashEmbedder())
    first, second = msg("the blue bicycle"), msg("the red umbrella")
    await writer_store.save_messages([first])
    await writer.index([first])
    assert await recall(reader, "umbrella") == [first.id]

    await writer_store.save_messages([second])
    await writer.index([second])
    hits = await recall(reader, "umbrella")
    await reader_store.aclose()
    await writer_store.aclose()

    assert hits[0] == second.id


async def test_a_failing_embedder_skips_recall_with_a_warning_and_indexes_later() -> None:
    from procflow.agent import Agent
    from procflow.models import ScriptedModel

    store = InMemoryMemoryStore()
    memory = Memory(storage=store, last_messages=0, semantic_recall=RECALL, embedder=Broken())
    warnings: list[str] = []
    for processor in memory.input_processors():
        processor.on_violation = lambda v: warnings.append(v.message)
    broken = Agent(id="a", model=ScriptedModel(["noted"]), memory=memory)
    result = await broken.generate("my cat is called Tom", memory={"thread": "t"})
    assert result.text == "noted"
    assert [w.split(":")[0] for w in warnings] == [
        "semantic recall skipped", "messages not indexed yet (they are indexed at a later "
        "recall)"]

    model = ScriptedModel(["Tom"])
    healthy = Agent(id="a", model=model, memory=Memory(storage=store, last_messages=0,
                                                       semantic_recall=RECALL))
    await healthy.generate("what is my cat called?", memory={"thread": "t"})
    assert "my cat is called Tom" in [e["content"] for e in model.requests[0].prompt]


_WRITER = textwrap.dedent("""
    import sys, anyio
    from procflow.memory import Memory, SQLiteMemoryStore

    async def main(path, mode):
        async with Memory(storage=SQLiteMemoryStore(path), semantic_recall=True) as memory:
            if mode == "store":
                await memory.save_messages(["my passport number ends in 4417",
                                            "the weather is nice"], thread_id="t",
                                           resource_id="u")
            else:
                from procflow.memory.search import MessageIndex
                index = MessageIndex(memory.storage, memory.embedder)
                hits = await index.search("passport number", scope="resource:u", top_k=1)
                found = await memory.storage.get_messages_by_id([h.id for h in hits])
                print(found[0].text)

    anyio.run(main, *sys.argv[1:3])
""")


async def test_a_restarted_process_recalls_the_earlier_message(tmp_path: Path) -> None:
    db = str(tmp_path / "memory.db")
    await anyio.run_process([sys.executable, "-c", _WRITER, db, "store"])
    done = await anyio.run_process([sys.executable, "-c", _WRITER, db, "recall"])
    assert done.stdout.decode().strip() == "my passport number ends in 4417"


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.floats(-1, 1, allow_nan=False, width=32), min_size=4,
                         max_size=4), min_size=1, max_size=30),
       st.lists(st.floats(-1, 1, allow_nan=False, width=32), min_size=4, max_size=4),
       st.integers(1, 5))
def test_exact_search_agrees_with_plain_cosine(vectors: list[list[float]],
                                               query: list[float], top_k: int) -> None:
    known = {f"m{i}": v for i, v in enumerate(vectors)}

    async def search() -> list[tuple[str, float]]:
        store: MemoryStore = InMemoryMemoryStore()
        messages = [Message.user(text, id=text).model_copy(
            update={"thread_id": "t", "resource_id": None}) for text in known]
        await store.save_messages(messages)
        index = MessageIndex(store, Table("p", q=query, **known))  # type: ignore[arg-type]
        await index.index(messages)
        return [(m.id, m.score) for m in await index.search("q", scope="thread:t",
                                                               top_k=top_k)]

    got = anyio.run(search)
    unit = [x / (math.sqrt(sum(y * y for y in query)) or 1) for x in query]
    expected = sorted(((cosine(unit, v) if any(v) else 0.0, k) for k, v in known.items()),
                      key=lambda s: -s[0])
    assert len(got) == min(top_k, len(known))
    for (_, score), (want, _) in zip(got, expected, strict=False):
        assert score == pytest.approx(want, abs=1e-4)


async def test_approximate_search_finds_the_exact_match() -> None:
    store = InMemoryMemoryStore()
    messages = [msg(f"note number {i}") for i in range(300)]
    await store.save_messages(messages)
    index = MessageIndex(store, HashEmbedder(), approximate=True, approximate_above=100)
    await index.index(messages)
    hits = await index.search("note number 123", scope="resource:r1", top_k=1)
    assert hits[0].id == messages[123].id

