"""Agent runs as stored runs: a canceled call is a "canceled" run (listed by
``procflow runs --status canceled``), and a run suspended by another process is resumed
here through Redis storage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from procflow import RunStateError
from procflow.agent import Agent, tool
from procflow.models import ScriptedModel, ToolCall
from procflow.storage import InMemoryStorage, SQLiteStorage
from procflow.storage.base import Storage

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: Any) -> str:
    return str(request.param)


def _stuck_agent(agent_id: str, storage: Storage) -> tuple[Agent, anyio.Event]:
    """An agent whose tool never returns, and the event set once the tool runs."""
    entered = anyio.Event()

    @tool
    async def wait_forever(what: str) -> str:
        """Wait for something that never comes."""
        entered.set()
        await anyio.sleep_forever()
        return what  # pragma: no cover

    model = ScriptedModel([[ToolCall("wait_forever", {"what": "x"}, id="w1")], "never"])
    return Agent(id=agent_id, model=model, tools=[wait_forever], storage=storage), entered


def _storages(tmp_path: Path) -> list[Storage]:
    return [InMemoryStorage(), SQLiteStorage(tmp_path / "runs.db")]


async def test_a_generate_canceled_by_its_caller_is_a_canceled_run(tmp_path: Path) -> None:
    for storage in _storages(tmp_path):
        agent, entered = _stuck_agent("canceled-generate", storage)
        async with anyio.create_task_group() as tg:
            tg.start_soon(agent.generate, "go")
            await entered.wait()
            tg.cancel_scope.cancel()
        [run] = await agent.workflow.list_runs(storage=storage)
        assert run.status == "canceled", type(storage).__name__
        trace = await storage.load_trace(run.run_id)
        assert trace is not None and trace.status == "canceled"
        await storage.aclose()


async def test_a_stream_canceled_while_read_is_a_canceled_run(tmp_path: Path) -> None:
    for storage in _storages(tmp_path):
        agent, entered = _stuck_agent("canceled-stream", storage)
        seen: list[str] = []
        with anyio.CancelScope() as scope:
            out = await agent.stream("go")
            async for chunk in out.full_stream:
                seen.append(chunk.type)
                if chunk.type == "tool-call":
                    await entered.wait()
                    scope.cancel()
        assert scope.cancelled_caught and "finish" not in seen
        [run] = await agent.workflow.list_runs(storage=storage)
        assert run.status == "canceled", type(storage).__name__
        await storage.aclose()


async def test_procflow_runs_lists_canceled_agent_runs(tmp_path: Path) -> None:
    storage = SQLiteStorage(tmp_path / "runs.db")
    agent, entered = _stuck_agent("listed", storage)
    async with anyio.create_task_group() as tg:
        tg.start_soon(agent.generate, "go")
        await entered.wait()
        tg.cancel_scope.cancel()
    finished = Agent(id="listed", model=ScriptedModel(["fine"]), storage=storage)
    ok = await finished.generate("hi")
    [canceled] = await agent.workflow.list_runs(status="canceled", storage=storage)
    await storage.aclose()
    done = await anyio.to_thread.run_sync(lambda: subprocess.run(
        [sys.executable, "-m", "procflow", "--db", str(tmp_path / "runs.db"), "runs",
         "--status", "canceled", "--json"], capture_output=True, text=True, timeout=60))
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["runs"]
    assert [(r["run_id"], r["workflow_id"], r["status"]) for r in rows] == [
        (canceled.run_id, "agent:listed", "canceled")]
    assert ok.run_id != canceled.run_id


# -- resume from another process, through Redis -----------------------------------------

SUSPENDER = """
import sys

import anyio

from procflow.agent import Agent, tool
from procflow.models import ScriptedModel, ToolCall
from procflow.storage import RedisStorage


@tool(requires_approval=True)
async def refund(order_id: str) -> str:
    \"\"\"Refund an order.\"\"\"
    return f"refunded {order_id}"


async def main() -> None:
    async with RedisStorage(sys.argv[1], prefix=sys.argv[2]) as storage:
        agent = Agent(id="redis-approver", tools=[refund], storage=storage,
                      model=ScriptedModel([[ToolCall("refund", {"order_id": "B-2"},
                                                     id="call-7")], "refund sent"]))
        out = await agent.generate("refund B-2")
        print(out.run_id, out.finish_reason, [c.tool_call_id for c in out.suspended])

