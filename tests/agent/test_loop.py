"""The agent loop as a real workflow: its graph, rewiring, stored runs, approvals and
resume (also from another process), tripwires from every hook, streams seen by an
outer workflow."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from procflow import create_step, create_workflow
from procflow.agent import Agent, AgentLoop, AgentState, ToolContext, tool
from procflow.errors import WorkflowDefinitionError
from procflow.models import ScriptedModel, ToolCall
from procflow.processors import Processor
from procflow.storage import InMemoryStorage, SQLiteStorage
from procflow.studio.export import to_mermaid

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: Any) -> str:
    return str(request.param)


class Guard(Processor):
    id = "guard"

    def __init__(self, where: str | None = None) -> None:
        self.where = where

    async def process_input(self, args: Any) -> None:
        if self.where == "input":
            args.abort("blocked input")

    async def process_llm_request(self, args: Any) -> None:
        if self.where == "llm_request":
            args.abort("blocked request")

    async def process_llm_response(self, args: Any) -> None:
        if self.where == "llm_response":
            args.abort("blocked response")


class Upper(Processor):
    id = "upper"

    async def process_output_stream(self, args: Any) -> Any:
        return args.part

    async def process_output_result(self, args: Any) -> None:
        return None


@tool
async def lookup_order(order_id: str) -> dict[str, str]:
    """Look up an order by id."""
    return {"order_id": order_id, "status": "shipped"}


@tool(requires_approval=True)
async def refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


def _tool_then_text(name: str = "lookup_order", text: str = "done") -> ScriptedModel:
    return ScriptedModel([[ToolCall(name, {"order_id": "A-1"}, id="call-1")], text])


# -- 1 and 2: the graph ---------------------------------------------------------------

async def test_the_loop_is_drawn_with_its_processors_and_tools() -> None:
    agent = Agent(id="support", model=_tool_then_text(), tools=[lookup_order, refund],
                  input_processors=[Guard()], output_processors=[Upper()])
    wf = agent.workflow
    assert wf.step_ids() == ["input-processors", "agent-step", "output-processors"]
    ids = AgentLoop(wf).step_ids()
    for expected in ("input-processors", "agent-step", "input-step", "llm-call",
                     "output-step", "tool-calls", "output-processors"):
        assert expected in ids
    assert "memory-save" not in ids
    stage = next(s for e in wf.entries for s in _units(e) if s.id == "input-processors")
    assert stage.step_ids() == ["processor:guard"]
    mermaid = to_mermaid(agent, depth=None)
    for node in ("processor:guard", "processor:upper", "tool:lookup_order", "tool:refund",
                 "llm-call"):
        assert node in mermaid


def _units(entry: Any) -> list[Any]:
    return list(entry.units())


async def test_a_dynamic_processor_array_is_one_dynamic_node() -> None:
    agent = Agent(id="dyn", model=ScriptedModel(["hi"]),
                  input_processors=lambda rc: [Guard()])
    assert "dynamic" in to_mermaid(agent, depth=None)
    assert (await agent.generate("x")).text == "hi"


async def test_trace_has_one_span_per_processor_per_phase_under_the_stage() -> None:
    storage = InMemoryStorage()
    agent = Agent(id="traced", model=ScriptedModel(["hello"]), storage=storage,
                  input_processors=[Guard()], output_processors=[Upper()])
    out = await agent.generate("hi")
    trace = await storage.load_trace(out.run_id)
    assert trace is not None
    spans = {s["span_id"]: s for s in trace.spans}
    by_name: dict[str, list[dict[str, Any]]] = {}
    for span in trace.spans:
        by_name.setdefault(span["name"], []).append(span)
    stage = by_name["input-processors"][0]
    [guard] = [s for s in trace.spans if s["name"].endswith(": guard")
               and s["name"].startswith("input processor")]
    assert guard["parent_id"] == stage["span_id"]
    [result] = [s for s in trace.spans if "upper" in s["name"] and "result" in s["name"]]
    assert spans[result["parent_id"]]["name"] == "output-processors"


# -- 3: rewiring ----------------------------------------------------------------------

def _audit(seen: list[int]) -> Any:
    async def audit(ctx: Any) -> AgentState:
        state: AgentState = ctx.input_data
        seen.append(state.step_number)
        return state
    return create_step(id="audit", execute=audit)


async def test_an_inserted_step_runs_once_per_model_step_and_is_drawn_and_traced() -> None:
    seen: list[int] = []
    storage = InMemoryStorage()
    agent = Agent(id="audited", model=_tool_then_text(), tools=[lookup_order],
                  storage=storage,
                  loop=lambda loop: loop.insert_after("llm-call", _audit(seen)))
    out = await agent.generate("where is A-1?")
    assert out.text == "done" and seen == [0, 1]
    assert "audit" in AgentLoop(agent.workflow).step_ids()
    assert "audit" in to_mermaid(agent, depth=None)
    trace = await storage.load_trace(out.run_id)
    assert trace is not None
    assert sum(1 for s in trace.spans if s["name"] == "audit") == 2


async def test_a_replaced_tool_step_is_used() -> None:
    async def fake_tools(ctx: Any) -> AgentState:
        state: AgentState = ctx.input_data
        from procflow.messages import Message, ToolResultPart

        for call in state.pending_calls:
            state.messages.add(Message.tool([ToolResultPart(
                tool_call_id=call["tool_call_id"], tool_name=call["tool_name"],
                result="from the replacement")]), source="response")
        state.pending_calls = []
        state.step_number += 1
        return state

    agent = Agent(id="replaced", model=_tool_then_text(), tools=[lookup_order],
                  loop=lambda loop: loop.replace("tool-calls",
                                                 create_step(id="my-tools",
                                                             execute=fake_tools)))
    out = await agent.generate("x")
    assert out.text == "done"
    results = [p for m in out.messages if m.role == "tool" for p in m.content.parts]
    assert [getattr(p, "result", None) for p in results] == ["from the replacement"]


async def test_an_unknown_step_id_names_the_known_ones() -> None:
    agent = Agent(id="bad", model=ScriptedModel(["x"]),
                  loop=lambda loop: loop.insert_before("nope", _audit([])))
    with pytest.raises(WorkflowDefinitionError, match=r"no step 'nope'.*llm-call"):
        agent.workflow  # noqa: B018


async def test_one_customised_loop_serves_two_agents() -> None:
    seen: list[int] = []

    def custom(loop: AgentLoop) -> AgentLoop:
        return loop.insert_before("llm-call", _audit(seen))

    a = Agent(id="a", model=ScriptedModel(["from a"]), loop=custom)
    b = Agent(id="b", model=ScriptedModel(["from b"]), loop=custom)
    assert (await a.generate("x")).text == "from a"
    assert (await b.generate("x")).text == "from b"
    assert seen == [0, 0] and a.workflow is not b.workflow


# -- 4 and 6: stored runs and their status ---------------------------------------------

@pytest.mark.parametrize("where", ["input", "llm_request", "llm_response"])
async def test_an_abort_in_any_hook_is_a_tripwire_run(where: str) -> None:
    storage = InMemoryStorage()
    agent = Agent(id="guarded", model=ScriptedModel(["secret"]), storage=storage,
                  input_processors=[Guard(where)])
    out = await agent.generate("hi")
    assert out.finish_reason == "other" and out.tripwire is not None
    assert out.tripwire.processor_id == "guard" and out.text == ""
    runs = await agent.workflow.list_runs(status="tripwire", storage=storage)
    assert [r.run_id for r in runs] == [out.run_id]
    stream = await Agent(id="guarded", model=ScriptedModel(["secret"]), storage=storage,
                         input_processors=[Guard(where)]).stream("hi")
    kinds = [c.type async for c in stream.full_stream]
    assert "tripwire" in kinds


async def test_every_call_is_a_stored_run_with_its_status() -> None:
    storage = InMemoryStorage()
    agent = Agent(id="stored", model=ScriptedModel(["hello"]), storage=storage)
    out = await agent.generate("hi")
    run = await agent.workflow.get_run(out.run_id)
    assert run.status == "success"

    from procflow.errors import APICallError

    failing = Agent(id="failing", storage=storage, model=ScriptedModel(
        [APICallError("down", status_code=500, is_retryable=False)]))
    with pytest.raises(APICallError):
        await failing.generate("hi")
    [failed] = await failing.workflow.list_runs(storage=storage)
    assert failed.status == "failed"


async def test_replaying_a_stored_agent_run_from_llm_call_with_another_model(
        tmp_path: Path) -> None:
    storage = SQLiteStorage(tmp_path / "runs.db")
    first = Agent(id="replay", model=ScriptedModel(["first answer"]), storage=storage,
                  output_processors=[Upper()])
    out = await first.generate("hi")
    second = Agent(id="replay", model=ScriptedModel(["second answer"]), storage=storage,
                   output_processors=[Upper()])
    run = await second.workflow.get_run(out.run_id)
    new = await run.replay_from("agent-step.llm-call")
    assert new.last_result is not None and new.last_result.status == "success"
    from procflow.agent.state import as_state

    final = as_state(new.last_result.result)
    assert [m.text for m in final.messages.response()] == ["second answer"]
    assert [m.text for m in final.messages.input()] == ["hi"]


# -- 5: human in the loop ---------------------------------------------------------------

async def test_an_approval_tool_suspends_and_resumes_approved() -> None:
    storage = InMemoryStorage()
    agent = Agent(id="approver", model=_tool_then_text("refund", "refunded"),
                  tools=[refund], storage=storage)
    out = await agent.generate("refund A-1")
    assert out.finish_reason == "suspended"
    [call] = out.suspended
    assert (call.tool_call_id, call.tool_name, call.args) == ("call-1", "refund",
                                                              {"order_id": "A-1"})
    assert (await agent.workflow.get_run(out.run_id)).status == "suspended"
    done = await agent.resume(out.run_id, approve=["call-1"])
    assert done.text == "refunded" and done.run_id == out.run_id
    assert [r.result for r in done.tool_results] == ["refunded A-1"]


async def test_an_approval_answers_one_call_not_a_later_one_with_the_same_id() -> None:
    """A provider that numbers each response's calls from 1 gives a later call the id
    of an approved one: that call still waits for its own approval (and a denial
    likewise answers only the call it named)."""
    ran: list[str] = []

    @tool(requires_approval=True)
    async def pay(order_id: str) -> str:
        """Pay an order."""
        ran.append(order_id)
        return f"paid {order_id}"

    agent = Agent(id="payer", storage=InMemoryStorage(), tools=[pay], model=ScriptedModel([
        [ToolCall("pay", {"order_id": "A-1"}, id="call_1")],
        [ToolCall("pay", {"order_id": "B-2"}, id="call_1")],
        [ToolCall("pay", {"order_id": "C-3"}, id="call_1")],
        "done"]))
    out = await agent.generate("pay")
    assert [(c.tool_call_id, c.args) for c in out.suspended] == [("call_1", {"order_id": "A-1"})]
    second = await agent.resume(out.run_id, approve=["call_1"])
    assert ran == ["A-1"]
    assert second.finish_reason == "suspended"
    assert [(c.tool_call_id, c.args) for c in second.suspended] == [
        ("call_1", {"order_id": "B-2"})]
    third = await agent.resume(out.run_id, deny=["call_1"])
    assert ran == ["A-1"] and third.finish_reason == "suspended"
    assert [c.args for c in third.suspended] == [{"order_id": "C-3"}]
    last = await agent.resume(out.run_id, approve=["call_1"])
    assert ran == ["A-1", "C-3"] and last.text == "done"
    assert [r.is_error for r in last.tool_results] == [False, True, False]


async def test_a_denied_call_gets_a_result_saying_so_and_streams_suspended() -> None:
    agent = Agent(id="denier", model=_tool_then_text("refund", "ok, not refunded"),
                  tools=[refund], storage=InMemoryStorage())
    stream = await agent.stream("refund A-1")
    chunks = [c async for c in stream.full_stream]
    assert chunks[-1].type == "suspended"
    run_id = (await stream.output).run_id
    again = await agent.resume_stream(run_id, deny=["call-1"])
    texts = [t async for t in again.text_stream]
    out = await again.output
    assert "".join(texts) == out.text == "ok, not refunded"
    [result] = out.tool_results
    assert result.is_error and "denied" in result.result


async def test_a_tool_may_suspend_itself_and_get_resume_data() -> None:
    @tool
    async def ask_human(question: str, ctx: ToolContext) -> str:
        """Ask a person."""
        if ctx.resume_data is None:
            ctx.suspend({"question": question})
        return f"the human said {ctx.resume_data}"

    agent = Agent(id="asker", storage=InMemoryStorage(), tools=[ask_human], model=ScriptedModel(
        [[ToolCall("ask_human", {"question": "ok?"}, id="q1")], "thanks"]))
    out = await agent.generate("go")
    assert out.finish_reason == "suspended" and out.suspended[0].payload == {"question": "ok?"}
    done = await agent.resume(out.run_id, resume_data="yes")
    assert done.text == "thanks"
    assert done.tool_results[0].result == "the human said yes"


RESUMER = """
import anyio, sys
from procflow.agent import Agent, tool
from procflow.models import ScriptedModel, ToolCall
from procflow.storage import SQLiteStorage

