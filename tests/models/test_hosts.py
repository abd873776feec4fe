"""OpenAI-compatible hosts by name: Ollama (no key), Groq, Mistral... on OpenAIChatModel."""

from __future__ import annotations

import json
import traceback
from typing import Any

import pytest

from procflow.agent import Agent, tool
from procflow.errors import APICallError
from procflow.messages import Finish, TextDelta, ToolCallChunk
from procflow.models import ModelRequest, OpenAIChatModel, ToolSpec, resolve_model
from procflow.models.hosts import OPENAI_COMPATIBLE
from procflow.models.resolve import PROVIDERS

HI = [{"role": "user", "content": "hi"}]
KEY = "gsk-test-SECRET-groq"


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None) -> str:
    return "data: " + json.dumps({"choices": [{"index": 0, "delta": delta or {},
                                               "finish_reason": finish}]}) + "\n\n"


USAGE = "data: " + json.dumps({"choices": [], "usage": {
    "prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}) + "\n\n"
DONE = "data: [DONE]\n\n"


def tool_call_reply() -> list[str]:
    call = {"index": 0, "id": "call_a", "type": "function",
            "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}
    return [chunk({"tool_calls": [call]}), chunk(finish="tool_calls"), USAGE, DONE]


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"snow in {city}"


async def test_ollama_needs_no_key_and_reads_its_base_url(
        server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_BASE_URL", f"{server.url}/v1")
    server.sse([chunk({"content": "Hel"}), chunk({"content": "lo"}), chunk(finish="stop"),
                USAGE, DONE])
    model = resolve_model("ollama/llama3.2")
    assert isinstance(model, OpenAIChatModel) and model.provider == "ollama"
    chunks = [c async for c in model.stream(ModelRequest(prompt=HI))]
    assert chunks[:2] == [TextDelta("Hel"), TextDelta("lo")]
    assert isinstance(chunks[-1], Finish) and chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == 7
    assert server.last.path == "/v1/chat/completions"
    assert "authorization" not in server.last.headers
    assert server.last.json["model"] == "llama3.2"


async def test_ollama_default_url() -> None:
    assert OpenAIChatModel("llama3.2", provider="ollama").base_url == \
        "http://127.0.0.1:11434/v1"


async def test_ollama_streams_tool_calls_through_an_agent(
        server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_BASE_URL", f"{server.url}/v1")
    server.sse(tool_call_reply())
    server.sse([chunk({"content": "Snowing."}), chunk(finish="stop"), USAGE, DONE])
    out = await Agent(id="o", model="ollama/qwen3", tools=[weather]).stream("Oslo?")
    chunks = [c async for c in out.full_stream]
    assert [c for c in chunks if isinstance(c, ToolCallChunk)] == [
        ToolCallChunk("call_a", "weather", {"city": "Oslo"})]
    assert await out.text == "Snowing."
    assert server.requests[1].json["messages"][-1] == {
        "role": "tool", "tool_call_id": "call_a", "content": "snow in Oslo"}


async def test_a_named_host_sends_its_key_and_names_itself_in_errors(
        server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROQ_API_KEY", KEY)
    monkeypatch.setenv("GROQ_BASE_URL", f"{server.url}/openai/v1")
    server.reply(status=400, json={"error": {"message": f"bad key {KEY}",
                                             "type": "invalid_request_error"}})
    model = resolve_model("groq/llama-3.3-70b")
    with pytest.raises(APICallError) as info:
        _ = [c async for c in model.stream(ModelRequest(prompt=HI))]
    err = info.value
    assert str(err).startswith("groq rejected the request with HTTP 400")
    assert KEY not in "".join(traceback.format_exception(err)) + err.body
    assert server.last.headers["authorization"] == f"Bearer {KEY}"
    assert server.last.path == "/openai/v1/chat/completions"


async def test_a_named_host_without_its_key_says_which_variable() -> None:
    with pytest.raises(APICallError, match="MISTRAL_API_KEY is not set"):
        _ = [c async for c in resolve_model("mistral/mistral-small").stream(
            ModelRequest(prompt=HI))]


async def test_mistral_is_not_sent_stream_options(server: Any) -> None:
    server.sse([chunk({"content": "ok"}), chunk(finish="stop"), DONE])
    model = OpenAIChatModel("mistral-small", provider="mistral", api_key="k",
                            base_url=server.url)
    _ = [c async for c in model.stream(ModelRequest(prompt=HI, tools=[
        ToolSpec("t", "d", {"type": "object"})]))]
    assert "stream_options" not in server.last.json


def test_every_host_is_a_provider_and_unknown_hosts_are_refused() -> None:
    assert set(OPENAI_COMPATIBLE) <= set(PROVIDERS)
    assert {"ollama", "groq", "mistral", "openrouter", "together", "deepseek",
            "fireworks"} <= set(OPENAI_COMPATIBLE)
    assert resolve_model("openrouter/anthropic/claude-sonnet-4.5").model_id == \
        "anthropic/claude-sonnet-4.5"
    with pytest.raises(ValueError, match="unknown provider 'nope'; known hosts: openai"):
        OpenAIChatModel("m", provider="nope")
    with pytest.raises(ValueError, match="known providers: anthropic, google, openai"):
        resolve_model("nope/m")
