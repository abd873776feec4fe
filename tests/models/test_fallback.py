"""``FallbackModel``: an outage moves the call to the next model; a bad request does not."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from procflow.agent import Agent
from procflow.errors import APICallError
from procflow.messages import TextDelta
from procflow.models import (
    FallbackModel,
    FunctionModel,
    ModelRequest,
    ScriptedModel,
    ToolCall,
)
from procflow.storage import InMemoryStorage
from procflow.tools import tool

KEY = "sk-test-SECRET-fallback"
NOW = {"retry-after": "0"}  # the model's own retries, without waiting


@pytest.fixture
def openai_env(server: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
    return server


def text_events(text: str) -> list[str]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return "data: " + json.dumps({"choices": [{"index": 0, "delta": delta,
                                                   "finish_reason": finish}]}) + "\n\n"
    return [chunk({"content": text}), chunk({}, "stop"), "data: [DONE]\n\n"]


async def test_503_falls_back_and_the_trace_shows_the_first_error(openai_env: Any) -> None:
    for _ in range(3):  # the first try and the model's two retries
        openai_env.reply(status=503, json={"error": {"message": "overloaded"}}, headers=NOW)
    storage = InMemoryStorage()
    agent = Agent(id="a", storage=storage,
                  model=FallbackModel("openai/gpt-x", ScriptedModel(["backup"])))
    out = await agent.generate("hi")
    assert out.text == "backup" and len(openai_env.requests) == 3
    assert out.response.model == "scripted/scripted"
    [failed] = out.response.fallbacks
    assert failed.model == "openai/gpt-x" and failed.status_code == 503
    assert "overloaded" in failed.error and failed.retries == 2
    trace = await storage.load_trace(out.run_id)
    assert trace is not None
    [span] = [s for s in trace.spans if s["name"].startswith("model call")]
    attributes = span["attributes"]
    assert attributes["answered_by"] == "scripted/scripted"
    assert attributes["fallbacks"][0]["model"] == "openai/gpt-x"
    assert "HTTP 503" in attributes["fallbacks"][0]["error"]
    assert KEY not in json.dumps([dict(s) for s in trace.spans], default=str)


async def test_a_list_of_models_is_a_fallback_model(openai_env: Any) -> None:
    for _ in range(3):
        openai_env.reply(status=503, body="down", headers=NOW)
    agent = Agent(id="a", model=["openai/gpt-x", ScriptedModel(["backup"])])
    assert isinstance(agent.model, FallbackModel)
    out = await agent.generate("hi")
    assert out.text == "backup"
    assert [f.model for f in out.response.fallbacks] == ["openai/gpt-x"]


async def test_429_falls_back_once_its_retries_are_spent(openai_env: Any) -> None:
    for _ in range(3):
        openai_env.reply(status=429, json={"error": {"message": "slow down"}}, headers=NOW)
    out = await Agent(id="a", model=["openai/gpt-x", ScriptedModel(["backup"])]).generate("x")
    assert out.text == "backup" and len(openai_env.requests) == 3


async def test_a_connection_error_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens
    from procflow.models import OpenAIChatModel

    primary = OpenAIChatModel("gpt-x", max_retries=0)
    out = await Agent(id="a", model=[primary, ScriptedModel(["backup"])]).generate("x")
    assert out.text == "backup"
    assert "could not connect" in out.response.fallbacks[0].error


async def test_a_400_does_not_fall_back_and_names_the_provider_error(
        openai_env: Any) -> None:
    openai_env.reply(status=400, json={"error": {"message": "context length exceeded",
                                                 "type": "invalid_request_error"}})
    backup = ScriptedModel(["backup"])
    agent = Agent(id="a", model=FallbackModel("openai/gpt-x", backup))
    with pytest.raises(APICallError) as err:
        await agent.generate("hi")
    assert err.value.status_code == 400
    assert "context length exceeded" in str(err.value) and backup.requests == []


async def test_fallback_on_makes_request_errors_fall_back(openai_env: Any) -> None:
    openai_env.reply(status=400, json={"error": {"message": "bad"}})
    model = FallbackModel("openai/gpt-x", ScriptedModel(["backup"]),
                          fallback_on=lambda error: isinstance(error, APICallError))
    assert (await Agent(id="a", model=model).generate("hi")).text == "backup"
    openai_env.reply(status=400, json={"error": {"message": "bad"}})
    typed = FallbackModel("openai/gpt-x", ScriptedModel(["backup"]), fallback_on=APICallError)
    assert (await Agent(id="a", model=typed).generate("hi")).text == "backup"


async def test_every_model_failing_names_each_error() -> None:
    first = ScriptedModel([APICallError("first down", status_code=502)])
    second = ScriptedModel([APICallError("second down", status_code=503)],
                           model_id="other")
    with pytest.raises(APICallError) as err:
        await Agent(id="a", model=[first, second]).generate("hi")
    assert "scripted/scripted: first down" in str(err.value)
    assert "scripted/other: second down" in str(err.value)
    assert err.value.status_code == 503


async def test_no_fallback_after_the_first_chunk(openai_env: Any) -> None:
    openai_env.sse(text_events("partial")[:1], end="reset")
    backup = ScriptedModel(["backup"])
    model = FallbackModel(OpenAIChatModelNoRetry(), backup)
    chunks = []
    with pytest.raises(APICallError):
        async for chunk in model.stream(ModelRequest(prompt=[{"role": "user",
                                                               "content": "hi"}])):
            chunks.append(chunk)
    assert chunks == [TextDelta("partial")] and backup.requests == []


def OpenAIChatModelNoRetry() -> Any:
    from procflow.models import OpenAIChatModel

    return OpenAIChatModel("gpt-x", max_retries=0)


async def test_streaming_falls_back_before_the_first_chunk(openai_env: Any) -> None:
    openai_env.reply(status=500, body="boom")
    agent = Agent(id="a", model=[OpenAIChatModelNoRetry(), ScriptedModel(["backup"])])
    out = await agent.stream("hi")
    assert "".join([c async for c in out.text_stream]) == "backup"


class Answer(BaseModel):
    city: str


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def always_down(status: int) -> FunctionModel:
    """A model whose provider answers every call with ``status``."""
    def fail(request: ModelRequest) -> str:
        raise APICallError("down", status_code=status)
    return FunctionModel(fail, model_id="down")


async def test_tools_and_structured_output_go_to_the_model_that_answers() -> None:
    down = always_down(500)
    backup = ScriptedModel([[ToolCall("weather", {"city": "Paris"})], '{"city": "Paris"}'])
    agent = Agent(id="a", model=[down, backup], tools=[weather], output_type=Answer)
    out = await agent.generate("weather in Paris?")
    assert out.output == Answer(city="Paris")
    assert out.tool_results[0].result == "sunny in Paris"
    assert backup.requests[0].output_schema is not None
    assert [s.model for s in out.steps] == ["scripted/scripted", "scripted/scripted"]
    assert len(out.response.fallbacks) == 2  # one per step


def test_fallback_model_needs_two_models_and_a_valid_fallback_on() -> None:
    with pytest.raises(ValueError, match="at least two"):
        FallbackModel("openai/gpt-x")
    with pytest.raises(TypeError, match="fallback_on"):
        FallbackModel("openai/gpt-x", "openai/gpt-y", fallback_on=42)  # type: ignore[arg-type]


def test_the_step_records_keep_the_fallbacks_in_stored_state() -> None:
    from procflow.agent.output import StepRecord
    from procflow.agent.state import AgentState, as_state
    from procflow.messages import MessageList

    failed = {"model": "openai/gpt-x", "error": "down", "status_code": 503, "retries": 2}
    state = AgentState(MessageList(), steps=[StepRecord(0, text="hi", model="scripted/s",
                                                        fallbacks=[failed])])
    [step] = as_state(json.loads(json.dumps(state.to_json()))).steps
    assert step.model == "scripted/s" and step.fallbacks == [failed]


async def test_the_response_cache_keeps_an_answer_under_the_model_that_gave_it() -> None:
    from procflow.cache import InMemoryServerCache
    from procflow.processors import ResponseCache

    cache = InMemoryServerCache()
    down = ScriptedModel([APICallError("down", status_code=503)], model_id="down")
    backup = ScriptedModel(["backup answer"], model_id="backup")
    agent = Agent(id="a", model=[down, backup], input_processors=[ResponseCache(cache)])
    first = await agent.generate("hi")
    assert first.text == "backup answer" and not first.steps[0].from_cache
    again = await agent.generate("hi")  # no turn left in either model: from the cache
    assert again.text == "backup answer" and again.steps[0].from_cache
    for model_id in ("down", "backup"):
        alone = Agent(id="a", model=ScriptedModel(["fresh"], model_id=model_id),
                      input_processors=[ResponseCache(cache)])
        out = await alone.generate("hi")
        assert out.steps[0].from_cache is (model_id == "backup")


@tool(requires_approval=True)
def refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


async def test_a_resumed_run_keeps_the_fallbacks_of_its_first_part(tmp_path: Any) -> None:
    from procflow.storage import SQLiteStorage

    storage = SQLiteStorage(str(tmp_path / "runs.db"))
    down = always_down(503)
    backup = ScriptedModel([[ToolCall("refund", {"order_id": "A-1"}, id="c1")], "refunded"],
                           model_id="backup")
    agent = Agent(id="a", model=[down, backup], tools=[refund], storage=storage)
    out = await agent.generate("refund A-1")
    assert out.finish_reason == "suspended"
    done = await agent.resume(out.run_id, approve=["c1"])
    assert done.text == "refunded" and done.response.model == "scripted/backup"
    assert [f.model for f in done.response.fallbacks] == ["function/down"] * 2
    await storage.aclose()
