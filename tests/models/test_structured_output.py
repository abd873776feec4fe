"""Structured output: ``output_type=Model`` asks for JSON of its schema (natively on
OpenAI and Anthropic, by prompt otherwise), validates the answer, retries with the
errors, and streams partial answers. Providers are real local servers."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from procflow.agent import Agent
from procflow.errors import OutputValidationError
from procflow.models import AnthropicModel, OpenAIChatModel, ScriptedModel, ToolCall
from procflow.tools import tool

KEY = "sk-test-SECRET-123"


class City(BaseModel):
    """A city and its country."""

    name: str
    country: str
    population: int = 0


def openai_events(*pieces: str) -> list[str]:
    def data(obj: dict[str, Any]) -> str:
        return f"data: {json.dumps(obj)}\n\n"
    return [*(data({"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]})
              for p in pieces),
            data({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            "data: [DONE]\n\n"]


def anthropic_events(tool_name: str, *json_pieces: str) -> list[str]:
    def ev(kind: str, **fields: Any) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n"
    return [ev("message_start", message={"usage": {"input_tokens": 5, "output_tokens": 0}}),
            ev("content_block_start", index=0, content_block={
                "type": "tool_use", "id": "toolu_1", "name": tool_name, "input": {}}),
            ev("ping"),
            *(ev("content_block_delta", index=0,
                 delta={"type": "input_json_delta", "partial_json": p}) for p in json_pieces),
            ev("content_block_stop", index=0),
            ev("message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 9}),
            ev("message_stop")]


async def test_scripted_model_is_asked_by_prompt_and_the_answer_validated() -> None:
    model = ScriptedModel(['```json\n{"name": "Paris", "country": "France"}\n```'])
    agent = Agent(id="geo", model=model, output_type=City)
    out = await agent.generate("Capital of France?")
    assert out.output == City(name="Paris", country="France")
    system = model.requests[0].prompt[0]
    assert system["role"] == "system" and '"country"' in str(system["content"])
    assert model.requests[0].output_schema is not None
    assert model.requests[0].output_schema.name == "City"


async def test_an_invalid_answer_is_sent_back_and_retried() -> None:
    model = ScriptedModel(['{"name": "Paris"}', '{"name": "Paris", "country": "France"}'])
    agent = Agent(id="geo", model=model, output_type=City)
    out = await agent.generate("Capital of France?")
    assert out.output == City(name="Paris", country="France")
    assert len(model.requests) == 2 and len(out.steps) == 2
    feedback = str(model.requests[1].prompt[-1]["content"])
    assert "output-validation" in feedback and "country: Field required" in feedback
    assert all("output-validation" not in m.text for m in out.response.ui_messages)


async def test_an_answer_still_invalid_after_the_retries_fails_clearly() -> None:
    model = ScriptedModel(["not json", '{"name": 3}'])
    agent = Agent(id="geo", model=model, output_type=City)
    with pytest.raises(OutputValidationError) as info:
        await agent.generate("Capital of France?")
    err = info.value
    assert err.attempts == 2 and err.text == '{"name": 3}'
    assert "not a valid City after 2 attempt(s)" in str(err) and "name" in str(err)
    model = ScriptedModel(["nope"])
    with pytest.raises(OutputValidationError):
        await Agent(id="geo", model=model, output_type=City).generate("?", output_retries=0)
    assert len(model.requests) == 1


async def test_output_type_per_call_and_non_object_types() -> None:
    model = ScriptedModel(['{"result": [1, 2, 3]}'])
    first = await Agent(id="numbers", model=model).generate("three numbers",
                                                            output_type=list[int])
    assert first.output == [1, 2, 3]
    schema = model.requests[0].output_schema
    assert schema is not None and schema.schema["required"] == ["result"]
    # a new conversation: the scripted model answers its first turn again
    second = await Agent(id="numbers", model=ScriptedModel(["[4, 5]"])).generate(
        "two numbers", output_type=list[int])
    assert second.output == [4, 5]


async def test_tools_still_run_before_the_structured_answer() -> None:
    @tool
    def lookup(city: str) -> int:
        """Population of a city."""
        return 2_100_000

    model = ScriptedModel([[ToolCall("lookup", {"city": "Paris"})],
                           '{"name": "Paris", "country": "France", "population": 2100000}'])
    agent = Agent(id="geo", model=model, tools=[lookup], output_type=City)
    out = await agent.generate("Paris?")
    assert out.output is not None and out.output.population == 2_100_000


async def test_running_out_of_steps_gives_no_output() -> None:
    @tool
    def lookup(city: str) -> int:
        """Population of a city."""
        return 1

    model = ScriptedModel([[ToolCall("lookup", {"city": "Paris"})]])
    agent = Agent(id="geo", model=model, tools=[lookup], output_type=City, max_steps=1)
    out = await agent.generate("Paris?")
    assert out.output is None and out.finish_reason == "tool-calls"


async def test_without_output_type_nothing_changes() -> None:
    model = ScriptedModel(["plain text"])
    out = await Agent(id="plain", model=model).generate("hi")
    assert out.output is None and out.text == "plain text"
    assert model.requests[0].output_schema is None
    assert all(entry["role"] != "system" for entry in model.requests[0].prompt)


async def test_stream_exposes_partial_answers_then_the_final_one() -> None:
    model = ScriptedModel(['{"name": "Paris", "country": "Fra", "population": 2100000}'])
    agent = Agent(id="geo", model=model, output_type=City)
    out = await agent.stream("Paris?")
    partials = [p async for p in out.partial_output_stream]
    assert partials[-1] == City(name="Paris", country="Fra", population=2_100_000)
    assert any(p.country != "Fra" or p.population != 2_100_000 for p in partials[:-1]) or \
        len(partials) == 1
    assert await out.final_output == partials[-1]
    assert out.partial_output == partials[-1]


async def test_openai_gets_a_json_schema_response_format(server: Any) -> None:
    server.sse(openai_events('{"name": "Par', 'is", "country": "France"}'))
    model = OpenAIChatModel("gpt-4o-mini", api_key=KEY, base_url=f"{server.url}/v1")
    agent = Agent(id="geo", model=model, output_type=City)
    out = await agent.stream("Capital of France?")
    seen = [p async for p in out.partial_output_stream]
    assert await out.final_output == City(name="Paris", country="France")
    assert seen[-1] == City(name="Paris", country="France")
    body = server.last.json
    assert body["response_format"]["type"] == "json_schema"
    spec = body["response_format"]["json_schema"]
    assert spec["name"] == "City" and spec["schema"]["required"] == ["name", "country"]
    assert spec["description"] == "A city and its country."
    assert all(m["role"] != "system" for m in body["messages"])  # asked natively


async def test_openai_invalid_answer_is_retried(server: Any) -> None:
    server.sse(openai_events('{"name": "Paris"}'))
    server.sse(openai_events('{"name": "Paris", "country": "France"}'))
    model = OpenAIChatModel("gpt-4o-mini", api_key=KEY, base_url=f"{server.url}/v1")
    out = await Agent(id="geo", model=model, output_type=City).generate("?")
    assert out.output == City(name="Paris", country="France")
    assert "country: Field required" in server.last.json["messages"][-1]["content"]


async def test_anthropic_is_forced_to_call_the_answer_tool(server: Any) -> None:
    server.sse(anthropic_events("City", '{"name": "Paris", ', '"country": "France"}'))
    model = AnthropicModel("claude-test", api_key=KEY, base_url=server.url)
    agent = Agent(id="geo", model=model, output_type=City)
    out = await agent.generate("Capital of France?")
    assert out.output == City(name="Paris", country="France")
    assert out.finish_reason == "stop" and out.tool_calls == []
    body = server.last.json
    assert body["tool_choice"] == {"type": "tool", "name": "City"}
    [answer_tool] = body["tools"]
    assert answer_tool["name"] == "City" and answer_tool["input_schema"]["type"] == "object"


async def test_anthropic_with_other_tools_must_call_one(server: Any) -> None:
    @tool
    def lookup(city: str) -> str:
        """Look a city up."""
        return "found"

    server.sse(anthropic_events("City", '{"name": "Paris", "country": "France"}'))
    model = AnthropicModel("claude-test", api_key=KEY, base_url=server.url)
    out = await Agent(id="geo", model=model, tools=[lookup], output_type=City).generate("?")
    assert out.output == City(name="Paris", country="France")
    body = server.last.json
    assert body["tool_choice"] == {"type": "any"}
    assert [t["name"] for t in body["tools"]] == ["lookup", "City"]


def test_bad_output_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="output_retries must be an int >= 0"):
        Agent(id="a", model=ScriptedModel(["x"]), output_type=City, output_retries=-1)
    with pytest.raises(TypeError, match="cannot be described as a JSON schema"):
        Agent(id="a", model=ScriptedModel(["x"]), output_type=Callable[[int], int])
