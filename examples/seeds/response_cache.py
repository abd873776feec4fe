"""response-cache-reference.zh-HK.md, run offline: ``ResponseCache`` in front of a model.

Run it with ``python examples/seeds/response_cache.py``. A ``FunctionModel`` giving
the next of its answers at every call stands in for ``'openai/gpt-5'`` and counts its
calls, so each line shows whether the answer came from the model or from the cache
(``InMemoryServerCache``, the embedded default; ``RedisCache(url, prefix=...)`` in
production). The tests in ``tests/seeds/test_response_cache.py`` check the same
behaviour option by option.
"""

from __future__ import annotations

import anyio

from procflow.agent import Agent, FullOutput
from procflow.cache import InMemoryServerCache
from procflow.context import RequestContext
from procflow.models import FunctionModel
from procflow.processors import ResponseCache

answers = iter(["Paris.", "Paris, France.", "Hi there!", "Hello again!"])
model = FunctionModel(lambda request: next(answers))
cache = InMemoryServerCache()

agent = Agent(
    id="search-agent",
    name="Search Agent",
    instructions="You answer questions concisely.",
    model=model,
    input_processors=[ResponseCache(cache, ttl=600)],
)


def show(label: str, result: FullOutput) -> None:
    source = "cache" if result.steps[0].from_cache else "model"
    print(f"{label:<34} {result.text!r:<20} from {source}; model calls so far: "
          f"{len(model.requests)}")


async def streamed(prompt: str, request_context: RequestContext) -> FullOutput:
    out = await agent.stream(prompt, request_context=request_context)
    async for _ in out.full_stream:
        pass
    result: FullOutput = await out.output
    return result


async def main() -> None:
    # First call hits the LLM and writes to the cache.
    show("first call", await agent.generate("What is the capital of France?"))
    # Second identical call replays the cached response.
    show("second identical call", await agent.generate("What is the capital of France?"))
    # Force a fresh call but still update the cache.
    show("bust=True", await agent.generate(
        "What is the capital of France?", request_context=ResponseCache.context(bust=True)))
    show("after the bust", await agent.generate("What is the capital of France?"))

    # ResponseCache.context(options): a fixed key for this call, read skipped.
    show("stream, key='custom', bust", await streamed(
        "hello", ResponseCache.context(key="custom", bust=True)))
    show("other prompt, key='custom'", await agent.generate(
        "something else", request_context=ResponseCache.context(key="custom")))

    # ResponseCache.apply_context(request_context, options): merged into a context.
    ctx = RequestContext()
    ctx.set("caller-meta", {"userId": "u-123"})
    ResponseCache.apply_context(ctx, key="custom", bust=True)
    show("apply_context(ctx, bust=True)", await streamed("hello", ctx))
    print(f"caller-meta kept: {ctx.get('caller-meta')}")


if __name__ == "__main__":
    anyio.run(main)
