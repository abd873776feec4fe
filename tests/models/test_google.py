"""GoogleModel against a real local server speaking Gemini's streamGenerateContent (SSE)."""

from __future__ import annotations

import json
import logging
import traceback
from typing import Any

import pytest
from pydantic import BaseModel

from procflow.agent import Agent, tool
from procflow.errors import APICallError
from procflow.messages import Chunk, Finish, ReasoningDelta, TextDelta, ToolCallChunk
from procflow.models import GoogleModel, ModelRequest, OutputSchema, ToolSpec, resolve_model
from procflow.records import Usage
from procflow.storage import InMemoryStorage

KEY = "AIza-test-SECRET-google"
HI = [{"role": "user", "content": "hi"}]
PATH = "/v1beta/models/gemini-test:streamGenerateContent?alt=sse"


def event(parts: list[dict[str, Any]] | None = None, finish: str | None = None,
          usage: dict[str, int] | None = None) -> str:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts or []},
                                 "index": 0}
    if finish:
        candidate["finishReason"] = finish
    data: dict[str, Any] = {"candidates": [candidate], "modelVersion": "gemini-test"}
    if usage:
        data["usageMetadata"] = usage
    return f"data: {json.dumps(data)}\r\n\r\n"


USAGE = {"promptTokenCount": 7, "candidatesTokenCount": 3, "thoughtsTokenCount": 2,
         "cachedContentTokenCount": 4, "totalTokenCount": 12}


def text_reply(*pieces: str) -> list[str]:
    return [*(event([{"text": p}]) for p in pieces[:-1]),
            event([{"text": pieces[-1]}], "STOP", USAGE)]


def make(server: Any, **options: Any) -> GoogleModel:
    options.setdefault("api_key", KEY)
    options.setdefault("max_retries", 0)
    return GoogleModel("gemini-test", base_url=server.url, **options)


async def run(model: GoogleModel, prompt: list[dict[str, Any]] | None = None,
              **fields: Any) -> list[Chunk]:
    return [c async for c in model.stream(ModelRequest(prompt=prompt or HI, **fields))]


async def test_streams_text_reasoning_and_usage(server: Any) -> None:
    server.sse([event([{"text": "let me think", "thought": True}]), *text_reply("Hel", "lo")])
    chunks = await run(make(server))
    assert chunks[:3] == [ReasoningDelta("let me think"), TextDelta("Hel"), TextDelta("lo")]
    assert chunks[-1] == Finish("stop", Usage(7, 5, 12, reasoning_tokens=2,
                                              cached_input_tokens=4))
    assert server.last.path == PATH and server.last.headers["x-goog-api-key"] == KEY
    assert server.last.json == {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}


