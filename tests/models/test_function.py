"""FunctionModel: answers from a function of the request, streamed like a provider's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from procflow.agent import Agent
from procflow.errors import APICallError
from procflow.messages import Chunk, Finish, ReasoningDelta, TextDelta, ToolCallChunk
from procflow.models import (
    FunctionModel,
    LanguageModel,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolSpec,
)
from procflow.records import Usage
from procflow.tools import tool

HI = [{"role": "user", "content": "say hello now"}]


async def run(model: FunctionModel, prompt: list[dict[str, Any]] = HI,
              **fields: Any) -> list[Chunk]:
    return [c async for c in model.stream(ModelRequest(prompt=prompt, **fields))]


@tool
def lookup(order_id: str) -> str:
    """Look an order up."""
    return f"{order_id} shipped"


def support(request: ModelRequest) -> str | list[ToolCall]:
    """Calls ``lookup`` until it has its result, then answers from it."""
    results = [part["result"] for m in request.prompt if m["role"] == "tool"
               for part in m["content"]]
    if not results:
        return [ToolCall("lookup", {"order_id": "A-1"})]
    return f"Your order: {results[0]}."


async def test_a_text_answer_streams_word_by_word() -> None:
    model = FunctionModel(lambda request: "Hello big world")
    chunks = await run(model)
    assert chunks[:-1] == [TextDelta("Hello "), TextDelta("big "), TextDelta("world")]
    assert chunks[-1] == Finish("stop", Usage(3, 3, 6))


async def test_an_async_function_answers_too() -> None:
    async def answer(request: ModelRequest) -> str:
        return f"you said: {request.prompt[-1]['content']}"

    chunks = await run(FunctionModel(answer))
    assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == \
        "you said: say hello now"


async def test_tool_calls_are_numbered_by_the_conversation() -> None:
    model = FunctionModel(lambda request: [ToolCall("a"), ToolCall("b", {"x": 1}, id="mine")])
    before = [*HI, {"role": "assistant", "content": [
        {"type": "tool-call", "tool_call_id": "call_1", "tool_name": "a", "args": {}}]}]
    chunks = await run(model, before)
    assert chunks[:-1] == [ToolCallChunk("call_2", "a", {}), ToolCallChunk("mine", "b", {"x": 1})]
    assert isinstance(chunks[-1], Finish) and chunks[-1].finish_reason == "tool-calls"


async def test_a_full_response_sets_reasoning_finish_and_usage() -> None:
    response = ModelResponse(text="Done.", reasoning="think hard", finish_reason="length",
                             usage=Usage(10, 2, 12), tool_calls=[ToolCall("t", id="c")])
    chunks = await run(FunctionModel(lambda request: response))
    assert chunks == [ReasoningDelta("think "), ReasoningDelta("hard"), TextDelta("Done."),
                      ToolCallChunk("c", "t", {}), Finish("length", Usage(10, 2, 12))]


async def test_requests_are_recorded_and_the_function_sees_them() -> None:
    seen: list[ModelRequest] = []

    def answer(request: ModelRequest) -> str:
        seen.append(request)
        return "ok"

    model = FunctionModel(answer)
    tools = [ToolSpec("t", "d", {})]
    await run(model, tools=tools, tool_choice="required")
    assert model.requests == seen and seen[0].tools == tools
    assert seen[0].tool_choice == "required"


async def test_what_the_function_raises_is_the_call_s_failure() -> None:
    def down(request: ModelRequest) -> str:
        raise APICallError("overloaded", status_code=529)

    with pytest.raises(APICallError, match="overloaded"):
        await run(FunctionModel(down))


@pytest.mark.parametrize("bad", [42, [], ["text"], None])
async def test_an_answer_of_another_type_is_refused(bad: Any) -> None:
    with pytest.raises(TypeError, match=r"FunctionModel 'function:<lambda>' returned .*; "
                       r"return a str"):
        await run(FunctionModel(lambda request: bad))


def test_it_is_a_language_model() -> None:
    model = FunctionModel(support)
    assert isinstance(model, LanguageModel)
    assert (model.provider, model.model_id) == ("function", "function:support")
    assert FunctionModel(support, model_id="mine").model_id == "mine"
    with pytest.raises(TypeError, match="function of the request"):
        FunctionModel("not callable")  # type: ignore[arg-type]


async def test_an_agent_runs_its_tool_loop_with_it() -> None:
    model = FunctionModel(support)
    out = await Agent(id="support", model=model, tools=[lookup]).generate("where is A-1?")
    assert out.text == "Your order: A-1 shipped."
    assert [r.result for r in out.tool_results] == ["A-1 shipped"]
    assert len(model.requests) == 2 and model.requests[0].tools is not None
    assert [t.name for t in model.requests[0].tools] == ["lookup"]


async def test_an_agent_streams_its_text_as_deltas() -> None:
    stream = await Agent(id="support", model=FunctionModel(support),
                         tools=[lookup]).stream("where is A-1?")
    pieces = [chunk.text async for chunk in stream.full_stream
              if isinstance(chunk, TextDelta)]
    assert pieces == ["Your ", "order: ", "A-1 ", "shipped."]


class City(BaseModel):
    name: str
    population: int


async def test_structured_output_gets_the_schema_and_validates_the_answer() -> None:
    def answer(request: ModelRequest) -> str:
        assert request.output_schema is not None
        fields = sorted(request.output_schema.schema["properties"])  # name, population
        return json.dumps({"name": "Paris", "population": len(fields)})

    out = await Agent(id="geo", model=FunctionModel(answer), output_type=City).generate("?")
    assert out.output == City(name="Paris", population=2)
