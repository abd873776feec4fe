"""The agent against real local provider servers: API errors, retries, finalisation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from procflow.agent import Agent
from procflow.errors import APICallError
from procflow.models import AnthropicModel, OpenAIChatModel
from procflow.processors import APIErrorResult, Processor
from procflow.processors.builtin.error_handlers import (
    PrefillErrorHandler,
    StreamErrorRetryProcessor,
)

KEY = "sk-test-SECRET-123"
DONE = "data: [DONE]\n\n"


def text_events(text: str) -> list[str]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return "data: " + json.dumps({"choices": [{"index": 0, "delta": delta,
                                                   "finish_reason": finish}]}) + "\n\n"
    usage = "data: " + json.dumps({"choices": [], "usage": {
        "prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}) + "\n\n"
    return [chunk({"content": text}), chunk({}, "stop"), usage, DONE]


def openai(server: Any, **kw: Any) -> OpenAIChatModel:
    kw.setdefault("max_retries", 0)  # the processors' retries are under test here
    return OpenAIChatModel("gpt-4o-mini", api_key=KEY, base_url=f"{server.url}/v1", **kw)


class Finaliser(Processor):
    id = "finaliser"

    def __init__(self) -> None:
        self.calls = 0

    def process_output_result(self, args: Any) -> None:
        self.calls += 1


class ContextLengthHandler(Processor):
    id = "context-length-handler"

    def process_api_error(self, args: Any) -> APIErrorResult | None:
        if args.retry_count == 0 and "context length" in str(args.error):
            args.message_list.remove_by_ids([args.messages[0].id])
            return APIErrorResult(retry=True)
        return None


async def test_400_reaches_process_api_error_and_is_retried(server: Any) -> None:
    server.reply(status=400, json={"error": {"message": "context length exceeded"}})
    server.sse(text_events("short answer"))
    agent = Agent(id="a", model=openai(server), error_processors=[ContextLengthHandler()])
    out = await agent.generate(["old history", "question"])
    assert out.text == "short answer" and out.usage.total_tokens == 5
    first, second = server.requests
    assert len(first.json["messages"]) == 2 and len(second.json["messages"]) == 1


async def test_5xx_and_reset_are_retried_by_stream_error_retry(server: Any) -> None:
    server.reply(status=503, body="overloaded")
    server.sse(text_events("partial")[:1], end="reset")
    server.sse(text_events("third time lucky"))
    agent = Agent(id="a", model=openai(server),
                  error_processors=[StreamErrorRetryProcessor(max_retries=2)])
    out = await agent.generate("hi")
    assert out.text == "third time lucky" and len(server.requests) == 3


async def test_budget_and_processor_limit_bound_retries(server: Any) -> None:
    for _ in range(3):
        server.reply(status=500, body="boom")
    agent = Agent(id="a", model=openai(server),
                  error_processors=[StreamErrorRetryProcessor(max_retries=5)],
                  max_processor_retries=1)
    with pytest.raises(APICallError) as err:
        await agent.generate("hi")
    assert err.value.status_code == 500 and len(server.requests) == 2


async def test_unrecovered_error_runs_finalisers_then_raises(server: Any) -> None:
    server.reply(status=400, json={"error": {"message": f"bad key {KEY}"}})
    finaliser = Finaliser()
    agent = Agent(id="a", model=openai(server), output_processors=[finaliser])
    with pytest.raises(APICallError) as err:
        await agent.generate("hi")
    assert finaliser.calls == 1
    assert KEY not in str(err.value) and KEY not in err.value.body


async def test_stream_emits_error_chunk_after_the_retry_decision(server: Any) -> None:
    server.reply(wait=2, json={})
    finaliser = Finaliser()
    agent = Agent(id="a", model=openai(server, timeout=0.3), output_processors=[finaliser])
    out = await agent.stream("hi")
    chunks = [c async for c in out.full_stream]
    assert chunks[-1].type == "error"
    assert "timed out after 0.3s" in str(chunks[-1].payload.error)
    assert finaliser.calls == 1
    with pytest.raises(APICallError):
        await out.text


async def test_prefill_error_handler_with_anthropic(server: Any) -> None:
    server.reply(status=400, json={"type": "error", "error": {
        "type": "invalid_request_error",
        "message": "This model does not support assistant message prefill."}})
    server.sse([
        'event: message_start\ndata: {"type":"message_start","message":{"usage":'
        '{"input_tokens":4,"output_tokens":0}}}\n\n',
        'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        '"content_block":{"type":"text","text":""}}\n\n',
        'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        '"delta":{"type":"text_delta","text":"continued"}}\n\n',
        'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
        'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":'
        '"end_turn"},"usage":{"output_tokens":1}}\n\n',
        'event: message_stop\ndata: {"type":"message_stop"}\n\n',
    ])
    model = AnthropicModel("claude-test", api_key=KEY, base_url=server.url, max_retries=0)
    agent = Agent(id="a", model=model, error_processors=[PrefillErrorHandler()])
    out = await agent.generate([{"role": "user", "content": "hi"},
                                {"role": "assistant", "content": "Sure,"}])
    assert out.text == "continued"
    retried = server.requests[1].json["messages"]
    assert retried[-1]["role"] == "user"
    assert "<system-reminder>continue</system-reminder>" in json.dumps(retried[-1])
    assert all("system-reminder" not in u.text for u in out.response.ui_messages)
