"""ScriptedModel: offline turns, recorded requests, clear errors."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from procflow.errors import APICallError
from procflow.messages import Chunk, Finish, ToolCallChunk
from procflow.models import (
    LanguageModel,
    ModelRequest,
    ScriptedModel,
    ToolCall,
    ToolSpec,
    resolve_model,
)
from procflow.records import Usage

HI = [{"role": "system", "content": "be nice"}, {"role": "user", "content": "say hello now"}]


async def run(model: ScriptedModel, prompt: list[dict[str, Any]] = HI,
              **fields: Any) -> list[Chunk]:
    return [c async for c in model.stream(ModelRequest(prompt=prompt, **fields))]


async def test_text_turn_streams_one_word_per_chunk() -> None:
    chunks = await run(ScriptedModel(["Hello big world"]))
    assert [c.text for c in chunks if c.type == "text-delta"] == ["Hello ", "big ", "world"]
    assert chunks[-1] == Finish("stop", Usage(input_tokens=5, output_tokens=3, total_tokens=8))


@pytest.mark.parametrize("text", ["  two  spaces\n", "", "   ", "one"])
async def test_streamed_words_rebuild_the_text(text: str) -> None:
    chunks = await run(ScriptedModel([text]))
    assert "".join(c.text for c in chunks) == text
    assert chunks[-1].type == "finish"


async def test_usage_per_word_scales_usage() -> None:
    chunks = await run(ScriptedModel(["a b"], usage_per_word=2))
    assert isinstance(chunks[-1], Finish)
    assert chunks[-1].usage == Usage(input_tokens=10, output_tokens=4, total_tokens=14)


def _after(prompt: list[dict[str, Any]], *answers: Any) -> list[dict[str, Any]]:
    """``prompt`` followed by assistant messages (tool calls as their part dicts)."""
    more = []
    for answer in answers:
        content = answer if isinstance(answer, str) else [
            {"type": "tool-call", "tool_call_id": c.tool_call_id, "tool_name": c.tool_name,
             "args": dict(c.args)} for c in answer if isinstance(c, ToolCallChunk)]
        more.append({"role": "assistant", "content": content})
    return [*prompt, *more]


async def test_tool_call_turn() -> None:
    model = ScriptedModel([[ToolCall("lookup", {"id": 7}), ToolCall("ping", id="mine")],
                           [ToolCall("lookup")]])
    first = await run(model)
    assert first[:-1] == [ToolCallChunk("call_1", "lookup", {"id": 7}),
                          ToolCallChunk("mine", "ping", {})]
    assert isinstance(first[-1], Finish) and first[-1].finish_reason == "tool-calls"
    second = await run(model, _after(HI, first))
    # call ids count the conversation's tool calls
    assert isinstance(second[0], ToolCallChunk) and second[0].tool_call_id == "call_3"


async def test_the_turn_is_the_number_of_assistant_turns_in_the_prompt() -> None:
    model = ScriptedModel([[ToolCall("lookup", {"id": 7})], "It shipped.", "Bye."])
    calls = await run(model)
    tool_result = {"role": "tool", "content": [
        {"type": "tool-result", "tool_call_id": "call_1", "tool_name": "lookup",
         "result": "shipped"}]}
    # a tool result is not a turn: the assistant message that called the tool is
    answer = await run(model, [*_after(HI, calls), tool_result])
    assert "".join(c.text for c in answer) == "It shipped."
    # a fresh model (another process) given the same conversation answers the same
    again = ScriptedModel([[ToolCall("lookup", {"id": 7})], "It shipped.", "Bye."])
    later = [*_after(HI, calls), tool_result, {"role": "assistant", "content": "It shipped."},
             {"role": "user", "content": "thanks"}]
    assert "".join(c.text for c in await run(again, later)) == "Bye."
    # an independent conversation starts the script again
    assert isinstance((await run(model))[0], ToolCallChunk)


async def test_args_are_copied_for_each_call() -> None:
    call = ToolCall("t", {"items": [1]})
    chunks = await run(ScriptedModel([[call]]))
    assert isinstance(chunks[0], ToolCallChunk)
    chunks[0].args["items"].append(2)
    assert call.args == {"items": [1]}


async def test_exception_turn_is_raised() -> None:
    error = APICallError("overloaded", status_code=529, is_retryable=True)
    model = ScriptedModel([error, "fine"])
    with pytest.raises(APICallError) as info:
        await run(model)
    assert info.value is error
    # the retry (the same conversation) gets the answer after the error
    assert [c.text for c in await run(model)][:1] == ["fine"]
    assert [c.text for c in await run(model)][:1] == ["fine"]


async def test_errors_belong_to_the_answer_after_them() -> None:
    error = APICallError("overloaded", status_code=529, is_retryable=True)
    model = ScriptedModel(["first", error, error, "second"])
    assert [c.text for c in await run(model)][:1] == ["first"]
    later = _after(HI, "first")
    for _ in range(2):
        with pytest.raises(APICallError):
            await run(model, later)
    assert [c.text for c in await run(model, later)][:1] == ["second"]
    assert model.turns_left == 0


async def test_requests_are_recorded() -> None:
    model = ScriptedModel(["a", "b"])
    tools = [ToolSpec("t", "d", {})]
    await run(model, tools=tools, tool_choice="auto")
    second = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a"},
              {"role": "user", "content": "again"}]
    await run(model, second)
    assert [r.prompt for r in model.requests] == [HI, second]
    assert (model.requests[0].tools, model.requests[0].tool_choice) == (tools, "auto")
    assert model.turns_left == 0


async def test_a_conversation_past_the_script_is_a_clear_error() -> None:
    model = ScriptedModel(["only one"])
    await run(model)
    with pytest.raises(APICallError, match=r"no turn for a conversation with 1 assistant "
                       r"turns \(its script answers 1\)"):
        await run(model, _after(HI, "only one"))
    assert len(model.requests) == 2
    failing = ScriptedModel([APICallError("down")])
    with pytest.raises(APICallError, match="down"):
        await run(failing)
    with pytest.raises(APICallError, match="no answer after its last error"):
        await run(failing)


def test_it_is_a_language_model() -> None:
    model = ScriptedModel([], model_id="fake")
    assert isinstance(model, LanguageModel)
    assert (model.provider, model.model_id) == ("scripted", "fake")


@pytest.mark.parametrize("turns", [[42], [[]], [["not a ToolCall"]], "a str"])
def test_bad_turns_are_refused(turns: Any) -> None:
    with pytest.raises(TypeError, match="ScriptedModel"):
        ScriptedModel(turns)


def test_resolve_model_returns_a_model_object_as_is() -> None:
    model = ScriptedModel(["hi"])
    assert resolve_model(model) is model


@pytest.mark.parametrize("bad", ["gpt-4o", "nope/large", "openai/", 42])
def test_resolve_model_refuses_unknown_names(bad: Any) -> None:
    with pytest.raises(ValueError, match="known providers: anthropic, google, openai"):
        resolve_model(bad)


def test_importing_models_does_not_import_httpx() -> None:
    code = ("import sys, procflow.models as m; m.ScriptedModel; "
            "print('httpx' in sys.modules, m.OpenAIChatModel.__name__, 'httpx' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["False", "OpenAIChatModel", "True"]


def test_every_exported_name_exists() -> None:
    import procflow.models as models

    for name in models.__all__:
        assert getattr(models, name) is not None, name


async def test_a_model_first_asked_past_its_script_starts_the_script_there() -> None:
    # a model made afresh for each request (as a wrapper choosing a script per turn does)
    later = _after(HI, "hi")
    fresh = ScriptedModel(["the answer"])
    assert [c.text for c in await run(fresh, later)][:1] == ["the "]
    with pytest.raises(APICallError, match=r"its script answers 1, started at turn 1 of its "
                                           r"first conversation"):
        await run(fresh, HI)  # before where it started
    # a script long enough for the conversation is not shifted: a resumed run goes on
    resumed = ScriptedModel(["first", "second"])
    assert [c.text for c in await run(resumed, later)][:1] == ["second"]
