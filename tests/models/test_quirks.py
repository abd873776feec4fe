"""Provider quirks, recognised by the provider's own error text and fixed by resending
the request adjusted, once (no processor needed)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from procflow.agent import Agent
from procflow.errors import APICallError
from procflow.messages import TextDelta
from procflow.models import AnthropicModel, ModelRequest, OpenAIChatModel

KEY = "sk-test-SECRET-quirks"
DONE = "data: [DONE]\n\n"
ANSWER = [
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
]
PREFILL = {"type": "error", "error": {"type": "invalid_request_error", "message":
           "This model does not support assistant message prefill. The conversation "
           "must end with a user message."}}


def openai_text(text: str) -> list[str]:
    events = [{"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]},
              {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
    return [f"data: {json.dumps(e)}\n\n" for e in events] + [DONE]


def anthropic(server: Any) -> AnthropicModel:
    return AnthropicModel("claude-test", api_key=KEY, base_url=server.url, max_retries=0)


async def test_anthropic_prefill_refusal_is_continued_without_a_processor(
        server: Any) -> None:
    server.reply(status=400, json=PREFILL)
    server.sse(ANSWER)
    out = await Agent(id="a", model=anthropic(server)).generate(
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Sure,"}])
    assert out.text == "continued"
    first, second = (r.json["messages"] for r in server.requests)
    assert second[:-1] == first and second[-1]["role"] == "user"
    assert "<system-reminder>continue</system-reminder>" in json.dumps(second[-1])
    assert all("system-reminder" not in m.text for m in out.messages)


async def test_anthropic_other_400s_are_not_resent(server: Any) -> None:
    server.reply(status=400, json={"type": "error", "error": {
        "type": "invalid_request_error", "message": "prompt is too long"}})
    with pytest.raises(APICallError, match="prompt is too long"):
        _ = [c async for c in anthropic(server).stream(ModelRequest(prompt=[
            {"role": "user", "content": "hi"}, {"role": "assistant", "content": "Sure,"}]))]
    assert len(server.requests) == 1


async def test_openai_max_tokens_refusal_is_resent_as_max_completion_tokens(
        server: Any) -> None:
    server.reply(status=400, json={"error": {
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                   "Use 'max_completion_tokens' instead.", "type": "invalid_request_error",
        "param": "max_tokens", "code": "unsupported_parameter"}})
    server.reply(status=400, json={"error": {
        "message": "Unsupported value: 'temperature' does not support 0.2 with this model. "
                   "Only the default (1) value is supported.",
        "type": "invalid_request_error", "code": "unsupported_value"}})
    server.sse(openai_text("fine"))
    model = OpenAIChatModel("proxy-reasoner", api_key=KEY, base_url=server.url, max_retries=0)
    request = ModelRequest(prompt=[{"role": "user", "content": "hi"}],
                           settings={"max_tokens": 50, "temperature": 0.2})
    chunks = [c async for c in model.stream(request)]
    assert chunks[0] == TextDelta("fine")
    last = server.last.json
    assert last["max_completion_tokens"] == 50 and "max_tokens" not in last
    assert "temperature" not in last
    assert [r.status_code for r in request.retries] == [400, 400]
