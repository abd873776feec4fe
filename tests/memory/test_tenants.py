"""A thread belongs to the resource that created it: every memory path refuses a request
that names the thread without that resource (issue 12's leak: a request with alice's
thread id and no resource got alice's messages into the prompt)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from procflow.agent import Agent
from procflow.context import RESOURCE_ID_KEY, THREAD_ID_KEY, RequestContext
from procflow.errors import ProcessorError
from procflow.memory import (
    Memory,
    MessageHistory,
    SemanticRecall,
    SemanticRecallOptions,
    WorkingMemory,
    WorkingMemoryOptions,
)
from procflow.models import ScriptedModel
from procflow.processors.args import ProcessorWriter
from procflow.tools import ToolContext

SECRET = "alice's locker code is 4512"


def seen(model: ScriptedModel) -> str:
    return "\n".join(str(entry["content"]) for r in model.requests for entry in r.prompt)


@pytest.fixture
async def memory(tmp_path: Path) -> Memory:
    """A memory holding alice's thread "t-alice" with a secret in history, the vector
    index and working memory (per thread)."""
    made = Memory(storage=tmp_path / "memory.db",
                  semantic_recall=SemanticRecallOptions(scope="thread"),
                  working_memory=WorkingMemoryOptions(scope="thread"))
    await made.create_thread(thread_id="t-alice", resource_id="alice")
    await made.save_messages([SECRET], thread_id="t-alice", resource_id="alice")
    await made.update_working_memory("t-alice", f"# Notes\n{SECRET}")
    return made


def agent_with(model: ScriptedModel, *, memory: Memory | None = None,
               processors: list[Any] | None = None) -> Agent:
    return Agent(id="a", model=model, memory=memory, input_processors=processors or [])


@pytest.mark.parametrize("who", [
    pytest.param({"thread": "t-alice"}, id="no-resource"),
    pytest.param({"thread": "t-alice", "resource": "bob"}, id="another-resource"),
])
async def test_every_memory_path_together_refuses_the_thread(memory: Memory,
                                                             who: dict[str, str]) -> None:
    model = ScriptedModel(["ok"])

    with pytest.raises(ProcessorError, match="t-alice' belongs to resource 'alice'"):
        await agent_with(model, memory=memory).generate("what is my locker code?",
                                                        memory=who)

    assert model.requests == [] and [m.text for m in
                                     await memory.get_messages("t-alice")] == [SECRET]


def history(memory: Memory) -> Any:
    return MessageHistory(storage=memory.storage)


def recall(memory: Memory) -> Any:
    return SemanticRecall(storage=memory.storage, vector=memory.vector,
                          embedder=memory.embedder,
                          options=SemanticRecallOptions(scope="thread", top_k=3))


def working(memory: Memory) -> Any:
    return WorkingMemory(storage=memory.storage, options=WorkingMemoryOptions(scope="thread"))


@pytest.mark.parametrize("make", [pytest.param(history, id="history"),
                                  pytest.param(recall, id="semantic-recall"),
                                  pytest.param(working, id="working-memory")])
async def test_each_path_alone_refuses_a_request_without_the_resource(
        memory: Memory, make: Any) -> None:
    model = ScriptedModel(["ok"])
    processor = make(memory)

    with pytest.raises(ProcessorError, match="names no resource") as caught:
        await agent_with(model, processors=[processor]).generate(
            "locker code?", memory={"thread": "t-alice"})

    assert caught.value.processor_id == processor.id
    assert SECRET not in seen(model)


async def test_the_working_memory_tool_refuses_another_resource(memory: Memory) -> None:
    ctx = RequestContext({THREAD_ID_KEY: "t-alice", RESOURCE_ID_KEY: "bob"})

    with pytest.raises(ProcessorError, match="belongs to resource 'alice', not 'bob'"):
        await working(memory).tool().run({"memory": "# Notes\nbob was here"},
                                         ToolContext("call-1", ctx, ProcessorWriter()))
    assert SECRET in (await memory.get_working_memory("t-alice") or "")


async def test_a_thread_made_without_a_resource_is_not_claimed_by_one(
        tmp_path: Path) -> None:
    memory = Memory(storage=tmp_path / "memory.db")
    model = ScriptedModel(["noted", "ok"])
    agent = agent_with(model, memory=memory)
    await agent.generate(SECRET, memory={"thread": "t-anon"})

    with pytest.raises(ProcessorError, match="created without a resource"):
        await agent.generate("what was said?", memory={"thread": "t-anon", "resource": "bob"})
    again = await agent.generate("and now?", memory={"thread": "t-anon"})

    assert SECRET in seen(model) and again.text == "ok"
    thread = await memory.get_thread("t-anon")
    assert thread is not None and thread.resource_id is None


async def test_the_owner_keeps_using_the_thread(memory: Memory) -> None:
    model = ScriptedModel(["4512"])

    out = await agent_with(model, memory=memory).generate(
        "what is my locker code?", memory={"thread": "t-alice", "resource": "alice"})

    assert out.text == "4512" and SECRET in seen(model)


async def test_the_application_view_checks_the_resource_it_is_given(memory: Memory) -> None:
    assert await memory.get_messages("t-alice", resource_id="bob") == []
    assert [m.text for m in await memory.get_messages("t-alice", resource_id="alice")] == [
        SECRET]

