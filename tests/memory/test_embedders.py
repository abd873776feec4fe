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
    embedder = OpenAIEmbedder(api_key="sk-secret-999", base_url=embedding_server.url)
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
