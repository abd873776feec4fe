"""An agent with a ``requires_approval`` tool and a ``ScriptedModel`` suspends in one
process and, resumed with approval in a second process (its own agent and model), ends
"success" with the script's next answer as its text."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import anyio

from procflow import Agent
from procflow.agent import tool
from procflow.models import ScriptedModel, ToolCall
from procflow.storage import SQLiteStorage

AGENT = """
from pathlib import Path

from procflow import Agent
from procflow.agent import tool
from procflow.models import ScriptedModel, ToolCall
from procflow.storage import SQLiteStorage


def build(db: str) -> Agent:
    @tool(requires_approval=True)
    async def refund(order_id: str) -> str:
        \"\"\"Refund an order.\"\"\"
        with (Path(db).parent / "ledger.txt").open("a") as out:
            out.write(order_id + "\\n")
        return f"refunded {order_id}"

    model = ScriptedModel([[ToolCall("refund", {"order_id": "A-1"})], "A-1 is refunded."])
    return Agent(id="support", model=model, tools=[refund], storage=SQLiteStorage(db))
"""

RESUME = """
import sys

import anyio

from support import build


async def main() -> None:
    agent = build(sys.argv[1])
    out = await agent.resume(sys.argv[2], approve=[sys.argv[3]])
    run = await agent.workflow.get_run(sys.argv[2])
    print(run.status, out.finish_reason, out.text, sep="|")

anyio.run(main)
"""


async def test_a_run_approved_in_another_process_ends_with_the_next_answer(
        tmp_path: Path) -> None:
    (tmp_path / "support.py").write_text(textwrap.dedent(AGENT))
    (tmp_path / "resume.py").write_text(textwrap.dedent(RESUME))
    db = tmp_path / "runs.db"
    sys.path.insert(0, str(tmp_path))
    try:
        from support import build  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("support", None)

    out = await build(str(db)).generate("refund A-1")
    assert out.finish_reason == "suspended" and out.text == ""
    [call] = out.suspended
    assert (call.tool_name, call.args) == ("refund", {"order_id": "A-1"})

    done = await anyio.to_thread.run_sync(lambda: subprocess.run(
        [sys.executable, "resume.py", str(db), out.run_id, call.tool_call_id],
        capture_output=True, text=True, timeout=120, cwd=tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "success|stop|A-1 is refunded."
    assert (tmp_path / "ledger.txt").read_text() == "A-1\n"  # the tool ran once


async def test_resumed_here_by_a_fresh_agent_the_script_goes_on(tmp_path: Path) -> None:
    ran: list[str] = []

    @tool(requires_approval=True)
    async def refund(order_id: str) -> str:
        """Refund an order."""
        ran.append(order_id)
        return f"refunded {order_id}"

    def agent() -> Agent:  # a fresh model each time, as another process would build
        model = ScriptedModel([[ToolCall("refund", {"order_id": "A-1"})], "A-1 is refunded."])
        return Agent(id="support", model=model, tools=[refund],
                     storage=SQLiteStorage(tmp_path / "runs.db"))

    out = await agent().generate("refund A-1")
    done = await agent().resume(out.run_id, approve=[out.suspended[0].tool_call_id])
    assert (done.finish_reason, done.text, ran) == ("stop", "A-1 is refunded.", ["A-1"])
