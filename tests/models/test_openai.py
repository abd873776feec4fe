"""OpenAIChatModel against a real local server speaking chat completions (SSE)."""

from __future__ import annotations

import json
import socket
import traceback
from typing import Any

import anyio
import httpx
import pytest

from procflow.errors import APICallError
from procflow.messages import Chunk, Finish, ToolCallChunk
from procflow.models import ModelRequest, OpenAIChatModel, ToolSpec, resolve_model
from procflow.models.http import SSEError, aclose_shared_client, iter_sse, shared_client
from procflow.records import Usage

KEY = "sk-test-SECRET-123"
DONE = "data: [DONE]\n\n"
HI = [{"role": "user", "content": "hi"}]


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None,
          usage: dict[str, int] | None = None) -> str:
    data: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk",
                            "choices": [] if usage else [
                                {"index": 0, "delta": delta or {}, "finish_reason": finish}]}
    if usage:
        data["usage"] = usage
    return f"data: {json.dumps(data)}\n\n"


def call(index: int, *, id: str | None = None, name: str | None = None,
         args: str = "") -> dict[str, Any]:
    fragment: dict[str, Any] = {"index": index, "function": {"arguments": args}}
    if id:
        fragment.update(id=id, type="function")
        fragment["function"]["name"] = name
    return {"tool_calls": [fragment]}


def make(server: Any, **options: Any) -> OpenAIChatModel:
    options.setdefault("api_key", KEY)
    options.setdefault("max_retries", 0)  # retries: tests/models/test_resilience.py
    return OpenAIChatModel("gpt-4o-mini", base_url=f"{server.url}/v1", **options)


async def run(model: OpenAIChatModel, prompt: list[dict[str, Any]] | None = None,
              **fields: Any) -> list[Chunk]:
    request = ModelRequest(prompt=prompt or HI, **fields)
    return [c async for c in model.stream(request)]


async def fail(model: OpenAIChatModel, **fields: Any) -> APICallError:
    with pytest.raises(APICallError) as info:
        await run(model, **fields)
    return info.value


USAGE = {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_streams_text_and_usage(server: Any, anyio_backend: str) -> None:
    server.sse([chunk({"role": "assistant", "content": ""}), chunk({"content": "Hel"}),
                chunk({"content": "lo"}), chunk(finish="stop"), chunk(usage=USAGE), DONE])
    chunks = await run(make(server))
    assert [c.text for c in chunks if c.type == "text-delta"] == ["Hel", "lo"]
    finish = chunks[-1]
    assert isinstance(finish, Finish) and finish.usage is not None
    assert finish == Finish("stop", Usage(7, 2, 9, cost=finish.usage.cost))
    assert finish.usage.cost == pytest.approx((7 * 0.15 + 2 * 0.60) / 1e6)  # list price
    assert server.last.path == "/v1/chat/completions"
    assert server.last.headers["authorization"] == f"Bearer {KEY}"
    body = server.last.json
    assert (body["model"], body["stream"], body["stream_options"]) == (
        "gpt-4o-mini", True, {"include_usage": True})


async def test_fragmented_tool_calls_are_assembled(server: Any) -> None:
    server.sse([chunk(call(0, id="call_a", name="lookup", args='{"or')),
                chunk(call(0, args='der": 4')), chunk(call(1, id="call_b", name="ping")),
                chunk(call(0, args="2}")), chunk(finish="tool_calls"), DONE])
    chunks = await run(make(server))
    assert [c for c in chunks if c.type == "tool-call"] == [
        ToolCallChunk("call_a", "lookup", {"order": 42}), ToolCallChunk("call_b", "ping", {})]
    assert chunks[-1].payload.finish_reason == "tool-calls"
    assert chunks[-1] == Finish("tool-calls", Usage(0, 0, 0, cost=0.0))


async def test_reasoning_content_becomes_reasoning_delta(server: Any) -> None:
    server.sse([chunk({"reasoning_content": "think"}), chunk({"content": "ok"}),
                chunk(finish="length"), DONE])
    chunks = await run(make(server))
    assert [(c.type, c.text) for c in chunks[:2]] == [
        ("reasoning-delta", "think"), ("text-delta", "ok")]
    assert chunks[-1].payload.finish_reason == "length"


async def test_request_converts_prompt_tools_and_settings(server: Any) -> None:
    server.sse([chunk(finish="stop"), DONE])
    prompt = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "what is"},
                                     {"type": "image", "url": None, "data": b"\x89PNG",
                                      "media_type": None}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "let me look"},
            {"type": "tool-call", "tool_call_id": "c1", "tool_name": "lookup",
             "args": {"id": 1}}]},
        {"role": "tool", "content": [
            {"type": "tool-result", "tool_call_id": "c1", "tool_name": "lookup",
             "result": {"status": "shipped"}, "is_error": False}]},
    ]
    tools = [ToolSpec("lookup", "Find an order", {"type": "object", "properties": {}})]
    settings = {"temperature": 0.2, "max_tokens": 50, "top_p": 0.9, "stop": ["END"],
                "seed": 7, "response_format": {"type": "json_object"}}
    await run(make(server), prompt, tools=tools,
              tool_choice={"type": "tool", "tool_name": "lookup"}, settings=settings)
    body = server.last.json
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [
            {"type": "text", "text": "what is"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}}]},
        {"role": "assistant", "content": "let me look", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "lookup", "arguments": '{"id":1}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"status":"shipped"}'},
    ]
    assert body["tools"] == [{"type": "function", "function": {
        "name": "lookup", "description": "Find an order",
        "parameters": {"type": "object", "properties": {}}}}]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}
    assert {k: body[k] for k in settings} == settings


