"""What a call cost: prices, ``Usage.cost`` summed over steps, sub-agents and runs, and
where it shows (``procflow runs``, ``procflow trace``, the cost guard)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from rich.console import Console

from procflow import create_step, create_workflow
from procflow.agent import Agent, tool
from procflow.messages import Finish
from procflow.models import ModelRequest, OpenAIChatModel, ScriptedModel
from procflow.models.prices import PRICES, ModelPrice, price_of, priced, set_prices
from procflow.processors import CostGuardProcessor
from procflow.records import Usage
from procflow.storage import InMemoryStorage
from procflow.studio import TraceView
from procflow.studio.listing import print_runs
from procflow.studio.store import Store

KEY = "sk-test-SECRET-prices"
DONE = "data: [DONE]\n\n"


@pytest.fixture(autouse=True)
def _prices() -> Iterator[None]:
    saved = dict(PRICES)
    yield
    PRICES.clear()
    PRICES.update(saved)


def reply(content: str | None = None, *, call: dict[str, Any] | None = None,
          prompt: int = 1000, completion: int = 100, cached: int = 0) -> list[str]:
    delta: dict[str, Any] = {"content": content} if content else {"tool_calls": [call]}
    finish = "stop" if content else "tool_calls"
    usage = {"prompt_tokens": prompt, "completion_tokens": completion,
             "total_tokens": prompt + completion,
             "prompt_tokens_details": {"cached_tokens": cached},
             "completion_tokens_details": {"reasoning_tokens": 40}}
    events = [{"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
              {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
              {"choices": [], "usage": usage}]
    return [f"data: {json.dumps(e)}\n\n" for e in events] + [DONE]


def model(server: Any, model_id: str = "gpt-4o-mini") -> OpenAIChatModel:
    return OpenAIChatModel(model_id, api_key=KEY, base_url=f"{server.url}/v1", max_retries=0)


@tool
def lookup(order: int) -> str:
    """Look an order up."""
    return f"order {order} shipped"


def test_a_price_covers_its_dated_snapshots_only() -> None:
    mini = PRICES["openai/gpt-4o-mini"]
    assert price_of("openai/gpt-4o-mini-2024-07-18") == mini
    assert price_of("openai/gpt-4o-2024-08-06") == PRICES["openai/gpt-4o"]
    assert price_of("anthropic/claude-sonnet-4-5-20250929") == \
        PRICES["anthropic/claude-sonnet-4-5"]
    assert price_of("openai/gpt-4o-audio") is None and price_of("ollama/llama3.2") is None


def test_set_prices_adds_and_replaces_and_checks_everything_first() -> None:
    set_prices({"ollama/llama3.2": (0, 0), "openai/gpt-4o": {"input": 2.0, "output": 8.0}})
    assert price_of("ollama/llama3.2") == ModelPrice(0, 0)
    assert PRICES["openai/gpt-4o"] == ModelPrice(2.0, 8.0)
    with pytest.raises(ValueError, match="'provider/model_id'"):
        set_prices({"a/b": (1, 1), "gpt": (1, 1)})
    with pytest.raises(ValueError, match="input price"):
        set_prices({"a/b": (-1, 1)})
    assert "a/b" not in PRICES


def test_cached_input_is_priced_at_its_own_rate() -> None:
    usage = Usage(1_000_000, 1_000_000, 2_000_000, cached_input_tokens=400_000)
    assert ModelPrice(1.0, 4.0, 0.1).cost(usage) == pytest.approx(0.6 + 0.04 + 4.0)
    assert priced(usage, "nope/model") is usage


def test_costs_sum_and_unknown_costs_stay_unknown() -> None:
    known, other, unknown = Usage(1, 1, 2, cost=0.5), Usage(1, 0, 1, cost=0.25), Usage(3, 0, 3)
    assert (known + other).cost == 0.75
    assert (known + unknown).cost == 0.5 and (unknown + known).cost == 0.5
    assert (unknown + unknown).cost is None
    assert Usage.from_dict((known + unknown).to_dict()) == known + unknown
    with pytest.raises(ValueError, match="cost"):
        Usage.from_dict({"input_tokens": 1, "cost": -1})


async def test_a_call_reports_its_providers_counts_and_cost(server: Any) -> None:
    server.sse(reply("hi", prompt=1000, completion=100, cached=600))
    chunks = [c async for c in model(server).stream(ModelRequest(prompt=[
        {"role": "user", "content": "hi"}]))]
    finish = chunks[-1]
    assert isinstance(finish, Finish) and finish.usage is not None
    usage = finish.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens,
            usage.reasoning_tokens) == (1000, 100, 600, 40)
    assert usage.cost == pytest.approx((400 * 0.15 + 600 * 0.075 + 100 * 0.60) / 1e6)


async def test_an_agent_sums_its_steps_and_the_run_and_trace_show_it(server: Any) -> None:
    server.sse(reply(call={"index": 0, "id": "c1", "type": "function",
                           "function": {"name": "lookup", "arguments": '{"order": 7}'}}))
    server.sse(reply("Shipped."))
    storage = InMemoryStorage()
    agent = Agent(id="shop", model=model(server), tools=[lookup], storage=storage)
    out = await agent.generate("where is order 7?")
    step_cost = (1000 * 0.15 + 100 * 0.60) / 1e6
    assert out.usage.total_tokens == 2200
    assert out.usage.cost == pytest.approx(2 * step_cost)
    assert [s.usage["cost"] for s in out.steps] == pytest.approx([step_cost] * 2)
    # procflow runs: each agent run's tokens and cost
    console = Console(width=120, color_system=None, record=True, file=io.StringIO())
    await print_runs(console, Store(storage, "memory", "--db", owned=False), mode="tty",
                     workflow=None, status=None, limit=10)
    listed = console.export_text()
    assert "tokens" in listed and "cost" in listed
    row = next(line for line in listed.splitlines() if "agent:shop" in line)
    assert "2,200" in row and "$0.00042" in row
    # procflow trace: each model call's tokens and cost
    trace = await storage.load_trace(out.run_id)
    assert trace is not None
    console = Console(width=200, color_system=None, record=True, file=io.StringIO())
    console.print(TraceView(trace))
    assert "in 1000 / out 100 tok · $0.00021" in console.export_text()


async def test_sub_agents_and_workflow_runs_sum_the_cost(server: Any) -> None:
    server.sse(reply("one"))
    server.sse(reply("two"))
    first = Agent(id="first", model=model(server))
    second = Agent(id="second", model=model(server, "gpt-4o"))

    wf = (create_workflow(id="pair").then(create_step(first))
          .then(create_step(id="to-text", execute=lambda ctx: ctx.input_data["text"]))
          .then(create_step(second)).commit())
    result = await wf.create_run().start(input_data="question")
    assert result.usage is not None
    assert result.usage.cost == pytest.approx(
        (1000 * 0.15 + 100 * 0.60) / 1e6 + (1000 * 2.50 + 100 * 10.0) / 1e6)


async def test_an_unpriced_model_costs_none_and_shows_a_question_mark() -> None:
    storage = InMemoryStorage()
    agent = Agent(id="offline", model=ScriptedModel(["hello there"], usage_per_word=1),
                  storage=storage)
    out = await agent.generate("hi")
    assert out.usage.total_tokens > 0 and out.usage.cost is None
    console = Console(width=120, color_system=None, record=True, file=io.StringIO())
    await print_runs(console, Store(storage, "memory", "--db", owned=False), mode="tty",
                     workflow=None, status=None, limit=10)
    row = next(line for line in console.export_text().splitlines() if "agent:offline" in line)
    assert row.rstrip().endswith("?")


class RecordingLedger:
    """A cost ledger that remembers what it was given."""

    def __init__(self) -> None:
        self.added: list[float] = []

    async def add(self, key: str, cost: float, *, at: float, ttl: float) -> None:
        self.added.append(cost)

    async def total(self, key: str, *, since: float) -> float:
        return sum(self.added)


async def test_the_cost_guard_uses_the_calls_cost(server: Any) -> None:
    server.sse(reply("one", prompt=1_000_000, completion=0))
    ledger = RecordingLedger()
    guard = CostGuardProcessor(0.10, scope="run", ledger=ledger)  # no prices of its own
    out = await Agent(id="guarded", model=model(server), input_processors=[guard]).generate("hi")
    assert out.text == "one"
    assert ledger.added == [pytest.approx(0.15)] and out.usage.cost == pytest.approx(0.15)
