"""Memory through a real Agent: what the model sees on later calls, and what is saved."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from procflow.agent import Agent
from procflow.errors import APICallError
from procflow.memory import (
    Memory,
    MessageHistory,
    SemanticRecallOptions,
    WorkingMemoryOptions,
)
from procflow.messages import Message
from procflow.models import FunctionModel, ModelRequest, ScriptedModel, ToolCall
from procflow.processors import ProcessInputStepArgs, Processor, ProcessOutputResultArgs


def prompt_text(model: ScriptedModel, call: int) -> str:
    """Everything the model saw on one call, as one string."""
    return "\n".join(str(entry["content"]) for entry in model.requests[call].prompt)


def roles(model: ScriptedModel, call: int) -> list[str]:
    return [entry["role"] for entry in model.requests[call].prompt]


def T(thread: str, resource: str = "user-1") -> dict[str, str]:
    return {"thread": thread, "resource": resource}


@pytest.fixture
def memory(tmp_path: Path) -> Memory:
    return Memory(storage=tmp_path / "memory.db")


async def test_second_call_sees_the_first(memory: Memory) -> None:
    model = ScriptedModel(["Nice to meet you, Ada.", "Your name is Ada."])
    agent = Agent(id="a", instructions="be brief", model=model, memory=memory)
    await agent.generate("My name is Ada.", memory=T("t1"))
    out = await agent.generate("What is my name?", memory=T("t1"))
    assert out.text == "Your name is Ada."
    assert [(e["role"], e["content"]) for e in model.requests[1].prompt] == [
        ("system", "be brief"), ("user", "My name is Ada."),
        ("assistant", "Nice to meet you, Ada."), ("user", "What is my name?")]
    stored = await memory.get_messages("t1")
    assert [m.text for m in stored] == ["My name is Ada.", "Nice to meet you, Ada.",
                                        "What is my name?", "Your name is Ada."]
    assert {(m.thread_id, m.resource_id) for m in stored} == {("t1", "user-1")}


async def test_streaming_saves_like_generate(memory: Memory) -> None:
    model = ScriptedModel(["one two", "three"])
    agent = Agent(id="a", model=model, memory=memory)
    out = await agent.stream("first", memory=T("t1"))
    assert await out.text == "one two"
    await agent.generate("second", memory=T("t1"))
    assert "one two" in prompt_text(model, 1)


async def test_threads_do_not_mix(memory: Memory) -> None:
    model = ScriptedModel(["A1", "B1", "A2"])
    agent = Agent(id="a", model=model, memory=memory)
    await agent.generate("alpha secret", memory=T("ta"))
    await agent.generate("beta secret", memory=T("tb"))
    await agent.generate("again", memory=T("ta"))
    assert "beta" not in prompt_text(model, 2) and "alpha secret" in prompt_text(model, 2)
    assert "alpha" not in prompt_text(model, 1)


async def test_no_thread_means_no_memory(memory: Memory) -> None:
    model = ScriptedModel(["x", "y"])
    agent = Agent(id="a", model=model, memory=memory)
    await agent.generate("one")
    await agent.generate("two")
    assert len(model.requests[1].prompt) == 1
    assert await memory.list_threads() == []


async def test_last_messages_bounds_history(tmp_path: Path) -> None:
    memory = Memory(storage=tmp_path / "m.db", last_messages=2)
    model = ScriptedModel(["r1", "r2", "r3"])
    agent = Agent(id="a", model=model, memory=memory)
    for text in ("q1", "q2", "q3"):
        await agent.generate(text, memory=T("t"))
    assert [e["content"] for e in model.requests[2].prompt] == ["q2", "r2", "q3"]


async def test_semantic_recall_finds_old_message_beyond_history(tmp_path: Path) -> None:
    memory = Memory(storage=tmp_path / "m.db", last_messages=2,
                    semantic_recall=SemanticRecallOptions(top_k=1, message_range=1))
    replies = ["ok"] * 5
    model = ScriptedModel(replies)
    agent = Agent(id="a", model=model, memory=memory)
    await agent.generate("My favourite colour is turquoise.", memory=T("t"))
    await agent.generate("The weather is rainy today.", memory=T("t"))
    await agent.generate("I had pasta for lunch.", memory=T("t"))
    await agent.generate("Which colour is my favourite colour?", memory=T("t"))
    seen = prompt_text(model, 3)
    assert "turquoise" in seen and "rainy" not in seen
    sources = [e["content"] for e in model.requests[3].prompt]
    assert sources.index("My favourite colour is turquoise.") < sources.index("I had pasta "
                                                                                "for lunch.")


async def test_semantic_recall_is_scoped_per_resource(tmp_path: Path) -> None:
    memory = Memory(storage=tmp_path / "m.db", last_messages=0, semantic_recall=True)
    model = ScriptedModel(["ok"] * 4)
    agent = Agent(id="a", model=model, memory=memory)
    await agent.generate("My passport number is in the blue drawer.", memory=T("t1", "ann"))
    await agent.generate("Where is my passport drawer?", memory=T("t2", "ann"))
    await agent.generate("Where is my passport drawer?", memory=T("t3", "bob"))
    assert "blue drawer" in prompt_text(model, 1)  # another thread, same resource
    assert roles(model, 1)[0] == "system"
    assert "blue drawer" not in prompt_text(model, 2)  # another resource


async def test_semantic_recall_thread_scope(tmp_path: Path) -> None:
    memory = Memory(storage=tmp_path / "m.db", last_messages=0,
                    semantic_recall=SemanticRecallOptions(scope="thread"))
    model = ScriptedModel(["ok"] * 3)
    agent = Agent(id="a", model=model, memory=memory)
    await agent.generate("The launch code is pineapple.", memory=T("t1"))
    await agent.generate("What is the launch code?", memory=T("t2"))
    await agent.generate("What is the launch code?", memory=T("t1"))
    assert "pineapple" not in prompt_text(model, 1)
    assert "pineapple" in prompt_text(model, 2)


async def test_working_memory_is_shown_and_updates_persist(tmp_path: Path) -> None:
    memory = Memory(storage=tmp_path / "m.db", working_memory=True)
    update = "# User Information\n- **First Name**: Ada\n"
    model = ScriptedModel([[ToolCall("update_working_memory", {"memory": update})],
                           "Hello Ada.", "Hi again, Ada."])
    agent = Agent(id="a", model=model, memory=memory)
    out = await agent.generate("I'm Ada.", memory=T("t1"))
    assert out.text == "Hello Ada." and out.tool_results[0].is_error is False
    assert "update_working_memory" in [t.name for t in model.requests[0].tools or []]
    first = model.requests[0].prompt
    assert first[0]["role"] == "system" and "<working_memory>" in first[0]["content"]
    assert "**First Name**: Ada" in model.requests[1].prompt[0]["content"]  # refreshed
    assert await memory.get_working_memory("t1") == update
    await agent.generate("hello", memory=T("t2"))  # resource scope: another thread sees it
    assert "**First Name**: Ada" in model.requests[2].prompt[0]["content"]


class Profile(BaseModel):
    name: str | None = None
    city: str | None = None


async def test_working_memory_schema_merges(tmp_path: Path) -> None:
    memory = Memory(storage=tmp_path / "m.db",
                    working_memory=WorkingMemoryOptions(schema=Profile, scope="thread"))
    model = ScriptedModel([[ToolCall("update_working_memory", {"memory": {"name": "Ada"}})],
                           "ok", [ToolCall("update_working_memory", {"memory": {"city": "Oslo"}})],
                           "ok"])
    agent = Agent(id="a", model=model, memory=memory)
    await agent.generate("I'm Ada", memory=T("t1"))
    await agent.generate("I live in Oslo", memory=T("t1"))
    assert Profile.model_validate_json(await memory.get_working_memory("t1") or "") == \
        Profile(name="Ada", city="Oslo")
    assert await memory.get_working_memory("t2") is None


class Blocker(Processor):
    id = "blocker"

    async def process_output_result(self, args: ProcessOutputResultArgs) -> None:
        args.abort("blocked")


async def test_tripwired_call_saves_nothing(memory: Memory) -> None:
    agent = Agent(id="a", model=ScriptedModel(["bad words"]), memory=memory,
                  output_processors=[Blocker()])
    out = await agent.generate("hi", memory=T("t1"))
    assert out.tripwire is not None and out.tripwire.processor_id == "blocker"
    assert await memory.get_messages("t1") == []


async def test_provider_error_still_saves_the_input(memory: Memory) -> None:
    agent = Agent(id="a", model=ScriptedModel([APICallError("down", status_code=503)]),
                  memory=memory)
    with pytest.raises(APICallError):
        await agent.generate("keep me", memory=T("t1"))
    assert [m.text for m in await memory.get_messages("t1")] == ["keep me"]


async def test_user_listed_memory_processor_is_not_added_twice(tmp_path: Path) -> None:
    memory = Memory(storage=tmp_path / "m.db", last_messages=10)
    custom = MessageHistory(storage=memory.storage, last_messages=1)
    model = ScriptedModel(["r1", "r2", "r3"])
    agent = Agent(id="a", model=model, memory=memory, input_processors=[custom])
    for text in ("q1", "q2", "q3"):
        await agent.generate(text, memory=T("t"))
    assert [e["content"] for e in model.requests[2].prompt] == ["r2", "q3"]
    assert len(await memory.get_messages("t")) == 6  # saved once each


class DropToolHistory(Processor):
    """Removes every earlier message for the model call, as a token limiter might."""

    id = "drop"

    def process_input_step(self, args: ProcessInputStepArgs) -> Any:
        return args.messages[-1:]


async def test_saves_what_the_run_produced_not_the_trimmed_list(memory: Memory) -> None:
    from procflow.agent import tool

    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    def answer(request: ModelRequest) -> str | list[ToolCall]:
        # The model sees only the last message, so no assistant turn: a ScriptedModel
        # would call the tool again. It answers once it sees the tool's result.
        if request.prompt[-1]["role"] == "tool":
            return "done"
        return [ToolCall("lookup", {"q": "x"})]

    model = FunctionModel(answer)
    agent = Agent(id="a", model=model, tools=[lookup], memory=memory,
                  input_processors=[DropToolHistory()])
    await agent.generate("please look up x", memory=T("t1"))
    stored = await memory.get_messages("t1")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[2].tool_results[0].result == "found x"


async def test_transient_feedback_is_not_saved_but_hidden_signals_are(memory: Memory) -> None:
    from procflow.processors import ProcessInputArgs, Signal

    class Signaller(Processor):
        id = "signaller"

        async def process_input(self, args: ProcessInputArgs) -> None:
            await args.send_signal(Signal(contents="be careful"))
            await args.send_signal(Signal(contents="just now", transient=True))

    model = ScriptedModel(["ok", "ok"])
    agent = Agent(id="a", model=model, memory=memory, input_processors=[Signaller()])
    await agent.generate("hi", memory=T("t1"))
    stored = await memory.get_messages("t1")
    assert stored[0].text == "hi" and len(stored) == 3
    assert "be careful" in stored[1].text and "just now" not in str([m.text for m in stored])
    await agent.generate("again", memory=T("t1", "user-1"))
    assert prompt_text(model, 1).count("be careful") == 1  # hidden: not recalled, sent anew


async def test_thread_of_another_resource_is_refused(memory: Memory) -> None:
    from procflow.errors import ProcflowError

    agent = Agent(id="a", model=ScriptedModel(["ok", "ok"]), memory=memory)
    await agent.generate("mine", memory=T("t1", "ann"))
    with pytest.raises(ProcflowError, match="belongs to resource 'ann'"):
        await agent.generate("let me in", memory=T("t1", "bob"))


async def test_history_messages_have_source_memory(memory: Memory) -> None:
    seen: list[list[str]] = []

    class Spy(Processor):
        id = "spy"

        def process_input_step(self, args: ProcessInputStepArgs) -> None:
            ml = args.message_list
            assert ml is not None
            seen.append([ml.source_of(m.id) for m in ml.all()])

    agent = Agent(id="a", model=ScriptedModel(["r1", "r2"]), memory=memory,
                  input_processors=[Spy()])
    await agent.generate(Message.user("q1"), memory=T("t"))
    await agent.generate("q2", memory=T("t"))
    assert seen[1] == ["memory", "memory", "input"]
