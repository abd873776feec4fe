"""The TypeScript examples of response-cache-reference.zh-HK.md, translated line for line,
and each constructor option, context option and helper export the page describes.

``ScriptedModel`` or ``in_order`` (a ``FunctionModel`` whose every call takes the next
answer) stands in for ``'openai/gpt-5'``; each records its calls in ``model.requests``,
so "replays the cached response" is checked by counting model calls. Names follow
DESIGN.md: ``requestContext`` -> ``request_context``, ``applyContext`` ->
``apply_context``, ``agentId`` -> ``agent_id`` (default ``"procflow-response-cache"``),
``stepNumber`` -> ``step_number``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from procflow.agent import Agent, FullOutput
from procflow.cache import InMemoryServerCache, RedisCache, ServerCache
from procflow.context import RequestContext
from procflow.memory import Memory
from procflow.models import FunctionModel, ScriptedModel, ToolCall
from procflow.processors import (
    ProcessInputStepArgs,
    Processor,
    ResponseCache,
    ResponseCacheKeyInputs,
    build_response_cache_key,
)
from procflow.processors.builtin.cache.response import (
    DEFAULT_RESPONSE_CACHE_TTL_SECONDS,
    RESPONSE_CACHE_CONTEXT_KEY,
)
from procflow.storage import InMemoryStorage
from procflow.tools import tool

QUESTION = "What is the capital of France?"


def in_order(*texts: str) -> FunctionModel:
    """A model answering its calls with ``texts`` in turn: these tests count the model's
    calls across independent conversations, where a ScriptedModel (which answers from
    the conversation) would give each the first turn."""
    answers = iter(texts)
    return FunctionModel(lambda request: next(answers))



class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def streamed(agent: Agent, prompt: str, **options: Any) -> FullOutput:
    out = await agent.stream(prompt, **options)
    async for _ in out.full_stream:
        pass
    result: FullOutput = await out.output
    return result


def search_agent(model: ScriptedModel | FunctionModel, cache: ServerCache, **options: Any) -> Agent:
    return Agent(
        id="search-agent",
        name="Search Agent",
        instructions="You answer questions concisely.",
        model=model,
        input_processors=[ResponseCache(cache, **options)],
    )


# -- 使用範例 (the usage example) ---------------------------------------------------------------


@pytest.fixture(params=["in-memory", pytest.param("redis", marks=pytest.mark.redis)])
async def cache(request: pytest.FixtureRequest) -> AsyncIterator[ServerCache]:
    if request.param == "in-memory":
        yield InMemoryServerCache()
        return
    url = request.getfixturevalue("redis_url")
    prefix = request.getfixturevalue("redis_prefix")
    async with RedisCache(url, prefix=f"{prefix}:") as redis_cache:
        yield redis_cache


async def test_usage_example(cache: ServerCache) -> None:
    model = in_order("Paris.", "Paris, France.")

    agent = Agent(
        id="search-agent",
        name="Search Agent",
        instructions="You answer questions concisely.",
        model=model,
        input_processors=[ResponseCache(cache, ttl=600)],
    )

    # First call hits the LLM and writes to the cache.
    first = await agent.generate("What is the capital of France?")
    assert (first.text, len(model.requests), first.steps[0].from_cache) == ("Paris.", 1, False)

    # Second identical call replays the cached response.
    second = await agent.generate("What is the capital of France?")
    assert (second.text, len(model.requests), second.steps[0].from_cache) == ("Paris.", 1, True)

    # Force a fresh call but still update the cache.
    third = await agent.generate("What is the capital of France?",
                                 request_context=ResponseCache.context(bust=True))
    assert (third.text, len(model.requests)) == ("Paris, France.", 2)
    fourth = await agent.generate("What is the capital of France?")
    assert (fourth.text, len(model.requests)) == ("Paris, France.", 2)  # the updated entry


@pytest.mark.redis
async def test_usage_example_ttl_reaches_redis(redis_url: str, redis_prefix: str) -> None:
    import redis.asyncio as aioredis

    async with RedisCache(redis_url, prefix=f"{redis_prefix}:") as cache:
        await search_agent(ScriptedModel(["Paris."]), cache, ttl=600).generate(QUESTION)
    client = aioredis.Redis.from_url(redis_url)
    try:
        keys = [k async for k in client.scan_iter(match=f"{redis_prefix}:*")]
        assert len(keys) == 1
        assert keys[0].decode().startswith(f"{redis_prefix}:procflow:agent-response:")
        assert 590_000 < await client.pttl(keys[0]) <= 600_000
    finally:
        await client.aclose()


# -- ResponseCache.context(options) --------------------------------------------------------------


async def test_context_helper_key_and_bust_on_stream() -> None:
    model = in_order("Hi there!", "Hello again!")
    agent = search_agent(model, InMemoryServerCache())

    out = await streamed(agent, "hello",
                         request_context=ResponseCache.context(key="custom", bust=True))
    assert (out.text, len(model.requests)) == ("Hi there!", 1)

    # The fixed key answers any prompt from the entry it names ...
    other = await agent.generate("a different prompt",
                                 request_context=ResponseCache.context(key="custom"))
    assert (other.text, len(model.requests), other.steps[0].from_cache) == ("Hi there!", 1,
                                                                            True)
    # ... and bust skips the read even though the entry exists (then rewrites it).
    again = await streamed(agent, "hello",
                           request_context=ResponseCache.context(key="custom", bust=True))
    assert (again.text, len(model.requests)) == ("Hello again!", 2)
    assert (await agent.generate("x", request_context=ResponseCache.context(
        key="custom"))).text == "Hello again!"


# -- ResponseCache.applyContext(requestContext, options) ------------------------------------------


async def test_apply_context_merges_into_an_existing_context() -> None:
    model = in_order("first", "second")
    agent = search_agent(model, InMemoryServerCache())
    await agent.generate("hello")

    ctx = RequestContext()
    ctx.set("caller-meta", {"userId": "u-123"})
    returned = ResponseCache.apply_context(ctx, bust=True)
    out = await streamed(agent, "hello", request_context=ctx)

    assert returned is ctx  # the same context, for chaining
    assert ctx.get("caller-meta") == {"userId": "u-123"}
    assert (out.text, len(model.requests)) == ("second", 2)  # bust: the model was called
    assert (await agent.generate("hello")).text == "second"  # ... and the cache updated


# -- Constructor 參數 (constructor options) --------------------------------------------------------


def test_cache_is_required_and_must_be_a_server_cache() -> None:
    with pytest.raises(TypeError):
        ResponseCache()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="ServerCache"):
        ResponseCache({})  # type: ignore[arg-type]


async def test_ttl_defaults_to_300_seconds_and_entries_expire() -> None:
    assert DEFAULT_RESPONSE_CACHE_TTL_SECONDS == 300
    clock = FakeClock()
    cache = InMemoryServerCache(clock=clock)
    assert ResponseCache(cache).ttl == 300
    model = in_order("old", "new")
    agent = search_agent(model, cache, ttl=600)
    await agent.generate(QUESTION)
    clock.now += 599
    assert (await agent.generate(QUESTION)).text == "old"
    clock.now += 2
    assert (await agent.generate(QUESTION)).text == "new"
    assert len(model.requests) == 2


async def test_scope_defaults_to_the_resource_id() -> None:
    model = in_order("for alice", "for bob")
    agent = search_agent(model, InMemoryServerCache())
    alice = await agent.generate(QUESTION, memory={"resource": "alice"})
    bob = await agent.generate(QUESTION, memory={"resource": "bob"})
    alice_again = await agent.generate(QUESTION, memory={"resource": "alice"})
    assert (alice.text, bob.text, alice_again.text) == ("for alice", "for bob", "for alice")
    assert len(model.requests) == 2


async def test_scope_none_shares_and_a_string_scope_is_fixed() -> None:
    model = in_order("shared", "tenant a")
    cache = InMemoryServerCache()
    shared = search_agent(model, cache, scope=None)
    await shared.generate(QUESTION, memory={"resource": "alice"})
    assert (await shared.generate(QUESTION, memory={"resource": "bob"})).text == "shared"
    fixed = search_agent(model, cache, scope="tenant-a")
    assert (await fixed.generate(QUESTION, memory={"resource": "alice"})).text == "tenant a"
    assert (await fixed.generate(QUESTION, memory={"resource": "bob"})).text == "tenant a"
    assert len(model.requests) == 2
    # Per call: ResponseCache.context(scope=...) for this request only.
    over = await fixed.generate(QUESTION, request_context=ResponseCache.context(scope=None))
    assert over.text == "shared" and len(model.requests) == 2


async def test_key_string_function_and_failing_function() -> None:
    model = in_order("one", "two", "three")
    cache = InMemoryServerCache()
    fixed = search_agent(model, cache, key="faq")
    await fixed.generate("first wording")
    assert (await fixed.generate("second wording")).text == "one"

    seen: list[ResponseCacheKeyInputs] = []

    def by_question(inputs: ResponseCacheKeyInputs) -> str:
        seen.append(inputs)
        return str(inputs.prompt[-1]["content"]).lower().strip("?! ")

    by_fn = search_agent(model, cache, key=by_question)
    await by_fn.generate("What is the capital of France?")
    assert (await by_fn.generate("WHAT IS THE CAPITAL OF FRANCE!")).text == "two"
    inputs = seen[0]
    assert inputs.agent_id == "procflow-response-cache" and inputs.scope is None
    assert inputs.model == {"provider": model.provider, "model_id": model.model_id}
    assert inputs.prompt[0] == {"role": "system", "content": "You answer questions concisely."}
    assert inputs.step_number == 0

    async def broken(inputs: ResponseCacheKeyInputs) -> str:
        raise RuntimeError("key service down")

    # A key function that raises falls back to the deterministic hash: still cached.
    falls_back = search_agent(model, cache, key=broken)
    assert (await falls_back.generate("Third question")).text == "three"
    assert (await falls_back.generate("Third question")).text == "three"
    assert len(model.requests) == 3
    default_key = build_response_cache_key(ResponseCacheKeyInputs(
        "procflow-response-cache", None, inputs.model,
        [inputs.prompt[0], {"role": "user", "content": "Third question"}], 0))
    assert await cache.get(default_key) is not None


async def test_bust_option_skips_every_read_but_still_writes() -> None:
    model = in_order("a", "b")
    cache = InMemoryServerCache()
    busting = search_agent(model, cache, bust=True)
    await busting.generate(QUESTION)
    assert (await busting.generate(QUESTION)).text == "b"
    assert len(model.requests) == 2
    reader = search_agent(model, cache)
    assert (await reader.generate(QUESTION)).text == "b"  # written by the busting agent


async def test_agent_id_namespaces_entries() -> None:
    model = in_order("from a", "from b")
    cache = InMemoryServerCache()
    a = search_agent(model, cache, agent_id="agent-a")
    b = search_agent(model, cache, agent_id="agent-b")
    await a.generate(QUESTION)
    assert (await b.generate(QUESTION)).text == "from b"
    assert (await search_agent(model, cache, agent_id="agent-a").generate(QUESTION)).text == \
        "from a"
    assert len(model.requests) == 2


def test_cache_ttl_and_agent_id_cannot_be_overridden_per_call() -> None:
    for option in ("cache", "ttl", "agent_id"):
        with pytest.raises(TypeError):
            ResponseCache.context(**{option: 1})


# -- the key comes from the resolved prompt (memory and earlier processors included) -------------


async def test_users_with_different_memory_get_different_keys() -> None:
    memory = Memory(storage=InMemoryStorage(), last_messages=10)
    await memory.save_messages(["I live in Lyon."], thread_id="t-alice", resource_id="alice")
    await memory.save_messages(["I live in Oslo."], thread_id="t-bob", resource_id="bob")
    model = in_order("Alice's answer", "Bob's answer")
    agent = Agent(id="search-agent", model=model, memory=memory,
                  input_processors=[ResponseCache(InMemoryServerCache(), scope=None)])
    alice = await agent.generate(QUESTION, memory={"thread": "t-alice", "resource": "alice"})
    bob = await agent.generate(QUESTION, memory={"thread": "t-bob", "resource": "bob"})
    assert (alice.text, bob.text) == ("Alice's answer", "Bob's answer")
    assert len(model.requests) == 2  # shared scope, but the prompts differ


async def test_each_step_of_the_tool_loop_is_cached_on_its_own() -> None:
    steps: list[int] = []

    @tool
    async def lookup(city: str) -> str:
        """Look a city up."""
        return f"{city} is in France"

    def record(inputs: ResponseCacheKeyInputs) -> str:
        steps.append(inputs.step_number)
        return build_response_cache_key(inputs).rsplit(":", 1)[-1]

    model = ScriptedModel([[ToolCall("lookup", {"city": "Paris"})], "Paris, France."])
    agent = Agent(id="search-agent", model=model, tools=[lookup],
                  input_processors=[ResponseCache(InMemoryServerCache(), key=record)])
    await agent.generate(QUESTION)
    again = await agent.generate(QUESTION)
    assert steps == [0, 1, 0, 1]
    assert [s.from_cache for s in again.steps] == [True, True]
    assert again.text == "Paris, France." and len(model.requests) == 2


# -- RESPONSE_CACHE_CONTEXT_KEY (clearing overrides mid-pipeline) ---------------------------------


class DropCacheOverrides(Processor):
    id = "drop-cache-overrides"

    def process_input_step(self, args: ProcessInputStepArgs) -> None:
        args.request_context.delete(RESPONSE_CACHE_CONTEXT_KEY)


async def test_deleting_the_context_key_drops_the_overrides() -> None:
    model = ScriptedModel(["cached"])
    cache = InMemoryServerCache()
    agent = Agent(id="search-agent", model=model,
                  input_processors=[DropCacheOverrides(), ResponseCache(cache)])
    await agent.generate(QUESTION)
    ctx = ResponseCache.context(bust=True)
    assert RESPONSE_CACHE_CONTEXT_KEY in ctx
    out = await agent.generate(QUESTION, request_context=ctx)
    assert out.text == "cached" and len(model.requests) == 1  # bust was dropped


# -- "使用 processLLMResponse 寫入已完成的回應" (completed responses are written): an
# answer an output processor rejected is not a completed one; DESIGN.md: "Failed or
# tripwired runs are not cached." ------------------------------------------------------


class RejectOnce(Processor):
    """Rejects the first answer it sees, in one hook, then lets every answer through."""

    def __init__(self, hook: str, *, retry: bool = False) -> None:
        self.id = f"reject-once-{hook}"
        self.hook = hook
        self.retry = retry
        self.rejected = False

    def implemented_hooks(self) -> frozenset[str]:
        return frozenset({self.hook})

    def _check(self, args: Any) -> Any:
        if not self.rejected:
            self.rejected = True
            args.abort("the answer leaks a secret", retry=self.retry)

    def process_output_step(self, args: Any) -> None:
        self._check(args)

    def process_output_result(self, args: Any) -> None:
        self._check(args)

    def process_output_stream(self, args: Any) -> Any:
        if args.part.type == "text-delta":
            self._check(args)
        return args.part


@pytest.mark.parametrize("hook", ["process_output_step", "process_output_result",
                                  "process_output_stream"])
@pytest.mark.parametrize("how", ["generate", "stream"])
async def test_a_rejected_answer_is_neither_stored_nor_served(hook: str, how: str) -> None:
    cache = InMemoryServerCache()
    model = in_order("the secret is 42", "I cannot share that")
    agent = Agent(id="search-agent", model=model, input_processors=[ResponseCache(cache)],
                  output_processors=[RejectOnce(hook)])
    run = agent.generate if how == "generate" else (lambda p: streamed(agent, p))
    first = await run(QUESTION)
    assert first.tripwire is not None and first.finish_reason == "other"
    second = await run(QUESTION)
    assert len(model.requests) == 2  # the rejected answer was not replayed
    assert second.tripwire is None and second.text == "I cannot share that"
    assert not second.steps[0].from_cache
    third = await run(QUESTION)  # the accepted answer is cached as usual
    assert third.text == "I cannot share that" and third.steps[0].from_cache
    assert len(model.requests) == 2


async def test_an_answer_rejected_with_a_retry_is_not_stored() -> None:
    cache = InMemoryServerCache()
    model = in_order("the secret is 42", "I cannot share that", "unused")
    agent = Agent(id="search-agent", model=model, input_processors=[ResponseCache(cache)],
                  output_processors=[RejectOnce("process_output_step", retry=True)],
                  max_processor_retries=1)
    first = await agent.generate(QUESTION)
    assert first.text == "I cannot share that" and len(model.requests) == 2
    # the retried call's prompt differs (it carries the feedback), so only the first
    # prompt's entry matters: it must not hold the rejected answer
    fresh = Agent(id="search-agent", model=in_order("a new answer"),
                  input_processors=[ResponseCache(cache)])
    again = await fresh.generate(QUESTION)
    assert again.text == "a new answer" and not again.steps[0].from_cache


async def test_a_failed_run_is_not_cached() -> None:
    from procflow.errors import APICallError

    cache = InMemoryServerCache()
    model = ScriptedModel([[ToolCall("lookup", {"q": "x"})],
                           APICallError("bad request", status_code=400)])

    @tool
    async def lookup(q: str) -> str:
        """Look up."""
        return "found"

    agent = Agent(id="search-agent", model=model, tools=[lookup],
                  input_processors=[ResponseCache(cache)])
    with pytest.raises(APICallError):
        await agent.generate(QUESTION)
    retried = Agent(id="search-agent", model=ScriptedModel(["direct answer"]),
                    input_processors=[ResponseCache(cache)])
    out = await retried.generate(QUESTION)
    assert out.text == "direct answer" and not out.steps[0].from_cache
