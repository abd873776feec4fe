"""AnthropicModel against a real local server speaking the Messages API (SSE)."""

from __future__ import annotations

import json
import traceback
from typing import Any

import pytest

from procflow.errors import APICallError
from procflow.messages import Chunk, Finish, ToolCallChunk
from procflow.models import AnthropicModel, ModelRequest, ToolSpec, resolve_model
from procflow.records import Usage

KEY = "sk-ant-test-SECRET-123"
HI = [{"role": "user", "content": "hi"}]


def ev(kind: str, **fields: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n"


def start(input_tokens: int = 10) -> str:
    return ev("message_start", message={
        "id": "msg_1", "type": "message", "role": "assistant", "content": [],
        "usage": {"input_tokens": input_tokens, "output_tokens": 1}})


def text_block(index: int, *pieces: str) -> list[str]:
    return [ev("content_block_start", index=index, content_block={"type": "text", "text": ""}),
            ev("ping"),
            *(ev("content_block_delta", index=index,
                 delta={"type": "text_delta", "text": p}) for p in pieces),
            ev("content_block_stop", index=index)]


def tool_block(index: int, id: str, name: str, *json_pieces: str) -> list[str]:
    return [ev("content_block_start", index=index,
               content_block={"type": "tool_use", "id": id, "name": name, "input": {}}),
            *(ev("content_block_delta", index=index,
                 delta={"type": "input_json_delta", "partial_json": p}) for p in json_pieces),
            ev("content_block_stop", index=index)]


def end(stop_reason: str = "end_turn", output_tokens: int = 5) -> list[str]:
    return [ev("message_delta", delta={"stop_reason": stop_reason, "stop_sequence": None},
               usage={"output_tokens": output_tokens}),
            ev("message_stop")]


def make(server: Any, **options: Any) -> AnthropicModel:
    options.setdefault("api_key", KEY)
    options.setdefault("max_retries", 0)  # retries: tests/models/test_resilience.py
    return AnthropicModel("claude-test", base_url=server.url, **options)


async def run(model: AnthropicModel, prompt: list[dict[str, Any]] | None = None,
              **fields: Any) -> list[Chunk]:
    return [c async for c in model.stream(ModelRequest(prompt=prompt or HI, **fields))]


async def fail(model: AnthropicModel, **fields: Any) -> APICallError:
    with pytest.raises(APICallError) as info:
        await run(model, **fields)
    return info.value


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_streams_text_and_usage(server: Any, anyio_backend: str) -> None:
    server.sse([start(12), *text_block(0, "Hel", "lo"), *end("end_turn", 3)])
    chunks = await run(make(server))
    assert [c.text for c in chunks if c.type == "text-delta"] == ["Hel", "lo"]
    assert chunks[-1] == Finish("stop", Usage(12, 3, 15))
    request = server.last
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert (request.json["model"], request.json["stream"], request.json["max_tokens"]) == (
        "claude-test", True, 1024)


async def test_fragmented_tool_input_is_assembled(server: Any) -> None:
    server.sse([start(), *text_block(0, "Looking."),
                *tool_block(1, "toolu_1", "lookup", '{"ord', 'er": ', "42}"),
                *tool_block(2, "toolu_2", "ping"), *end("tool_use")])
    chunks = await run(make(server))
    assert [c.type for c in chunks] == ["text-delta", "tool-call", "tool-call", "finish"]
    assert [c for c in chunks if c.type == "tool-call"] == [
        ToolCallChunk("toolu_1", "lookup", {"order": 42}), ToolCallChunk("toolu_2", "ping", {})]
    assert chunks[-1].payload.finish_reason == "tool-calls"


async def test_thinking_becomes_reasoning_delta(server: Any) -> None:
    server.sse([start(),
                ev("content_block_start", index=0,
                   content_block={"type": "thinking", "thinking": ""}),
                ev("content_block_delta", index=0,
                   delta={"type": "thinking_delta", "thinking": "hmm"}),
                ev("content_block_delta", index=0,
                   delta={"type": "signature_delta", "signature": "sig"}),
                ev("content_block_stop", index=0), *text_block(1, "ok"), *end("max_tokens")])
    chunks = await run(make(server))
    assert [(c.type, c.text) for c in chunks[:2]] == [
        ("reasoning-delta", "hmm"), ("text-delta", "ok")]
    assert chunks[-1].payload.finish_reason == "length"


async def test_request_converts_prompt_tools_and_settings(server: Any) -> None:
    server.sse([start(), *end()])
    prompt = [
        {"role": "system", "content": "be brief"},
        {"role": "system", "content": [{"type": "text", "text": "use tools"}]},
        {"role": "user", "content": "where is order 1?"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool-call", "tool_call_id": "t1", "tool_name": "lookup",
             "args": {"id": 1}},
            {"type": "tool-call", "tool_call_id": "t2", "tool_name": "lookup",
             "args": {"id": 2}}]},
        {"role": "tool", "content": [
            {"type": "tool-result", "tool_call_id": "t1", "tool_name": "lookup",
             "result": {"status": "shipped"}, "is_error": False},
            {"type": "tool-result", "tool_call_id": "t2", "tool_name": "lookup",
             "result": "not found", "is_error": True}]},
        {"role": "user", "content": "thanks"},
    ]
    tools = [ToolSpec("lookup", "Find an order", {"type": "object"})]
    await run(make(server, max_tokens=99), prompt, tools=tools, tool_choice="required",
              settings={"temperature": 0.1, "stop": "END", "seed": 3, "top_k": 5})
    body = server.last.json
    assert body["system"] == "be brief\n\nuse tools"
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "where is order 1?"}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "t1", "name": "lookup", "input": {"id": 1}},
            {"type": "tool_use", "id": "t2", "name": "lookup", "input": {"id": 2}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": '{"status":"shipped"}'},
            {"type": "tool_result", "tool_use_id": "t2", "content": "not found",
             "is_error": True},
            {"type": "text", "text": "thanks"}]},
    ]
    assert body["tools"] == [{"name": "lookup", "description": "Find an order",
                              "input_schema": {"type": "object"}}]
    assert body["tool_choice"] == {"type": "any"}
    assert (body["max_tokens"], body["temperature"], body["stop_sequences"], body["top_k"]) == (
        99, 0.1, ["END"], 5)
    assert "seed" not in body


