"""CostGuardProcessor through a real Agent: budgets per scope and window, both
strategies, pricing, and fail-open ledgers (in memory and Redis)."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any
from uuid import uuid4

import pytest
import redis.asyncio as aioredis

from procflow.agent import Agent, FullOutput
from procflow.models import ScriptedModel, ToolCall
from procflow.processors import ProcessorViolation
from procflow.processors.builtin.cost.guard import CostGuardProcessor, ModelPrice
from procflow.processors.builtin.cost.ledger import InMemoryCostLedger
from procflow.processors.builtin.cost.redis import RedisCostLedger

# ScriptedModel counts one token per word: a "hi" prompt answered "ok" uses 1 + 1 tokens.
ONE_PER_TOKEN = {"scripted/scripted": ModelPrice(input=1_000_000, output=1_000_000)}
LOGGER = "procflow.processors.cost_guard"


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


async def ask(guard: CostGuardProcessor, user: str | None = "u1", thread: str = "t1",
              turns: Any = ("ok",), model_id: str = "scripted") -> FullOutput:
    memory = {"thread": thread, "resource": user} if user else None
    agent = Agent(id="budgeted", model=ScriptedModel(list(turns), model_id=model_id),
                  input_processors=[guard])
    return await agent.generate("hi", memory=memory) if memory else await agent.generate("hi")


async def test_blocks_once_the_budget_is_spent() -> None:
    guard = CostGuardProcessor(2.0, prices=ONE_PER_TOKEN)
    first = await ask(guard)
    second = await ask(guard)

    assert first.text == "ok" and first.tripwire is None
    assert second.finish_reason == "other" and second.text == ""
    assert second.tripwire is not None
    assert second.tripwire.processor_id == "cost-guard"
    assert second.tripwire.metadata == {"usage": 2.0, "max_cost": 2.0, "scope": "resource",
                                           "scope_key": "u1"}
    assert second.tripwire.reason == ("Cost limit exceeded: 2 spent of the 2 allowed for "
                                         "this resource")


async def test_warn_strategy_reports_and_lets_the_call_go_on() -> None:
    seen: list[ProcessorViolation] = []
    guard = CostGuardProcessor(1.0, prices=ONE_PER_TOKEN, strategy="warn",
                               message="spent {usage}/{limit} ({scope_key})")
    guard.on_violation = seen.append
    await ask(guard)
    out = await ask(guard, turns=[[ToolCall("nothing")], "still ok"])

    assert out.text == "still ok" and out.tripwire is None
    assert [v.message for v in seen] == ["spent 2/1 (u1)"]  # once per request
    assert seen[0].detail["scope"] == "resource"


async def test_scopes_do_not_mix() -> None:
    guard = CostGuardProcessor(2.0, prices=ONE_PER_TOKEN)
    await ask(guard, user="alice")
    assert (await ask(guard, user="bob")).tripwire is None
    assert (await ask(guard, user="alice")).tripwire is not None


async def test_thread_scope_counts_per_thread() -> None:
    guard = CostGuardProcessor(2.0, prices=ONE_PER_TOKEN, scope="thread")
    await ask(guard, thread="a")
    assert (await ask(guard, thread="b")).tripwire is None
    assert (await ask(guard, user="someone-else", thread="a")).tripwire is not None


async def test_run_scope_stops_a_long_run_but_not_the_next() -> None:
    guard = CostGuardProcessor(1.0, prices=ONE_PER_TOKEN, scope="run")
    long = await ask(guard, turns=[[ToolCall("nothing")], "never"])  # step 0 costs 1
    short = await ask(guard)

    assert long.finish_reason == "other" and long.tripwire is not None
    assert long.tripwire.metadata["scope"] == "run"
    assert short.text == "ok"


async def test_spending_leaves_the_window() -> None:
    clock = Clock()
    guard = CostGuardProcessor(2.0, prices=ONE_PER_TOKEN, window=timedelta(hours=1),
                               clock=clock)
    await ask(guard)
    clock.now += 3599
    assert (await ask(guard)).tripwire is not None
    clock.now += 2
    assert (await ask(guard)).tripwire is None


async def test_unknown_model_warns_once_and_counts_as_free(
        caplog: pytest.LogCaptureFixture) -> None:
    guard = CostGuardProcessor(1.0, prices=ONE_PER_TOKEN)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(2):
            assert (await ask(guard, model_id="mystery")).tripwire is None

    warnings = [r.getMessage() for r in caplog.records if "no price" in r.getMessage()]
    assert len(warnings) == 1 and "'scripted/mystery'" in warnings[0]


async def test_default_price_covers_unknown_models() -> None:
    guard = CostGuardProcessor(2.0, prices=ONE_PER_TOKEN, default_price=(1_000_000, 0))
    await ask(guard, model_id="mystery")  # 1 input token
    assert (await ask(guard, model_id="mystery")).tripwire is None
    assert (await ask(guard, model_id="mystery")).tripwire is not None


async def test_without_a_scope_id_nothing_is_checked(caplog: pytest.LogCaptureFixture) -> None:
    ledger = InMemoryCostLedger()
    guard = CostGuardProcessor(1.0, prices=ONE_PER_TOKEN, ledger=ledger)
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        for _ in range(2):
            assert (await ask(guard, user=None)).tripwire is None

    assert len(ledger) == 0
    assert any("not checked" in r.getMessage() for r in caplog.records)


class BrokenLedger:
    async def add(self, key: str, cost: float, *, at: float, ttl: float) -> None:
        raise RuntimeError("ledger down")

    async def total(self, key: str, *, since: float) -> float:
        raise RuntimeError("ledger down")


async def test_a_failing_ledger_fails_open(caplog: pytest.LogCaptureFixture) -> None:
    guard = CostGuardProcessor(0.5, prices=ONE_PER_TOKEN, ledger=BrokenLedger())
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        out = await ask(guard)

    assert out.text == "ok"
    assert sum("ledger down" in r.getMessage() for r in caplog.records) == 2


def test_price_arithmetic() -> None:
    price = ModelPrice(input=2.0, output=8.0, cached_input=0.5)
    usage = {"input_tokens": 1_000_000, "cached_input_tokens": 400_000,
             "output_tokens": 500_000}
    assert price.cost(usage) == pytest.approx(0.6 * 2 + 0.4 * 0.5 + 0.5 * 8)
    assert ModelPrice.of({"input": 1, "output": 2}).cost({"output_tokens": 10**6}) == 2


async def test_memory_ledger_is_windowed_and_bounded() -> None:
    ledger = InMemoryCostLedger(max_keys=2, max_entries_per_key=3)
    for at in range(5):
        await ledger.add("a", 1.0, at=float(at), ttl=100)
    await ledger.add("b", 1.0, at=0, ttl=100)
    await ledger.add("c", 1.0, at=0, ttl=100)

    assert len(ledger) == 2 and await ledger.total("a", since=0) == 0  # "a" was evicted
    assert await ledger.total("c", since=0) == 1
    await ledger.add("c", 2.0, at=200, ttl=100)  # the first entry expired
    assert await ledger.total("c", since=-1000) == 2


async def test_memory_ledger_merges_old_entries_without_losing_cost() -> None:
    ledger = InMemoryCostLedger(max_entries_per_key=2)
    for at in range(4):
        await ledger.add("a", 1.0, at=float(at), ttl=100)
    assert await ledger.total("a", since=0) == 4


@pytest.mark.parametrize(("kwargs", "message"), [
    pytest.param({"max_cost": 0}, "max_cost must be > 0", id="zero-budget"),
    pytest.param({"max_cost": -1}, "max_cost must be", id="negative"),
    pytest.param({"scope": "tenant"}, "scope must be one of", id="scope"),
    pytest.param({"strategy": "shout"}, "strategy must be one of", id="strategy"),
    pytest.param({"window": 0}, "window must be", id="window"),
    pytest.param({"message": "{cost}"}, "not a valid template", id="template"),
    pytest.param({"prices": {"gpt": (1, 1)}}, "provider/model_id", id="price-key"),
    pytest.param({"prices": {"a/b": {"input": 1}}}, "needs 'input' and 'output'", id="price"),
    pytest.param({"prices": {"a/b": (-1, 1)}}, "input price", id="negative-price"),
    pytest.param({"ledger": object()}, "CostLedger", id="ledger"),
])
def test_invalid_arguments_are_explained(kwargs: dict[str, Any], message: str) -> None:
    options = {"max_cost": 1.0, **kwargs}
    with pytest.raises(ValueError, match="CostGuardProcessor") as info:
        CostGuardProcessor(**options)
    assert message in str(info.value)


# -- Redis ---------------------------------------------------------------------------


@pytest.mark.redis
async def test_redis_ledger_is_shared_between_guards(redis_url: str, redis_prefix: str,
                                                     raw: aioredis.Redis) -> None:
    async with RedisCostLedger(redis_url, prefix=redis_prefix) as one, \
            RedisCostLedger(redis_url, prefix=redis_prefix) as two:
        first = CostGuardProcessor(2.0, prices=ONE_PER_TOKEN, ledger=one, window=600)
        second = CostGuardProcessor(2.0, prices=ONE_PER_TOKEN, ledger=two, window=600)
        assert (await ask(first)).tripwire is None
        blocked = await ask(second)
        assert (await ask(second, user="u2")).tripwire is None

    assert blocked.tripwire is not None and blocked.tripwire.metadata["usage"] == 2.0
    key = f"{redis_prefix}:resource%3Au1"
    assert await raw.zcard(key) == 1
    assert 0 < await raw.ttl(key) <= 600


@pytest.mark.redis
async def test_redis_ledger_windows_by_score(redis_url: str, redis_prefix: str) -> None:
    async with RedisCostLedger(redis_url, prefix=redis_prefix) as ledger:
        await ledger.add("k", 1.5, at=100.0, ttl=50)
        await ledger.add("k", 2.0, at=140.0, ttl=50)
        await ledger.add("k", 4.0, at=160.0, ttl=50)  # trims the entry at 100

        assert await ledger.total("k", since=0) == 6.0
        assert await ledger.total("k", since=150) == 4.0
        assert await ledger.total("other", since=0) == 0.0


async def test_unreachable_redis_lets_the_call_proceed_with_a_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    url = f"redis://:secret-{uuid4().hex}@127.0.0.1:1/0"
    async with RedisCostLedger(url, connect_timeout=0.5, timeout=0.5) as ledger:
        guard = CostGuardProcessor(0.5, prices=ONE_PER_TOKEN, ledger=ledger)
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            out = await ask(guard)

    assert out.text == "ok" and out.tripwire is None
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(messages) == 2 and all("redis://127.0.0.1:1/0" in m for m in messages)
    assert not any("secret" in m for m in messages)
