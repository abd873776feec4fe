"""Provider calls that survive: retries before the first byte (honouring Retry-After),
idle timeouts, deadlines and a cap on the answer's size, against a real local server."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest

from procflow.agent import Agent
from procflow.errors import APICallError
from procflow.messages import Chunk
from procflow.models import AnthropicModel, ModelRequest, OpenAIChatModel
from procflow.models.http import retry_after_seconds
from procflow.processors.builtin.error_handlers import StreamErrorRetryProcessor
from procflow.storage.memory import InMemoryStorage

KEY = "sk-test-SECRET-123"
DONE = "data: [DONE]\n\n"
HI = [{"role": "user", "content": "hi"}]


def delta(content: str | None = None, finish: str | None = None) -> str:
    d = {} if content is None else {"content": content}
    return "data: " + json.dumps({"choices": [{"index": 0, "delta": d,
                                               "finish_reason": finish}]}) + "\n\n"


def answer(text: str) -> list[str]:
    return [delta(text), delta(finish="stop"), DONE]


def openai(server: Any, **options: Any) -> OpenAIChatModel:
    return OpenAIChatModel("gpt-4o-mini", api_key=KEY, base_url=f"{server.url}/v1", **options)


async def collect(model: Any, request: ModelRequest | None = None) -> list[Chunk]:
    return [c async for c in model.stream(request or ModelRequest(prompt=HI))]


async def failure(model: Any, request: ModelRequest | None = None) -> APICallError:
    with pytest.raises(APICallError) as info:
        await collect(model, request)
    return info.value


async def test_429_with_retry_after_is_retried_after_that_wait(
        server: Any, caplog: pytest.LogCaptureFixture) -> None:
    server.reply(status=429, json={"error": {"message": "slow down"}},
                 headers={"retry-after": "1"})
    server.sse(answer("made it"))
    request = ModelRequest(prompt=HI)
    with caplog.at_level(logging.INFO, logger="procflow.models"):
        chunks = await collect(openai(server), request)
    assert [c.text for c in chunks if c.type == "text-delta"] == ["made it"]
    assert len(server.requests) == 2
    [retry] = request.retries
    assert (retry.attempt, retry.delay, retry.retry_after, retry.status_code) == (1, 1.0, 1.0,
                                                                                 429)
    [record] = [r for r in caplog.records if r.name == "procflow.models"]
    assert "retry 1 of 2 in 1.00s" in record.getMessage() and "HTTP 429" in record.getMessage()


async def test_retries_are_on_the_model_call_span(server: Any) -> None:
    server.reply(status=503, body="busy", headers={"retry-after": "0"})
    server.sse(answer("ok"))
    storage = InMemoryStorage()
    agent = Agent(id="a", model=openai(server), storage=storage)
    out = await agent.generate("hi")
    assert out.text == "ok"
    trace = await storage.load_trace(out.run_id)
    assert trace is not None
    [span] = [r for r in trace.spans if r["kind"] == "model"]
    attributes = span["attributes"]
    assert attributes["provider_retries"] == 1 and attributes["retry_delay"] == 0.0
    assert attributes["retry_events"][0]["status_code"] == 503


async def test_transient_failures_are_retried_twice_with_jittered_backoff(server: Any) -> None:
    for _ in range(3):
        server.reply(status=500, body="boom")
    request = ModelRequest(prompt=HI)
    err = await failure(openai(server), request)
    assert err.status_code == 500 and len(server.requests) == 3
    assert [r.attempt for r in request.retries] == [1, 2]
    # Full jitter: each wait is drawn from [0, base * 2**n].
    assert 0 <= request.retries[0].delay <= 0.5 and 0 <= request.retries[1].delay <= 1.0


async def test_a_400_is_not_retried(server: Any) -> None:
    server.reply(status=400, json={"error": {"message": "bad"}})
    request = ModelRequest(prompt=HI)
    await failure(openai(server), request)
    assert len(server.requests) == 1 and request.retries == []


async def test_a_retry_after_beyond_the_cap_fails_at_once(server: Any) -> None:
    server.reply(status=429, body="later", headers={"retry-after": "3600"})
    err = await failure(openai(server, max_retry_wait=5))
    assert err.retry_after == 3600 and len(server.requests) == 1


async def test_an_error_after_the_first_byte_is_never_retried(server: Any) -> None:
    error = {"error": {"message": "The server had an error", "type": "server_error"}}
    server.sse([delta("partial"), f"data: {json.dumps(error)}\n\n"])
    server.sse(answer("must not be asked for"))
    seen: list[Chunk] = []
    with pytest.raises(APICallError) as info:
        async for chunk in openai(server).stream(ModelRequest(prompt=HI)):
            seen.append(chunk)
    assert info.value.is_retryable  # retryable by the agent, not by the client
    assert [c.text for c in seen] == ["partial"] and len(server.requests) == 1


async def test_a_reset_after_the_first_byte_is_never_retried(server: Any) -> None:
    server.sse([": opening\n\n"], end="reset")
    server.sse(answer("must not be asked for"))
    await failure(openai(server))
    assert len(server.requests) == 1


async def test_a_keepalive_only_stream_fails_after_the_idle_timeout(server: Any) -> None:
    server.sse([delta("a")] + [": keep-alive\n\n"] * 200, delay=0.05)
    request = ModelRequest(prompt=HI)
    err = await failure(openai(server, idle_timeout=0.3), request)
    assert "sent no data for 0.3s" in str(err) and err.is_retryable
    assert len(server.requests) == 1 and request.retries == []  # bytes had arrived


async def test_anthropic_pings_do_not_keep_a_stalled_stream_alive(server: Any) -> None:
    start = ('event: message_start\ndata: {"type":"message_start","message":'
             '{"usage":{"input_tokens":1,"output_tokens":0}}}\n\n')
    ping = 'event: ping\ndata: {"type": "ping"}\n\n'
    server.sse([start] + [ping] * 200, delay=0.05)
    model = AnthropicModel("claude-test", api_key=KEY, base_url=server.url, idle_timeout=0.3)
    err = await failure(model)
    assert "stream stalled" in str(err) and len(server.requests) == 1


async def test_a_silent_server_is_retried_then_fails(server: Any) -> None:
    server.reply(wait=5, json={})
    server.reply(wait=5, json={})
    request = ModelRequest(prompt=HI)
    err = await failure(openai(server, idle_timeout=0.2, max_retries=1), request)
    assert "sent no data" in str(err)
    assert len(server.requests) == 2 and len(request.retries) == 1


async def test_the_deadline_bounds_the_whole_call(server: Any) -> None:
    server.reply(wait=5, json={})
    err = await failure(openai(server, deadline=0.3, idle_timeout=None))
    assert "deadline of 0.3s" in str(err) and not err.is_retryable
    assert len(server.requests) == 1


async def test_a_too_large_answer_is_refused(server: Any) -> None:
    server.sse([delta("x" * 1000) for _ in range(50)] + [delta(finish="stop"), DONE])
    err = await failure(openai(server, max_response_bytes=10_000))
    assert "larger than the 10000 bytes allowed" in str(err) and not err.is_retryable
    assert len(server.requests) == 1


async def test_a_too_large_line_is_refused_before_it_ends(server: Any) -> None:
    server.sse(["data: " + "x" * 4000] * 10)
    err = await failure(openai(server, max_response_bytes=10_000))
    assert "larger than the 10000 bytes allowed" in str(err)


async def test_a_too_large_error_body_is_refused(server: Any) -> None:
    server.reply(status=400, body="e" * 20_000)
    err = await failure(openai(server, max_response_bytes=10_000))
    assert "larger than the 10000 bytes allowed" in str(err)


def test_retry_after_reads_seconds_milliseconds_and_dates() -> None:
    now = datetime(2025, 1, 1, tzinfo=UTC)
    later = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_seconds({"retry-after": later}, now=now.timestamp()) == 30.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


@pytest.mark.parametrize("value", [-1, 1.5])
def test_bad_options_are_refused(value: float) -> None:
    with pytest.raises(ValueError, match="max_retries must be an int >= 0"):
        OpenAIChatModel("m", max_retries=value)  # type: ignore[arg-type]


async def test_stream_error_retry_processor_honours_retry_after(server: Any) -> None:
    server.reply(status=429, body="later", headers={"retry-after": "0.1"})
    server.sse(answer("second time"))
    agent = Agent(id="a", model=openai(server, max_retries=0),
                  error_processors=[StreamErrorRetryProcessor()])
    assert (await agent.generate("hi")).text == "second time"
    server.reply(status=429, body="much later", headers={"retry-after": "120"})
    agent = Agent(id="a", model=openai(server, max_retries=0),
                  error_processors=[StreamErrorRetryProcessor(max_wait=5)])
    with pytest.raises(APICallError):
        await agent.generate("hi")
    assert len(server.requests) == 3  # asking for 120 s is past max_wait: no retry
