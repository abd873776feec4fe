"""Embedders: the local one is deterministic; the OpenAI-compatible one talks HTTP."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from procflow.errors import APICallError
from procflow.memory import HashEmbedder, InMemoryVectorIndex, OpenAIEmbedder

from .conftest import EmbeddingServer

EMBEDDER = HashEmbedder(dimensions=64)


@given(st.text(max_size=200))
def test_same_text_same_unit_vector(text: str) -> None:
    first, second = EMBEDDER.embed_one(text), HashEmbedder(dimensions=64).embed_one(text)
    assert first == second and len(first) == 64
    assert math.isclose(math.fsum(x * x for x in first), 1.0, rel_tol=1e-9)


def test_similar_texts_are_closer() -> None:
    from procflow.memory.vector import cosine

    query = EMBEDDER.embed_one("favourite colour")
    near = EMBEDDER.embed_one("My favourite colour is green")
    far = EMBEDDER.embed_one("The train leaves at noon")
    assert cosine(query, near) > cosine(query, far)


async def test_vector_index_filters_and_ranks() -> None:
    index = InMemoryVectorIndex()
    await index.upsert([("a", [1.0, 0.0], {"r": 1}), ("b", [0.6, 0.8], {"r": 1}),
                        ("c", [1.0, 0.0], {"r": 2})])
    hits = await index.query([1.0, 0.0], top_k=5, where={"r": 1})
    assert [h.id for h in hits] == ["a", "b"] and math.isclose(hits[0].score, 1.0)


async def test_openai_embedder_posts_and_orders(embedding_server: EmbeddingServer) -> None:
    embedding_server.reply(200, {"data": [{"index": 1, "embedding": [0.0, 1.0]},
                                          {"index": 0, "embedding": [1.0, 0.0]}]})
    embedder = OpenAIEmbedder("emb-small", api_key="sk-test-123", base_url=embedding_server.url)
    assert await embedder.embed(["a", "b"]) == [[1.0, 0.0], [0.0, 1.0]]
    got = embedding_server.requests[0]
    assert got.path == "/v1/embeddings" and got.json == {"model": "emb-small",
                                                         "input": ["a", "b"]}
    assert got.headers["authorization"] == "Bearer sk-test-123"


async def test_openai_embedder_error_hides_the_key(embedding_server: EmbeddingServer) -> None:
    embedding_server.reply(500, {"error": {"message": "boom for key sk-secret-999"}})
    embedder = OpenAIEmbedder(api_key="sk-secret-999", base_url=embedding_server.url,
                              max_retries=0)
    with pytest.raises(APICallError) as caught:
        await embedder.embed(["x"])
    assert caught.value.status_code == 500 and "HTTP 500" in str(caught.value)
    assert "sk-secret-999" not in str(caught.value) + caught.value.body


async def test_openai_embedder_reads_env(embedding_server: EmbeddingServer,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("OPENAI_BASE_URL", embedding_server.url)
    embedding_server.reply(200, {"data": [{"index": 0, "embedding": [0.5]}]})
    assert await OpenAIEmbedder().embed(["x"]) == [[0.5]]


async def test_openai_embedder_without_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(APICallError, match="no API key"):
        await OpenAIEmbedder(base_url="http://127.0.0.1:9/v1").embed(["x"])


async def test_openai_embedder_bad_body(embedding_server: EmbeddingServer) -> None:
    embedding_server.reply(200, {"nope": 1})
    with pytest.raises(APICallError, match="no list of embeddings"):
        await OpenAIEmbedder(api_key="k", base_url=embedding_server.url).embed(["x"])


async def test_agent_recall_with_the_http_embedder(embedding_server: EmbeddingServer,
                                                   tmp_path: object) -> None:
    from procflow.agent import Agent
    from procflow.memory import InMemoryMemoryStore, Memory, SemanticRecallOptions
    from procflow.models import ScriptedModel

    # Query "I ate cake"; index "noted" (the query's embedding is cached); query "what
    # did I eat?" (cached for indexing too); index "it was cake".
    for vectors in ([[1.0, 0.0]], [[0.0, 1.0]], [[0.9, 0.1]], [[0.0, 1.0]]):
        embedding_server.reply(200, {"data": [{"index": i, "embedding": v}
                                              for i, v in enumerate(vectors)]})
    memory = Memory(storage=InMemoryMemoryStore(), last_messages=0,
                    semantic_recall=SemanticRecallOptions(top_k=1, message_range=0),
                    embedder=OpenAIEmbedder(api_key="k", base_url=embedding_server.url))
    model = ScriptedModel(["noted", "it was cake"])
    agent = Agent(id="a", model=model, memory=memory)
    await agent.generate("I ate cake", memory={"thread": "t"})
    await agent.generate("what did I eat?", memory={"thread": "t"})
    assert [e["content"] for e in model.requests[1].prompt] == ["I ate cake", "what did I eat?"]


def vectors(*rows: list[float]) -> dict[str, object]:
    return {"data": [{"index": i, "embedding": row} for i, row in enumerate(rows)]}


def fast(server: EmbeddingServer, **options: object) -> OpenAIEmbedder:
    return OpenAIEmbedder(api_key="k", base_url=server.url, backoff=0.001,
                          **options)  # type: ignore[arg-type]


async def test_openai_embedder_retries_429_and_5xx(embedding_server: EmbeddingServer) -> None:
    embedding_server.reply(429, {"error": {"message": "slow down"}}, {"retry-after": "0"})
    embedding_server.reply(503, "unavailable")
    embedding_server.reply(200, vectors([1.0]))
    assert await fast(embedding_server, max_retries=2).embed(["x"]) == [[1.0]]
    assert len(embedding_server.requests) == 3


async def test_openai_embedder_gives_up_after_max_retries(
        embedding_server: EmbeddingServer) -> None:
    for _ in range(3):
        embedding_server.reply(500, "boom")
    with pytest.raises(APICallError, match="HTTP 500") as caught:
        await fast(embedding_server, max_retries=2).embed(["x"])
    assert caught.value.is_retryable and len(embedding_server.requests) == 3


async def test_openai_embedder_does_not_retry_a_rejection(
        embedding_server: EmbeddingServer) -> None:
    embedding_server.reply(400, {"error": {"message": "bad input"}})
    with pytest.raises(APICallError, match="bad input"):
        await fast(embedding_server).embed(["x"])
    assert len(embedding_server.requests) == 1


async def test_openai_embedder_retries_connection_errors() -> None:
    embedder = OpenAIEmbedder(api_key="k", base_url="http://127.0.0.1:9/v1", backoff=0.001,
                              max_retries=2)
    with pytest.raises(APICallError) as caught:
        await embedder.embed(["x"])
    assert caught.value.is_retryable


async def test_openai_embedder_sends_batches_in_order(embedding_server: EmbeddingServer) -> None:
    for rows in ([[1.0], [2.0]], [[3.0], [4.0]], [[5.0]]):
        embedding_server.reply(200, vectors(*rows))
    got = await fast(embedding_server, batch_size=2).embed(["a", "b", "c", "d", "e"])
    assert got == [[1.0], [2.0], [3.0], [4.0], [5.0]]
    assert [r.json["input"] for r in embedding_server.requests] == [["a", "b"], ["c", "d"],
                                                                      ["e"]]


@pytest.mark.parametrize(("header", "seconds"), [("3", 3.0), ("0.5", 0.5), ("", 0.0),
                                                  ("soon", 0.0), ("-4", 0.0),
                                                  ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0)])
def test_retry_after_is_read_as_seconds_or_a_date(header: str, seconds: float) -> None:
    from procflow.memory.embedders import retry_after

    assert retry_after(header) == seconds


async def test_reindexing_costs_one_call_per_distinct_text(
        embedding_server: EmbeddingServer, tmp_path: object) -> None:
    from pathlib import Path

    from procflow.memory import Memory, SQLiteMemoryStore

    path = Path(str(tmp_path)) / "memory.db"
    embedding_server.reply(200, vectors([1.0, 0.0], [0.0, 1.0]))
    async with Memory(storage=SQLiteMemoryStore(path), semantic_recall=True,
                      embedder=fast(embedding_server, dimensions=2)) as memory:
        await memory.save_messages(["hello", "bye", "hello"], thread_id="t1")
    async with Memory(storage=SQLiteMemoryStore(path), semantic_recall=True,
                      embedder=fast(embedding_server, dimensions=2)) as memory:  # an import
        await memory.save_messages(["bye", "hello"], thread_id="t2")
        assert await memory.reindex(thread_id="t2") == 0
    assert [r.json["input"] for r in embedding_server.requests] == [["hello", "bye"]]