@pytest.mark.parametrize(("choice", "sent"), [
    ("auto", {"type": "auto"}),
    ("required", {"type": "any"}),
    ({"type": "tool", "tool_name": "lookup"}, {"type": "tool", "name": "lookup"}),
])
async def test_tool_choice_mapping(server: Any, choice: Any, sent: Any) -> None:
    server.sse([start(), *end()])
    await run(make(server), tools=[ToolSpec("lookup", "d", {})], tool_choice=choice)
    assert server.last.json["tool_choice"] == sent


async def test_tool_choice_none_omits_the_tools(server: Any) -> None:
    server.sse([start(), *end()])
    await run(make(server), tools=[ToolSpec("lookup", "d", {})], tool_choice="none")
    assert "tools" not in server.last.json and "tool_choice" not in server.last.json


async def test_400_is_an_api_call_error_not_retryable(server: Any) -> None:
    server.reply(status=400, json={"type": "error", "error": {
        "type": "invalid_request_error", "message": "max_tokens: too large"}})
    err = await fail(make(server))
    assert (err.status_code, err.is_retryable) == (400, False)
    assert "max_tokens: too large" in str(err) and "invalid_request_error" in err.body


@pytest.mark.parametrize("status", [429, 500, 529])
async def test_transient_statuses_are_retryable(server: Any, status: int) -> None:
    server.reply(status=status, json={"type": "error", "error": {
        "type": "overloaded_error", "message": "Overloaded"}})
    err = await fail(make(server))
    assert err.status_code == status and err.is_retryable


@pytest.mark.parametrize(("kind", "retryable"), [("overloaded_error", True),
                                                 ("invalid_request_error", False)])
async def test_error_event_mid_stream(server: Any, kind: str, retryable: bool) -> None:
    server.sse([start(), *text_block(0, "a"),
                ev("error", error={"type": kind, "message": "Overloaded"})])
    err = await fail(make(server))
    assert err.is_retryable is retryable
    assert str(err) == f"anthropic stream error ({kind}): Overloaded"


@pytest.mark.parametrize("how", ["reset", "close"])
async def test_connection_lost_mid_stream_is_retryable(server: Any, how: str) -> None:
    server.sse([start(), *text_block(0, "a")], end=how)
    err = await fail(make(server))
    assert err.is_retryable and err.status_code is None


async def test_stream_ending_before_message_stop_is_retryable(server: Any) -> None:
    server.sse([start(), *text_block(0, "a")])
    err = await fail(make(server))
    assert err.is_retryable and "no message_stop" in str(err)


async def test_timeout_is_retryable_and_says_so(server: Any) -> None:
    server.sse([start(), *end()], delay=2)
    err = await fail(make(server, timeout=0.2))
    assert err.is_retryable and "timed out after 0.2s" in str(err)


async def test_malformed_event_is_a_clear_error(server: Any) -> None:
    server.sse([start(), "event: content_block_delta\ndata: {\"type\": \n\n"])
    err = await fail(make(server))
    assert str(err).startswith("malformed SSE event from anthropic: ")
    assert not err.is_retryable


async def test_unparsable_tool_input_names_the_tool(server: Any) -> None:
    server.sse([start(), *tool_block(0, "toolu_1", "lookup", '{"id": '), *end("tool_use")])
    err = await fail(make(server))
    assert "'lookup'" in str(err)


async def test_missing_key_is_a_clear_error(server: Any) -> None:
    err = await fail(AnthropicModel("claude-test", base_url=server.url))
    assert "ANTHROPIC_API_KEY is not set" in str(err) and not err.is_retryable
    assert server.requests == []


async def test_key_and_base_url_from_the_environment(server: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    server.sse([start(), *end()])
    await run(AnthropicModel("claude-test"))
    assert server.last.headers["x-api-key"] == KEY


async def test_api_key_never_appears_in_errors_or_repr(server: Any) -> None:
    echo = {"type": "error", "error": {"type": "authentication_error",
                                       "message": f"invalid x-api-key {KEY}"}}
    server.reply(status=401, json=echo)
    server.sse([start(), ev("error", error=echo["error"])])
    model = make(server)
    for _ in range(2):
        err = await fail(model)
        assert "***" in str(err)
        text = "".join(traceback.format_exception(err)) + repr(err) + err.body
        assert KEY not in text
    assert KEY not in repr(model)


def test_resolve_model_makes_an_anthropic_model() -> None:
    model = resolve_model("anthropic/claude-sonnet-4-5")
    assert isinstance(model, AnthropicModel) and model.model_id == "claude-sonnet-4-5"