async def test_function_calls_become_tool_calls(server: Any) -> None:
    server.sse([event([{"functionCall": {"name": "weather", "args": {"city": "Paris"}},
                        "thoughtSignature": "sig-1"}], "STOP", USAGE)])
    spec = ToolSpec("weather", "The weather.", {"type": "object", "properties": {
        "city": {"type": "string"}}})
    model = make(server)
    chunks = await run(model, tools=[spec], tool_choice="required")
    assert chunks[0] == ToolCallChunk("call_1", "weather", {"city": "Paris"})
    assert isinstance(chunks[-1], Finish) and chunks[-1].finish_reason == "tool-calls"
    sent = server.last.json
    assert sent["tools"] == [{"functionDeclarations": [{
        "name": "weather", "description": "The weather.",
        "parametersJsonSchema": spec.parameters}]}]
    assert sent["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    # The call and its result go back as functionCall / functionResponse, signed.
    server.sse(text_reply("sunny"))
    await run(model, [*HI, {"role": "assistant", "content": [
        {"type": "tool-call", "tool_call_id": "call_1", "tool_name": "weather",
         "args": {"city": "Paris"}}]}, {"role": "tool", "content": [
             {"type": "tool-result", "tool_call_id": "call_1", "tool_name": "weather",
              "result": "sunny"}]}])
    model_turn, result_turn = server.last.json["contents"][1:]
    assert model_turn == {"role": "model", "parts": [{"functionCall": {
        "name": "weather", "args": {"city": "Paris"}}, "thoughtSignature": "sig-1"}]}
    assert result_turn == {"role": "user", "parts": [{"functionResponse": {
        "name": "weather", "response": {"result": "sunny"}}}]}


async def test_system_settings_and_structured_output(server: Any) -> None:
    server.sse(text_reply('{"city": "Paris"}'))
    schema = OutputSchema("answer", {"type": "object", "properties": {
        "city": {"type": "string"}}})
    prompt = [{"role": "system", "content": "Be brief."}, *HI]
    await run(make(server), prompt, output_schema=schema,
              settings={"temperature": 0.2, "max_tokens": 50, "stop": "END",
                        "thinkingConfig": {"thinkingBudget": 0}})
    sent = server.last.json
    assert sent["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert sent["generationConfig"] == {
        "responseMimeType": "application/json", "responseJsonSchema": schema.schema,
        "temperature": 0.2, "maxOutputTokens": 50, "stopSequences": ["END"],
        "thinkingConfig": {"thinkingBudget": 0}}


async def test_an_http_error_names_googles_message_and_hides_the_key(server: Any) -> None:
    server.reply(status=400, json={"error": {"code": 400, "status": "INVALID_ARGUMENT",
                                             "message": f"API key {KEY} not valid"}})
    with pytest.raises(APICallError) as info:
        await run(make(server))
    err = info.value
    assert err.status_code == 400 and not err.is_retryable
    assert "not valid (INVALID_ARGUMENT)" in str(err)
    text = "".join(traceback.format_exception(err)) + err.body
    assert KEY not in text and "***" in text


async def test_an_error_event_mid_stream(server: Any) -> None:
    server.sse([event([{"text": "par"}]), 'data: {"error": {"code": 503, "status": '
                '"UNAVAILABLE", "message": "overloaded"}}\n\n'])
    with pytest.raises(APICallError, match=r"google stream error \(UNAVAILABLE\): "
                                           "overloaded") as info:
        await run(make(server))
    assert info.value.is_retryable


async def test_a_stream_cut_before_a_finish_reason_is_retryable(server: Any) -> None:
    server.sse([event([{"text": "par"}])])
    with pytest.raises(APICallError, match="no finishReason") as info:
        await run(make(server))
    assert info.value.is_retryable


async def test_key_and_base_url_from_the_environment(
        server: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    monkeypatch.setenv("GOOGLE_BASE_URL", server.url)
    server.reply(status=503, body="down", headers={"retry-after": "0"})
    server.sse(text_reply("hi"))
    model = resolve_model("google/gemini-test")
    assert isinstance(model, GoogleModel)
    with caplog.at_level(logging.DEBUG):
        chunks = [c async for c in model.stream(ModelRequest(prompt=HI))]
    assert chunks[0] == TextDelta("hi")
    assert server.last.headers["x-goog-api-key"] == KEY and server.last.path == PATH
    assert "retry 1" in caplog.text and KEY not in caplog.text


async def test_missing_key_names_both_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    with pytest.raises(APICallError, match="GOOGLE_API_KEY nor GEMINI_API_KEY"):
        await run(GoogleModel("gemini-test"))


class City(BaseModel):
    city: str


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


async def test_an_agent_calls_tools_then_answers_in_a_schema(server: Any) -> None:
    server.sse([event([{"functionCall": {"name": "weather", "args": {"city": "Paris"}}}],
                      "STOP", USAGE)])
    server.sse([event([{"functionCall": {"name": "City", "args": {"city": "Paris"}}}],
                      "STOP", USAGE)])
    storage = InMemoryStorage()
    agent = Agent(id="g", model=make(server), tools=[weather], output_type=City,
                  storage=storage)
    out = await agent.generate("Where is it sunny?")
    assert out.output == City(city="Paris") and out.finish_reason == "stop"
    assert out.tool_results[0].result == "sunny in Paris"
    assert out.usage.input_tokens == 14
    first = server.requests[0].json
    assert [d["name"] for d in first["tools"][0]["functionDeclarations"]] == ["weather", "City"]
    assert first["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    trace = await storage.load_trace(out.run_id)
    assert trace is not None
    assert KEY not in json.dumps([dict(s) for s in trace.spans], default=str)


async def test_an_agent_streams_text(server: Any) -> None:
    server.sse(text_reply("Hello", " there"))
    out = await Agent(id="g", model=make(server)).stream("hi")
    assert [t async for t in out.text_stream] == ["Hello", " there"]
