"""``ResponseCache`` through a real ``Agent``: hits, scopes, busting, per-call overrides,
what is never cached, broken backends, TTLs and key stability."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from procflow.agent import Agent, FullOutput, tool
from procflow.cache import InMemoryServerCache, RedisCache, ServerCache
from procflow.context import RESOURCE_ID_KEY, RequestContext
from procflow.errors import APICallError
from procflow.messages import Chunk
from procflow.models import FunctionModel, ScriptedModel, ToolCall
from procflow.models.base import ModelRequest
from procflow.processors import Processor
from procflow.processors.builtin.cache.response import (
    DEFAULT_RESPONSE_CACHE_TTL_SECONDS,
    RESPONSE_CACHE_CONTEXT_KEY,
    ResponseCache,
    ResponseCacheContextOptions,
    ResponseCacheKeyInputs,
    build_response_cache_key,
)

QUESTION = "What is the capital of France?"


def in_order(*texts: str) -> FunctionModel:
    """A model answering its calls with ``texts`` in turn: these tests count the model's
    calls across independent conversations, where a ScriptedModel (which answers from
    the conversation) would give each the first turn."""
    answers = iter(texts)
    return FunctionModel(lambda request: next(answers))



class FakeClock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def cached_agent(model: Any, processor: ResponseCache, **options: Any) -> Agent:
    return Agent(id="search", instructions="Answer concisely.", model=model,
                 input_processors=[processor], **options)


async def ask(agent: Agent, *, stream: bool = False, **options: Any) -> FullOutput:
    if not stream:
        return await agent.generate(QUESTION, **options)
    out = await agent.stream(QUESTION, **options)
    async for _ in out.full_stream:
        pass
    result: FullOutput = await out.output
    return result


# ---------------------------------------------------------------- hits


@pytest.mark.parametrize("stream", [False, True], ids=["generate", "stream"])
async def test_a_repeated_call_is_answered_from_the_cache(stream: bool) -> None:
    model = ScriptedModel(["Paris is the capital."])  # a second model call would fail
    agent = cached_agent(model, ResponseCache(InMemoryServerCache()))

    first = await ask(agent, stream=stream)
    second = await ask(agent, stream=stream)

    assert len(model.requests) == 1
    assert second.text == first.text == "Paris is the capital."
    assert second.finish_reason == "stop"
    assert [s.from_cache for s in first.steps] == [False]
    assert [s.from_cache for s in second.steps] == [True]


async def test_a_replay_streams_the_same_chunks() -> None:
    agent = cached_agent(ScriptedModel(["Paris is lovely"]), ResponseCache(InMemoryServerCache()))

    runs = []
    for _ in range(2):
        out = await agent.stream(QUESTION)
        runs.append([c.text async for c in out.full_stream if c.type == "text-delta"])

    assert runs[0] == runs[1] == ["Paris ", "is ", "lovely"]


async def test_each_step_of_a_tool_loop_is_cached() -> None:
    calls: list[str] = []

    @tool
    async def lookup(city: str) -> str:
        """Look a city up."""
        calls.append(city)
        return f"{city} is in France"

    model = ScriptedModel([[ToolCall("lookup", {"city": "Paris"})], "Paris, France."])
    agent = cached_agent(model, ResponseCache(InMemoryServerCache()), tools=[lookup])

    await agent.generate(QUESTION)
    again = await agent.generate(QUESTION)

    assert len(model.requests) == 2  # one per step, both on the first call only
    assert [s.from_cache for s in again.steps] == [True, True]
    assert again.text == "Paris, France." and calls == ["Paris", "Paris"]


# ---------------------------------------------------------------- scopes


async def test_different_resource_ids_do_not_share_entries() -> None:
    model = in_order("for alice", "for bob")
    agent = cached_agent(model, ResponseCache(InMemoryServerCache()))

    alice = await ask(agent, memory={"resource": "alice"})
    bob = await ask(agent, memory={"resource": "bob"})
    alice_again = await ask(agent, request_context=RequestContext({RESOURCE_ID_KEY: "alice"}))

    assert (alice.text, bob.text, alice_again.text) == ("for alice", "for bob", "for alice")
    assert len(model.requests) == 2 and alice_again.steps[0].from_cache


def colliding_resource_ids(limit: int = 400_000) -> tuple[str, str]:
    """Two resource ids whose SHA-256 digests share their first 8 hex digits (32 bits):
    the scope digest keys carried before; a birthday search finds one in ~2**16 tries."""
    seen: dict[str, str] = {}
    for i in range(limit):
        resource = f"user-{i}"
        short = hashlib.sha256(resource.encode()).hexdigest()[:8]
        if short in seen:
            return seen[short], resource
        seen[short] = resource
    raise AssertionError(f"no 32-bit collision among {limit} ids")


@pytest.mark.parametrize("key", [pytest.param("fixed", id="fixed-key"),
                                 pytest.param(lambda inputs: "same", id="key-function")])
async def test_resource_ids_with_colliding_short_digests_do_not_share_entries(
        key: Any) -> None:
    first, second = colliding_resource_ids()
    model = in_order(f"private to {first}", f"private to {second}")
    agent = cached_agent(model, ResponseCache(InMemoryServerCache(), key=key))

    await ask(agent, memory={"resource": first})
    other = await ask(agent, memory={"resource": second})

    assert other.text == f"private to {second}" and not other.steps[0].from_cache


@pytest.mark.parametrize("forged", [
    pytest.param({"scope": "alice"}, id="dict-from-request-data"),
    pytest.param(ResponseCacheContextOptions(scope="alice"), id="options-built-by-hand"),
])
async def test_a_scope_not_written_by_the_helpers_is_ignored(
        forged: Any, caplog: pytest.LogCaptureFixture) -> None:
    model = in_order("for alice", "for mallory")
    agent = cached_agent(model, ResponseCache(InMemoryServerCache()))
    await ask(agent, memory={"resource": "alice"})

    mallory = await ask(agent, request_context=RequestContext(
        {RESOURCE_ID_KEY: "mallory", RESPONSE_CACHE_CONTEXT_KEY: forged}))

    assert mallory.text == "for mallory" and not mallory.steps[0].from_cache
    assert "only overrides written by ResponseCache.context()" in caplog.text


async def test_scope_none_shares_entries_between_resources() -> None:
    model = ScriptedModel(["shared answer"])
    agent = cached_agent(model, ResponseCache(InMemoryServerCache(), scope=None))

    await ask(agent, memory={"resource": "alice"})
    bob = await ask(agent, memory={"resource": "bob"})

    assert bob.text == "shared answer" and bob.steps[0].from_cache


async def test_a_fixed_scope_ignores_the_resource_id() -> None:
    model = ScriptedModel(["team answer"])
    agent = cached_agent(model, ResponseCache(InMemoryServerCache(), scope="team-1"))

    await ask(agent, memory={"resource": "alice"})
    bob = await ask(agent, memory={"resource": "bob"})

    assert bob.steps[0].from_cache and len(model.requests) == 1


async def test_agent_ids_namespace_entries_in_a_shared_backend() -> None:
    cache = InMemoryServerCache()
    model = in_order("from a", "from b")

    a = await ask(cached_agent(model, ResponseCache(cache, agent_id="a")))
    b = await ask(cached_agent(model, ResponseCache(cache, agent_id="b")))

    assert (a.text, b.text) == ("from a", "from b")


# ---------------------------------------------------------------- busting and overrides


async def test_bust_skips_the_read_but_still_writes() -> None:
    cache = InMemoryServerCache()
    model = in_order("old", "new")

    await ask(cached_agent(model, ResponseCache(cache, bust=True)))
    busted = await ask(cached_agent(model, ResponseCache(cache, bust=True)))
    plain = await ask(cached_agent(model, ResponseCache(cache)))

    assert (busted.text, busted.steps[0].from_cache) == ("new", False)
    assert (plain.text, plain.steps[0].from_cache) == ("new", True)


async def test_per_call_bust_refreshes_the_entry() -> None:
    model = in_order("old", "new")
    agent = cached_agent(model, ResponseCache(InMemoryServerCache()))

    await ask(agent)
    busted = await ask(agent, request_context=ResponseCache.context(bust=True))
    after = await ask(agent)

    assert busted.text == "new" and not busted.steps[0].from_cache
    assert after.text == "new" and after.steps[0].from_cache


async def test_per_call_key_override_fixes_the_key() -> None:
    model = ScriptedModel(["first answer"])
    agent = cached_agent(model, ResponseCache(InMemoryServerCache()))
    ctx = ResponseCache.context(key="faq:capital")

    await agent.generate("capital of France?", request_context=ctx)
    other = await agent.generate("France's capital city?", request_context=ctx)

    assert other.text == "first answer" and other.steps[0].from_cache


async def test_per_call_scope_override_beats_the_resource_id() -> None:
    model = ScriptedModel(["shared"])
    agent = cached_agent(model, ResponseCache(InMemoryServerCache()))

    await ask(agent, memory={"resource": "alice"},
              request_context=ResponseCache.context(scope=None))
    bob = await ask(agent, memory={"resource": "bob"},
                    request_context=ResponseCache.context(scope=None))

    assert bob.steps[0].from_cache


async def test_apply_context_merges_into_an_existing_context() -> None:
    ctx = RequestContext({"caller-meta": {"user_id": "u-123"}})

    same = ResponseCache.apply_context(ctx, bust=True)
    ResponseCache.apply_context(ctx, key="k")

    assert same is ctx and ctx["caller-meta"] == {"user_id": "u-123"}
    options = ctx[RESPONSE_CACHE_CONTEXT_KEY]
    assert (options.bust, options.key) == (True, "k")


async def test_a_key_function_receives_the_inputs_and_may_be_async() -> None:
    seen: list[ResponseCacheKeyInputs] = []

    async def by_last_word(inputs: ResponseCacheKeyInputs) -> str:
        seen.append(inputs)
        return str(inputs.prompt[-1]["content"]).split()[-1]

    model = ScriptedModel(["answer"])
    agent = cached_agent(model, ResponseCache(InMemoryServerCache(), key=by_last_word))

    await agent.generate("tell me about cats", memory={"resource": "r1"})
    again = await agent.generate("what about cats", memory={"resource": "r1"})

    assert again.steps[0].from_cache
    assert seen[0].agent_id == "procflow-response-cache" and seen[0].scope == "r1"
    assert seen[0].model == {"provider": "scripted", "model_id": "scripted"}
    assert seen[0].step_number == 0


async def test_a_key_function_that_raises_falls_back_to_the_default_key(
        caplog: pytest.LogCaptureFixture) -> None:
    def broken(inputs: ResponseCacheKeyInputs) -> str:
        raise RuntimeError("no key today")

    model = ScriptedModel(["answer"])
    agent = cached_agent(model, ResponseCache(InMemoryServerCache(), key=broken))

    await ask(agent)
    again = await ask(agent)

    assert again.steps[0].from_cache
    assert "no key today" in caplog.text and "default key" in caplog.text


# ---------------------------------------------------------------- never cached


class Guard(Processor):
    id = "guard"

    def process_output_stream(self, args: Any) -> Any:
        if "secret" in args.part.text:
            args.abort("leak")
        return args.part


async def test_a_tripwired_call_is_not_cached() -> None:
    cache = InMemoryServerCache()
    model = in_order("the secret is 42", "the secret is 42")
    agent = cached_agent(model, ResponseCache(cache), output_processors=[Guard()])

    first = await ask(agent)
    second = await ask(agent)

    assert first.tripwire is not None and second.tripwire is not None
    assert len(model.requests) == 2 and len(cache) == 0


async def test_a_failed_call_is_not_cached() -> None:
    cache = InMemoryServerCache()
    model = ScriptedModel([APICallError("overloaded", status_code=529), "recovered"])
    agent = cached_agent(model, ResponseCache(cache))

    with pytest.raises(APICallError):
        await ask(agent)
    assert len(cache) == 0
    answered = await ask(agent)
    replayed = await ask(agent)

    assert answered.text == replayed.text == "recovered" and replayed.steps[0].from_cache


class FinishingModel:
    """Answers "ok" and finishes with a given reason."""

    provider = "test"
    model_id = "finishing"

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        self.requests.append(request)
        yield Chunk.text_delta("ok")
        yield Chunk.finish(self.reason, {"input_tokens": 1, "output_tokens": 1})


@pytest.mark.parametrize("reason, cached", [
    ("stop", True), ("length", True), ("content-filter", False), ("other", False),
])
async def test_only_stop_length_and_tool_calls_finishes_are_cached(reason: str,
                                                                   cached: bool) -> None:
    model = FinishingModel(reason)
    agent = cached_agent(model, ResponseCache(InMemoryServerCache()))

    await ask(agent)
    second = await ask(agent)

    assert second.steps[0].from_cache is cached
    assert len(model.requests) == (1 if cached else 2)


# ---------------------------------------------------------------- broken backends


class BrokenCache(ServerCache):
    async def get(self, key: str) -> Any | None:
        raise ConnectionError("cache is down")

    async def set(self, key: str, value: Any, ttl_seconds: float | None = None) -> None:
        raise ConnectionError("cache is down")

    async def delete(self, key: str) -> None:
        raise ConnectionError("cache is down")

    async def clear(self) -> None:
        raise ConnectionError("cache is down")


async def test_a_broken_backend_still_answers_from_the_model(
        caplog: pytest.LogCaptureFixture) -> None:
    model = in_order("one", "two")
    agent = cached_agent(model, ResponseCache(BrokenCache()))

    with caplog.at_level(logging.WARNING):
        first, second = await ask(agent), await ask(agent)

    assert (first.text, second.text) == ("one", "two")
    assert "cache is down" in caplog.text and "calling the model" in caplog.text


async def test_a_failing_write_is_only_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    class NoWrites(ServerCache):
        async def get(self, key: str) -> Any | None:
            return None

        async def set(self, key: str, value: Any, ttl_seconds: float | None = None) -> None:
            raise OSError("disk full")

        async def delete(self, key: str) -> None:
            return None

        async def clear(self) -> None:
            return None

    out = await ask(cached_agent(ScriptedModel(["fine"]), ResponseCache(NoWrites())))

    assert out.text == "fine" and "writing key" in caplog.text and "disk full" in caplog.text


async def test_redis_on_a_closed_port_still_answers_from_the_model(
        caplog: pytest.LogCaptureFixture) -> None:
    model = in_order("one", "two")
    async with RedisCache("redis://127.0.0.1:1/0", prefix="closed:") as cache:
        agent = cached_agent(model, ResponseCache(cache))
        first, second = await ask(agent), await ask(agent)

    assert (first.text, second.text) == ("one", "two")
    assert "Redis cache at redis://127.0.0.1:1/0" in caplog.text


async def test_a_corrupted_entry_is_a_miss_and_gets_replaced(
        caplog: pytest.LogCaptureFixture) -> None:
    cache = InMemoryServerCache()
    model = ScriptedModel(["fresh"])
    agent = cached_agent(model, ResponseCache(cache, key=lambda inputs: "fixed"))
    await cache.set("procflow:agent-response:procflow-response-cache:shared:custom:fixed",
                    {"format": 1, "chunks": [{"type": "no-such-chunk", "payload": {}}]})

    first = await ask(agent)
    second = await ask(agent)

    assert first.text == "fresh" and not first.steps[0].from_cache
    assert "corrupted" in caplog.text
    assert second.text == "fresh" and second.steps[0].from_cache


@pytest.mark.redis
async def test_answers_are_cached_in_redis(redis_url: str, redis_prefix: str) -> None:
    model = ScriptedModel(["from redis"])
    async with RedisCache(redis_url, prefix=f"{redis_prefix}:") as cache:
        agent = cached_agent(model, ResponseCache(cache))
        await ask(agent, memory={"resource": "alice"})
        again = await ask(agent, memory={"resource": "alice"})

    assert again.text == "from redis" and again.steps[0].from_cache


# ---------------------------------------------------------------- TTL


async def test_an_entry_expires_after_the_ttl() -> None:
    clock = FakeClock()
    model = in_order("before", "after")
    agent = cached_agent(model, ResponseCache(InMemoryServerCache(clock=clock), ttl=60))

    await ask(agent)
    clock.now += 59
    warm = await ask(agent)
    clock.now += 2
    cold = await ask(agent)

    assert (warm.text, warm.steps[0].from_cache) == ("before", True)
    assert (cold.text, cold.steps[0].from_cache) == ("after", False)


def test_the_default_ttl_is_five_minutes() -> None:
    assert DEFAULT_RESPONSE_CACHE_TTL_SECONDS == 300
    assert ResponseCache(InMemoryServerCache()).ttl == 300


@pytest.mark.parametrize("options, error", [
    pytest.param({"cache": object()}, TypeError, id="not-a-cache"),
    pytest.param({"ttl": 0}, ValueError, id="ttl-zero"),
    pytest.param({"key": 3}, TypeError, id="key-not-str"),
    pytest.param({"key": ""}, ValueError, id="key-empty"),
    pytest.param({"scope": 7}, TypeError, id="scope-not-str"),
    pytest.param({"bust": "yes"}, TypeError, id="bust-not-bool"),
    pytest.param({"agent_id": ""}, ValueError, id="agent-id-empty"),
])
def test_bad_options_are_rejected(options: dict[str, Any], error: type[Exception]) -> None:
    given = {"cache": InMemoryServerCache(), **options}
    with pytest.raises(error, match="ResponseCache"):
        ResponseCache(**given)


# ---------------------------------------------------------------- keys


def inputs(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "agent_id": "agent", "scope": "tenant-1",
        "model": {"provider": "openai", "model_id": "gpt-5-mini"},
        "prompt": [{"role": "system", "content": "be nice"},
                   {"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "step_number": 0}
    return {**base, **changes}


def test_the_same_inputs_give_the_same_key() -> None:
    key = build_response_cache_key(inputs())

    assert key == build_response_cache_key(ResponseCacheKeyInputs(**inputs()))
    assert key.startswith("procflow:agent-response:agent:")
    assert len(key.rsplit(":", 1)[1]) == 32


def test_dict_order_does_not_change_the_key() -> None:
    reordered = {"step_number": 0, "prompt": [
        {"content": "be nice", "role": "system"},
        {"content": [{"text": "hi", "type": "text"}], "role": "user"}],
        "model": {"model_id": "gpt-5-mini", "provider": "openai"},
        "scope": "tenant-1", "agent_id": "agent"}

    assert build_response_cache_key(reordered) == build_response_cache_key(inputs())


@pytest.mark.parametrize("change", [
    pytest.param({"agent_id": "other"}, id="agent"),
    pytest.param({"scope": "tenant-2"}, id="scope"),
    pytest.param({"scope": None}, id="no-scope"),
    pytest.param({"model": {"provider": "openai", "model_id": "gpt-5"}}, id="model"),
    pytest.param({"prompt": [{"role": "user", "content": "hi!"}]}, id="prompt"),
    pytest.param({"step_number": 1}, id="step"),
])
def test_every_input_changes_the_key(change: dict[str, Any]) -> None:
    assert build_response_cache_key(inputs(**change)) != build_response_cache_key(inputs())


def test_scoped_keys_carry_a_full_scope_digest_and_shared_keys_none() -> None:
    scoped = build_response_cache_key(inputs()).split(":")
    shared = build_response_cache_key(inputs(scope=None)).split(":")

    assert scoped[3] == "scope-" + hashlib.sha256(b"tenant-1").hexdigest()
    assert shared[3] == "shared" and "tenant-1" not in ":".join(scoped)


def test_inline_media_is_hashed_by_content() -> None:
    def with_image(data: bytes) -> str:
        return build_response_cache_key(inputs(prompt=[{"role": "user", "content": [
            {"type": "image", "data": data, "media_type": "image/png"}]}]))

    assert with_image(b"\x89PNG-a") == with_image(b"\x89PNG-a")
    assert with_image(b"\x89PNG-a") != with_image(b"\x89PNG-b")


def test_incomplete_inputs_are_a_clear_error() -> None:
    with pytest.raises(ValueError, match="step_number"):
        build_response_cache_key({"agent_id": "a", "scope": None, "model": {}, "prompt": []})


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)


# (a named function, not a lambda: when a draw runs past max_leaves, Hypothesis describes
# the strategy, and describing a lambda parses its source with ``ast``, which CPython 3.11
# can fail deep in a recursion: "AST constructor recursion depth mismatch")
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text() | st.binary(max_size=8)
    | st.floats(allow_nan=False),
    _containers, max_leaves=20)


@given(prompt=st.lists(st.dictionaries(st.text(max_size=6), json_values, max_size=4),
                       max_size=4),
       scope=st.none() | st.text(max_size=10), step=st.integers(0, 50))
def test_keys_are_stable_whatever_the_mapping_order(prompt: list[dict[str, Any]],
                                                    scope: str | None, step: int) -> None:
    def reverse(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: reverse(value[k]) for k in reversed(list(value))}
        if isinstance(value, list):
            return [reverse(v) for v in value]
        return value

    given_inputs = inputs(prompt=prompt, scope=scope, step_number=step)
    key = build_response_cache_key(given_inputs)

    assert key == build_response_cache_key(reverse(given_inputs))
    assert key == build_response_cache_key(given_inputs)
