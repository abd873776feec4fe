"""OpenAIResponsesModel against a real local server speaking the Responses API (SSE)."""

from __future__ import annotations

import json
import traceback
from typing import Any

import pytest

from procflow.agent import Agent, tool
from procflow.errors import APICallError
from procflow.messages import Finish, ReasoningDelta, TextDelta, ToolCallChunk
from procflow.models import ModelRequest, OpenAIResponsesModel, OutputSchema, ToolSpec

KEY = "sk-test-SECRET-responses"
HI = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
USAGE = {"input_tokens": 20, "input_tokens_details": {"cached_tokens": 8},
         "output_tokens": 6, "output_tokens_details": {"reasoning_tokens": 2},
         "total_tokens": 26}


def event(kind: str, **data: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"


def completed(status: str = "completed", **extra: Any) -> str:
    return event(f"response.{status}", response={"status": status, "usage": USAGE, **extra})


def text_reply(*pieces: str) -> list[str]:
    return [event("response.created", response={"status": "in_progress"}),
            *(event("response.output_text.delta", item_id="msg_1", delta=p) for p in pieces),
            completed()]


def call_reply(call_id: str, name: str, arguments: str) -> list[str]:
    item = {"type": "function_call", "id": "fc_1", "call_id": call_id, "name": name,
            "arguments": ""}
    return [event("response.output_item.added", output_index=0, item=item),
            event("response.function_call_arguments.delta", item_id="fc_1",
                  delta=arguments[:5]),
            event("response.function_call_arguments.delta", item_id="fc_1",
                  delta=arguments[5:]),
            event("response.output_item.done", output_index=0,
                  item={**item, "arguments": arguments}),
            completed()]


def make(server: Any) -> OpenAIResponsesModel:
    return OpenAIResponsesModel("gpt-test", api_key=KEY, base_url=f"{server.url}/v1",
                                max_retries=0)


async def run(model: OpenAIResponsesModel, **fields: Any) -> list[Any]:
    return [c async for c in model.stream(ModelRequest(prompt=fields.pop("prompt", HI),
                                                       **fields))]


async def test_streams_text_reasoning_and_usage(server: Any) -> None:
    server.sse([event("response.reasoning_summary_text.delta", delta="hmm"),
                *text_reply("Hel", "lo")])
    chunks = await run(make(server), settings={"max_tokens": 40})
    assert chunks[:3] == [ReasoningDelta("hmm"), TextDelta("Hel"), TextDelta("lo")]
    finish = chunks[-1]
    assert isinstance(finish, Finish) and finish.finish_reason == "stop"
    assert finish.usage is not None
    assert (finish.usage.input_tokens, finish.usage.cached_input_tokens,
            finish.usage.reasoning_tokens) == (20, 8, 2)
    sent = server.last.json
    assert server.last.path == "/v1/responses"
    assert sent["instructions"] == "Be brief." and sent["store"] is False
    assert sent["input"] == [{"role": "user", "content": [{"type": "input_text",
                                                          "text": "hi"}]}]
    assert sent["max_output_tokens"] == 40


async def test_function_calls_and_structured_output(server: Any) -> None:
    server.sse(call_reply("call_9", "weather", '{"city": "Rome"}'))
    spec = ToolSpec("weather", "The weather.", {"type": "object"})
    schema = OutputSchema("answer", {"type": "object"})
    chunks = await run(make(server), tools=[spec], tool_choice="required",
                       output_schema=schema)
    assert chunks[0] == ToolCallChunk("call_9", "weather", {"city": "Rome"})
    assert chunks[-1].finish_reason == "tool-calls"
    sent = server.last.json
    assert sent["tools"][0]["name"] == "weather" and sent["tool_choice"] == "required"
    assert sent["text"]["format"]["type"] == "json_schema"


async def test_an_incomplete_answer_says_why(server: Any) -> None:
    server.sse([event("response.output_text.delta", delta="cut"),
                completed("incomplete", incomplete_details={"reason": "max_output_tokens"})])
    chunks = await run(make(server))
    assert chunks[-1].finish_reason == "length"


async def test_errors_name_the_provider_and_hide_the_key(server: Any) -> None:
    server.sse([event("response.failed", response={"status": "failed", "error": {
        "code": "server_error", "message": f"boom {KEY}"}})])
    with pytest.raises(APICallError, match=r"openai stream error \(server_error\)") as info:
        await run(make(server))
    assert info.value.is_retryable
    assert KEY not in "".join(traceback.format_exception(info.value)) + info.value.body


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"warm in {city}"


async def test_an_agent_runs_a_tool_then_answers(server: Any) -> None:
    server.sse(call_reply("call_1", "weather", '{"city": "Rome"}'))
    server.sse(text_reply("Warm."))
    out = await Agent(id="r", model=make(server), tools=[weather]).generate("Rome?")
    assert out.text == "Warm."
    items = server.requests[1].json["input"]
    assert items[-2:] == [
        {"type": "function_call", "call_id": "call_1", "name": "weather",
         "arguments": '{"city":"Rome"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "warm in Rome"}]