@pytest.mark.parametrize("choice", ["auto", "none", "required"])
async def test_tool_choice_strings_pass_through(server: Any, choice: str) -> None:
    server.sse([chunk(finish="stop"), DONE])
    await run(make(server), tools=[ToolSpec("t", "d", {})], tool_choice=choice)
    assert server.last.json["tool_choice"] == choice


async def test_max_tokens_is_max_completion_tokens_for_reasoning_models(server: Any) -> None:
    server.sse([chunk(finish="stop"), DONE])
    model = OpenAIChatModel("gpt-5-mini", api_key=KEY, base_url=server.url)
    await run(model, settings={"max_tokens": 5})
    assert server.last.json["max_completion_tokens"] == 5
    assert "max_tokens" not in server.last.json


async def test_400_is_an_api_call_error_not_retryable(server: Any) -> None:
    server.reply(status=400, json={"error": {"message": "Unknown model 'x'",
                                             "type": "invalid_request_error"}})
    err = await fail(make(server))
    assert (err.status_code, err.is_retryable) == (400, False)
    assert "Unknown model 'x'" in str(err)
    assert "HTTP 400" in str(err)
    assert json.loads(err.body)["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize("status", [408, 409, 429, 500, 503])
async def test_transient_statuses_are_retryable(server: Any, status: int) -> None:
    server.reply(status=status, body="slow down")
    err = await fail(make(server))
    assert (err.status_code, err.is_retryable, err.body) == (status, True, "slow down")


async def test_reset_mid_stream_is_retryable(server: Any) -> None:
    server.sse([chunk({"content": "partial"})], end="reset")
    seen: list[Chunk] = []
    with pytest.raises(APICallError) as info:
        async for c in make(server).stream(ModelRequest(prompt=HI)):
            seen.append(c)
    assert info.value.is_retryable and info.value.status_code is None
    assert "reset" in str(info.value)
    assert [c.text for c in seen] in ([], ["partial"])


async def test_close_mid_body_is_retryable(server: Any) -> None:
    server.sse([chunk({"content": "partial"})], end="close")
    err = await fail(make(server))
    assert err.is_retryable and "closed the connection" in str(err)


async def test_stream_ending_without_finish_is_retryable(server: Any) -> None:
    server.sse([chunk({"content": "partial"})])
    err = await fail(make(server))
    assert err.is_retryable and "before the answer finished" in str(err)


async def test_timeout_waiting_for_the_answer(server: Any) -> None:
    server.reply(wait=3, json={})
    err = await fail(make(server, timeout=0.3))
    assert err.is_retryable and err.status_code is None
    assert "timed out after 0.3s" in str(err)


async def test_timeout_between_events(server: Any) -> None:
    server.sse([chunk({"content": "a"}), chunk(finish="stop"), DONE], delay=0.2)
    client = httpx.AsyncClient(timeout=httpx.Timeout(5.0, read=0.1))
    async with client:
        err = await fail(make(server, client=client))
    assert err.is_retryable and "read timed out after 0.1s" in str(err)


async def test_connection_refused_is_retryable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = OpenAIChatModel("m", api_key=KEY, base_url=f"http://127.0.0.1:{port}",
                            max_retries=0)
    err = await fail(model)
    assert err.is_retryable and "connection refused" in str(err)


@pytest.mark.parametrize("line", ["data: {not json\n\n", "garbage line\n\n",
                                  'data: ["a list"]\n\n'])
async def test_malformed_sse_is_a_clear_error(server: Any, line: str) -> None:
    server.sse([chunk({"content": "a"}), line, DONE])
    err = await fail(make(server))
    assert str(err).startswith("malformed SSE event from openai: ")
    assert not err.is_retryable
    assert err.__cause__ is None


async def test_unparsable_tool_args_name_the_tool(server: Any) -> None:
    server.sse([chunk(call(0, id="c", name="lookup", args="{oops")),
                chunk(finish="tool_calls"), DONE])
    err = await fail(make(server))
    assert "'lookup'" in str(err) and "unparsable arguments" in str(err)


async def test_error_event_mid_stream(server: Any) -> None:
    error = {"error": {"message": "The server had an error", "type": "server_error"}}
    server.sse([chunk({"content": "a"}), f"data: {json.dumps(error)}\n\n"])
    err = await fail(make(server))
    assert err.is_retryable and "The server had an error" in str(err)


async def test_missing_key_is_a_clear_error(server: Any) -> None:
    err = await fail(OpenAIChatModel("gpt-4o-mini", base_url=server.url))
    assert "OPENAI_API_KEY is not set" in str(err) and not err.is_retryable
    assert server.requests == []


async def test_key_and_base_url_from_the_environment(server: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/env/")
    server.sse([chunk(finish="stop"), DONE])
    await run(OpenAIChatModel("gpt-4o-mini"))
    assert server.last.path == "/env/chat/completions"
    assert server.last.headers["authorization"] == f"Bearer {KEY}"


def _leaks(err: BaseException, secret: str) -> bool:
    text = "".join(traceback.format_exception(err)) + repr(err)
    return secret in text or secret in getattr(err, "body", "")


async def test_api_key_never_appears_in_errors_or_repr(server: Any) -> None:
    echo = {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "auth"}}
    server.reply(status=401, json=echo)
    server.sse([f"data: {json.dumps(echo)}\n\n"])
    server.sse([f"data: {{bad json {KEY}\n\n"])
    model = make(server, headers={"x-org-token": "tok-SECRET-9"})
    errors = [await fail(model) for _ in range(3)]
    assert "***" in str(errors[0]) and "***" in errors[0].body
    for err in errors:
        assert not _leaks(err, KEY) and not _leaks(err, "tok-SECRET-9")
    assert KEY not in repr(model) and KEY not in str(model)


async def test_explicit_client_is_used(server: Any) -> None:
    sent: list[str] = []

    async def hook(request: httpx.Request) -> None:
        sent.append(str(request.url))

    server.sse([chunk(finish="stop"), DONE])
    async with httpx.AsyncClient(event_hooks={"request": [hook]}) as client:
        await run(make(server, client=client))
    assert sent == [f"{server.url}/v1/chat/completions"]


def test_each_event_loop_run_gets_its_own_client() -> None:
    async def lookup() -> httpx.AsyncClient:
        client = shared_client()
        assert shared_client() is client
        return client

    first, second = anyio.run(lookup), anyio.run(lookup)
    assert first is not second and not first.is_closed
    for client in (first, second):
        anyio.run(client.aclose)


async def test_a_closed_shared_client_is_replaced() -> None:
    client = shared_client()
    await aclose_shared_client()
    assert shared_client() is not client


async def test_json_instead_of_an_event_stream(server: Any) -> None:
    server.reply(json={"error": {"message": "streaming is off"}})
    err = await fail(make(server))
    assert "answered with JSON, not an event stream: streaming is off" in str(err)


# -- the SSE parser -------------------------------------------------------------------


async def parse(body: bytes) -> list[tuple[str, str]]:
    response = httpx.Response(200, content=body)
    return [(e.event, e.data) async for e in iter_sse(response)]


async def test_sse_parser_follows_the_spec() -> None:
    body = (b"\xef\xbb\xbf: a comment\r\nevent: first\r\ndata: one\r\ndata:two\r\n\r\n"
            b"id: 7\nretry: 10\ndata\n\n"
            b"\n\ndata:  padded\n\n"
            b"event: empty\n\n"
            b"data: cut short")
    assert await parse(body) == [("first", "one\ntwo"), ("message", ""),
                                 ("message", " padded")]


async def test_sse_parser_refuses_a_line_that_is_no_field() -> None:
    with pytest.raises(SSEError, match="'<html>' is not an SSE field"):
        await parse(b"<html>\n\n")


def test_resolve_model_makes_an_openai_model() -> None:
    model = resolve_model("openai/gpt-4o-mini")
    assert isinstance(model, OpenAIChatModel) and model.model_id == "gpt-4o-mini"