@tool(requires_approval=True)
async def refund(order_id: str) -> str:
    \"\"\"Refund an order.\"\"\"
    return f"refunded {order_id}"

async def main() -> None:
    # the same script as the first process: the conversation says where it is
    model = ScriptedModel([[ToolCall("refund", {"order_id": "A-1"}, id="call-1")],
                           "refund made"])
    agent = Agent(id="approver", model=model, tools=[refund],
                  storage=SQLiteStorage(sys.argv[1]))
    out = await agent.resume(sys.argv[2], approve=["call-1"])
    print(out.text, "|", out.tool_results[0].result)

anyio.run(main)
"""


async def test_a_run_suspended_here_is_resumed_by_another_process(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    agent = Agent(id="approver", model=_tool_then_text("refund", "refund made"),
                  tools=[refund], storage=SQLiteStorage(db))
    out = await agent.generate("refund A-1")
    assert out.finish_reason == "suspended"
    script = tmp_path / "resume.py"
    script.write_text(textwrap.dedent(RESUMER))
    done = await anyio.to_thread.run_sync(lambda: subprocess.run(
        [sys.executable, str(script), str(db), out.run_id], capture_output=True, text=True,
        timeout=120))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "refund made | refunded A-1"
    run = await agent.workflow.get_run(out.run_id)
    assert run.status == "success"


# -- 7: workflows see agent streams -------------------------------------------------

async def test_an_agent_step_streams_its_chunks_to_the_outer_run() -> None:
    agent = Agent(id="writer", model=ScriptedModel(["Hello there world"]))
    outer = create_workflow(id="outer").then(agent).commit()
    texts: list[str] = []
    async with outer.create_run().stream(input_data="hi") as events:
        async for event in events:
            if event.type == "custom" and event.payload["type"] == "agent-chunk":
                chunk = event.payload["data"]["chunk"]
                if chunk.type == "text-delta":
                    texts.append(chunk.text)
    assert texts == ["Hello ", "there ", "world"]
    assert events.result.result == {"text": "Hello there world"}


async def test_rewiring_a_nested_step_leaves_the_built_workflows_unchanged() -> None:
    from procflow.agent.loop import build_loop

    agent = Agent(id="plain", model=ScriptedModel(["x"]))
    built = build_loop(agent)
    step = built.get_step("agent-step")
    assert step is not None and step.is_workflow
    before = list(step.entries)  # type: ignore[union-attr]
    loop = AgentLoop(built).insert_after("llm-call", _audit([]))
    assert list(step.entries) == before and step.committed  # type: ignore[union-attr]
    assert "audit" not in AgentLoop(built).step_ids()
    assert loop.step_ids().index("audit") == loop.step_ids().index("llm-call") + 1