anyio.run(main)
"""


@tool(requires_approval=True)
async def refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # redis.asyncio needs asyncio
async def test_a_run_suspended_by_another_process_is_resumed_here_through_redis(
        tmp_path: Path, redis_url: str, redis_prefix: str) -> None:
    from procflow.storage import RedisStorage

    script = tmp_path / "suspend.py"
    script.write_text(textwrap.dedent(SUSPENDER))
    env = {**os.environ, "PROCFLOW_DB": ""}
    made = await anyio.to_thread.run_sync(lambda: subprocess.run(
        [sys.executable, str(script), redis_url, redis_prefix],
        capture_output=True, text=True, timeout=120, env=env))
    assert made.returncode == 0, made.stderr
    run_id, reason, calls = made.stdout.split(maxsplit=2)
    assert reason == "suspended" and calls.strip() == "['call-7']"
    async with RedisStorage(redis_url, prefix=redis_prefix) as storage:
        # the same script as the process that suspended: the conversation says where it is
        agent = Agent(id="redis-approver", tools=[refund], storage=storage,
                      model=ScriptedModel([[ToolCall("refund", {"order_id": "B-2"},
                                                     id="call-7")], "refund sent"]))
        assert (await agent.workflow.get_run(run_id)).status == "suspended"
        done = await agent.resume(run_id, approve=["call-7"])
        assert done.run_id == run_id and done.text == "refund sent"
        assert [(r.tool_call_id, r.result) for r in done.tool_results] == [
            ("call-7", "refunded B-2")]
        assert (await agent.workflow.get_run(run_id)).status == "success"
        trace = await storage.load_trace(run_id)
        assert trace is not None and trace.status == "success"


# -- a bounded in-memory storage never drops a run waiting for an approval ---------------

async def test_a_suspended_run_outlives_the_bound_of_its_in_memory_storage() -> None:
    storage = InMemoryStorage(max_runs=3)
    ops = Agent(id="ops", tools=[refund], storage=storage,
                model=ScriptedModel([[ToolCall("refund", {"order_id": "C-3"}, id="call-9")],
                                     "refund sent"]))
    out = await ops.generate("refund C-3")
    assert out.finish_reason == "suspended"
    chat = Agent(id="chat", storage=storage, model=ScriptedModel(["hi"] * 13))
    ids = [(await chat.generate("hello")).run_id for _ in range(10)]
    # The bound drops the finished runs that finished first, never the suspended one.
    assert [r.run_id for r in await storage.list_runs(workflow_id="agent:chat")] == \
        ids[::-1][:3]
    done = await ops.resume(out.run_id, approve=["call-9"])
    assert done.text == "refund sent"
    # Once finished, it counts against the bound like any other run.
    assert (await ops.workflow.get_run(out.run_id)).status == "success"
    for _ in range(3):
        await chat.generate("hello")
    assert await storage.load_snapshot("agent:ops", out.run_id) is None


def _durable_benchmark() -> Any:
    """``benchmarks/agent_durable.py`` (it imports ``benchmarks/agent.py`` as ``agent``)."""
    import importlib.util
    folder = Path(__file__).resolve().parents[2] / "benchmarks"
    sys.path.insert(0, str(folder))
    try:
        spec = importlib.util.spec_from_file_location("agent_durable_benchmark",
                                                      folder / "agent_durable.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(folder))
    return module


async def test_durable_benchmark_compares_runs_of_the_same_shape(tmp_path: Path) -> None:
    """The durable-cost benchmark is fair: on the same SQLite file, the agent call and
    its same-shape workflow each store seven step results, one of them skipped."""
    bench = _durable_benchmark()
    storage = SQLiteStorage(tmp_path / "runs.db")
    try:
        agent_call, workflow_run = bench.cases(storage)
        await agent_call()
        await workflow_run()
        shapes = {}
        for snapshot in await storage.list_runs():
            loaded = await storage.load_snapshot(snapshot.workflow_id, snapshot.run_id)
            assert loaded is not None and snapshot.status == "success"
            shapes[snapshot.workflow_id] = sorted(r.status for r in loaded[1].values())
        assert shapes == {"agent:bench": ["skipped"] + ["success"] * 6,
                          "same-shape": ["skipped"] + ["success"] * 6}
    finally:
        await storage.aclose()


async def test_a_call_stored_under_the_run_id_given(tmp_path: Path) -> None:
    storage = SQLiteStorage(tmp_path / "runs.db")
    agent = Agent(id="support", model=ScriptedModel(["first"]), storage=storage)
    out = await agent.generate("hi", run_id="request-41")
    assert out.run_id == "request-41" and out.text == "first"

    with pytest.raises(RunStateError, match=r"cannot start run 'request-41' of workflow "
                       r"'agent:support': a run with that id is already stored"):
        await agent.generate("again", run_id="request-41")
    stream = await agent.stream("other", run_id="request-42")
    assert await stream.text == "first"  # a new conversation: the script's first turn

    kept = (await agent.workflow.get_run("request-41")).last_result
    assert kept is not None and kept.status == "success"
    assert {r.run_id for r in await storage.list_runs()} == {"request-41", "request-42"}
    with pytest.raises(ValueError, match="run_id must be a non-empty string"):
        await agent.generate("hi", run_id="")
    await storage.aclose()
