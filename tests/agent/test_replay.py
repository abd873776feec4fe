"""``agent.replay_from``: a stored call run again from a loop step, with the agent as it
is now, as a new stored run; the stored call stays as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from procflow import Agent, RunStateError, tool
from procflow.models import ScriptedModel, ToolCall
from procflow.storage import SQLiteStorage

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

    after = Agent(id="support", tools=[lookup], storage=storage,
                  model=ScriptedModel(["A-1 is on its way."]))
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
