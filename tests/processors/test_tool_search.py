"""ToolSearchProcessor: meta-tools, loading on the next step, per-thread state with a TTL."""

from __future__ import annotations

from typing import Any

import pytest

from procflow.agent import Agent, tool
from procflow.errors import ProcessorError
from procflow.models import ScriptedModel, ToolCall
from procflow.processors.builtin.tools.search import (
    ToolSearchOptions,
    ToolSearchProcessor,
)
from procflow.records import ToolResultRecord
from procflow.tools import Tool


@tool
def get_weather(city: str) -> str:
    """Get the current weather forecast for a city."""
    return f"sunny in {city}"


@tool
def convert_currency(amount: float, to: str) -> str:
    """Convert an amount of money into another currency using exchange rates."""
    return f"{amount} {to}"


@tool
def send_email(to: str, subject: str) -> str:
    """Send an email message to a recipient."""
    return f"sent to {to}"


@tool
def create_calendar_event(title: str) -> str:
    """Create an event in the user's calendar."""
    return f"created {title}"


TOOLS = [get_weather, convert_currency, send_email, create_calendar_event]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def offered(model: ScriptedModel) -> list[list[str]]:
    return [sorted(t.name for t in (r.tools or [])) for r in model.requests]


def agent(model: ScriptedModel, processor: ToolSearchProcessor, tools: Any = ()) -> Agent:
    return Agent(id="searcher", model=model, tools=tools, input_processors=[processor])


META = ["load_tool", "search_tools"]


async def test_search_load_then_call_on_the_next_step() -> None:
    model = ScriptedModel([
        [ToolCall("search_tools", {"query": "weather forecast"})],
        [ToolCall("load_tool", {"name": "get_weather"})],
        [ToolCall("get_weather", {"city": "Oslo"})],
        "It is sunny.",
    ])
    out = await agent(model, ToolSearchProcessor(TOOLS)).generate("weather in Oslo?")

    assert out.text == "It is sunny."
    assert offered(model)[:2] == [META, META]
    assert offered(model)[2] == sorted([*META, "get_weather"])
    found = out.tool_results[0].result["results"]
    assert found[0]["name"] == "get_weather" and found[0]["score"] > 0
    assert out.tool_results[2] == ToolResultRecord("call_3", "get_weather", "sunny in Oslo")


async def test_the_agents_own_tools_stay_offered() -> None:
    model = ScriptedModel(["ok"])
    await agent(model, ToolSearchProcessor(TOOLS), tools=[send_email]).generate("hi")
    assert offered(model) == [sorted([*META, "send_email"])]


async def test_a_hidden_tool_cannot_be_called_before_it_is_loaded() -> None:
    model = ScriptedModel([[ToolCall("get_weather", {"city": "Oslo"})], "done"])
    out = await agent(model, ToolSearchProcessor(TOOLS)).generate("hi")
    assert out.tool_results[0].is_error is True


async def test_unknown_name_is_an_error_listing_close_names() -> None:
    model = ScriptedModel([[ToolCall("load_tool", {"name": "get_wether"})], "done"])
    out = await agent(model, ToolSearchProcessor(TOOLS)).generate("hi")

    result = out.tool_results[0]
    assert result.is_error is True
    assert "unknown tool 'get_wether'" in result.result
    assert "get_weather" in result.result
    assert offered(model)[1] == META


def test_search_ranks_by_name_and_description() -> None:
    processor = ToolSearchProcessor(TOOLS, search={"top_k": 2})
    hits = processor.search("send an email")
    assert [h.name for h in hits] == ["send_email"]
    assert processor.search("nothing related here") == []
    assert len(processor.search("currency weather email calendar")) == 2


def test_min_score_filters_weak_matches() -> None:
    loose = ToolSearchProcessor(TOOLS).search("create event weather")
    strict = ToolSearchProcessor(TOOLS, search=ToolSearchOptions(min_score=loose[0].score - 0.01))
    assert len(loose) == 2
    assert [h.name for h in strict.search("create event weather")] == [loose[0].name]


async def test_loaded_tools_persist_per_thread_until_the_ttl() -> None:
    clock = Clock()
    processor = ToolSearchProcessor(TOOLS, ttl=60, clock=clock)
    first = ScriptedModel([[ToolCall("load_tool", {"name": "send_email"})], "loaded"])
    await agent(first, processor).generate("hi", memory={"thread": "t1", "resource": "u"})

    clock.now += 59
    second = ScriptedModel(["again"])
    await agent(second, processor).generate("hi", memory={"thread": "t1", "resource": "u"})
    other = ScriptedModel(["other"])
    await agent(other, processor).generate("hi", memory={"thread": "t2", "resource": "u"})
    clock.now += 61
    expired = ScriptedModel(["expired"])
    await agent(expired, processor).generate("hi", memory={"thread": "t1", "resource": "u"})

    assert offered(second) == [sorted([*META, "send_email"])]
    assert offered(other) == [META]
    assert offered(expired) == [META]


async def test_without_a_thread_loads_last_for_the_request_only() -> None:
    processor = ToolSearchProcessor(TOOLS)
    first = ScriptedModel([[ToolCall("load_tool", {"name": "send_email"})], "loaded"])
    await agent(first, processor).generate("hi")
    second = ScriptedModel(["fresh"])
    await agent(second, processor).generate("hi")

    assert offered(first)[1] == sorted([*META, "send_email"])
    assert offered(second) == [META]


def test_thread_store_is_bounded() -> None:
    processor = ToolSearchProcessor(TOOLS, max_threads=2)
    for thread in ("a", "b", "c"):
        processor._store.add(thread, "send_email")
    assert processor.loaded("a") == [] and processor.loaded("c") == ["send_email"]


@pytest.mark.parametrize(("kwargs", "message"), [
    pytest.param({"tools": [get_weather, get_weather]}, "duplicate tool names", id="duplicate"),
    pytest.param({"tools": []}, "tools is empty", id="empty"),
    pytest.param({"tools": [get_weather, "x"]}, "tools[1]", id="not-a-tool"),
    pytest.param({"tools": TOOLS, "search": {"top_k": 0}}, "top_k must be", id="top-k"),
    pytest.param({"tools": TOOLS, "search": {"min_score": -1}}, "min_score", id="min-score"),
    pytest.param({"tools": TOOLS, "search": {"topk": 3}}, "unknown search option", id="option"),
    pytest.param({"tools": TOOLS, "ttl": 0}, "ttl must be", id="ttl"),
])
def test_invalid_arguments_are_explained(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match="ToolSearchProcessor") as info:
        ToolSearchProcessor(**kwargs)
    assert message in str(info.value)


def test_a_tool_named_like_a_meta_tool_is_rejected() -> None:
    clash = Tool("search_tools", "mine", get_weather.input_schema, lambda data: "x")
    with pytest.raises(ValueError, match="reserved"):
        ToolSearchProcessor([clash])


async def test_a_step_tool_named_like_a_meta_tool_is_a_processor_error() -> None:
    clash = Tool("search_tools", "mine", get_weather.input_schema, lambda data: "x")
    with pytest.raises(ProcessorError, match="clashes with the meta-tool"):
        await agent(ScriptedModel(["ok"]), ToolSearchProcessor(TOOLS), tools=[clash]).generate("hi")
