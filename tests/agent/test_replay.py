"""``agent.replay_from``: a stored call run again from a loop step, with the agent as it
is now, as a new stored run; the stored call stays as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from procflow import Agent, RunStateError, tool
from procflow.models import ScriptedModel, ToolCall
from procflow.storage import InMemoryStorage, SQLiteStorage

looked_up: list[str] = []


@tool
async def lookup(order_id: str) -> str:
    """Look an order up."""
    looked_up.append(order_id)
    return f"{order_id} shipped"


async def test_replay_from_llm_call_uses_the_new_model_and_keeps_the_tool_round(
        tmp_path: Path) -> None:
    looked_up.clear()
    storage = SQLiteStorage(tmp_path / "runs.db")
    before = Agent(id="support", tools=[lookup], storage=storage, model=ScriptedModel(
        [[ToolCall("lookup", {"order_id": "A-1"})], "It shipped."]))
    first = await before.generate("Where is A-1?")
    assert first.text == "It shipped." and looked_up == ["A-1"]

    # replayed from the last llm-call, the conversation holds the tool round: turn 1
    after = Agent(id="support", tools=[lookup], storage=storage, model=ScriptedModel(
        [[ToolCall("lookup", {"order_id": "A-1"})], "A-1 is on its way."]))
    again = await after.replay_from(first.run_id, "llm-call")

    assert again.text == "A-1 is on its way." and again.run_id != first.run_id
    assert looked_up == ["A-1"]  # the tool round before the last model call is kept
    assert [r.result for r in again.tool_results] == ["A-1 shipped"]
    stored = await after.workflow.get_run(first.run_id)
    assert stored.last_result is not None and stored.last_result.status == "success"
    runs = {r.run_id for r in await after.workflow.list_runs(storage=storage)}
    assert runs == {first.run_id, again.run_id}
    await storage.aclose()


async def test_replay_from_an_unknown_step_names_the_stored_ones(tmp_path: Path) -> None:
    storage = SQLiteStorage(tmp_path / "runs.db")
    agent = Agent(id="plain", storage=storage, model=ScriptedModel(["hi", "hi"]))
    out = await agent.generate("hello")
    with pytest.raises(RunStateError, match=r"no stored step .* 'agent-step.llm-call'"):
        await agent.replay_from(out.run_id, "nope")
    await storage.aclose()


async def test_replay_whose_new_model_calls_a_tool_runs_that_call(tmp_path: Path) -> None:
    """The replayed model call asks for a tool: the call runs and stays in the
    conversation (the first round's stored tool result is not handed back instead)."""
    looked_up.clear()
    storage = SQLiteStorage(tmp_path / "runs.db")
    before = Agent(id="support", tools=[lookup], storage=storage, model=ScriptedModel(
        [[ToolCall("lookup", {"order_id": "A-1"})], "It shipped."]))
    first = await before.generate("Where are A-1 and B-2?")
    after = Agent(id="support", tools=[lookup], storage=storage, model=ScriptedModel(
        [[ToolCall("lookup", {"order_id": "A-1"})], [ToolCall("lookup", {"order_id": "B-2"})],
         "Both shipped."]))
    again = await after.replay_from(first.run_id, "llm-call")
    assert looked_up == ["A-1", "B-2"]
    assert again.text == "Both shipped."
    assert [r.result for r in again.tool_results] == ["A-1 shipped", "B-2 shipped"]
    calls = [part.args for m in again.messages if m.role == "assistant"
             for part in m.tool_calls]
    assert calls == [{"order_id": "A-1"}, {"order_id": "B-2"}]
    await storage.aclose()


async def test_replay_of_a_run_kept_in_memory_says_which_storage_can() -> None:
    agent = Agent(id="mem", storage=InMemoryStorage(), model=ScriptedModel(["hi", "hi"]))
    out = await agent.generate("hello")
    with pytest.raises(RunStateError, match=r"InMemoryStorage.*SQLiteStorage"):
        await agent.replay_from(out.run_id, "llm-call")
