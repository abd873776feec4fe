"""A tool that needs a human's approval, approved from another process.

Run it offline in two steps (two processes sharing one SQLite file)::

    python examples/approval.py start              # suspends, prints the run id
    python examples/approval.py approve RUN_ID     # resumes it: the refund runs

``--db PATH`` picks the database (default ``.procflow/procflow.db`` under the current
directory). The agent's ``ScriptedModel`` answers from the conversation it is sent, not
from a counter in the process: the second process builds the same agent with the same
script, and the resumed run goes on with the turn after the tool call. Each refund
made is written to ``refunds.txt`` beside the database.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import anyio

from procflow import Agent, tool
from procflow.errors import ProcflowError
from procflow.models import ScriptedModel, ToolCall
from procflow.storage import SQLiteStorage

DEFAULT_DB = Path(".procflow") / "procflow.db"
CALL_ID = "call_1"  # the id ScriptedModel gives the conversation's first tool call


def build_agent(db: Path) -> Agent:
    """The same agent in every process: a refund tool that waits for approval."""
    ledger = db.parent / "refunds.txt"

    @tool(requires_approval=True)
    async def refund(order_id: str) -> str:
        """Refund an order."""
        with ledger.open("a") as out:
            out.write(f"{order_id}\n")
        return f"refunded {order_id}"

    model = ScriptedModel([
        [ToolCall("refund", {"order_id": "A-1"})],  # turn 1: ask to refund
        "Done: order A-1 is refunded.",              # turn 2: answer from the result
    ])
    return Agent(id="support", model=model, tools=[refund], storage=SQLiteStorage(db))


async def start(db: Path) -> int:
    agent = build_agent(db)
    out = await agent.generate("Please refund order A-1.")
    print(f"run {out.run_id}: {out.finish_reason}")
    for call in out.suspended:
        print(f"  waiting for approval: {call.tool_call_id}  "
              f"{call.tool_name}({json.dumps(call.args)})")
    print(f"approve it from another process: python {sys.argv[0]} approve {out.run_id}")
    return 0 if out.finish_reason == "suspended" else 1


async def approve(db: Path, run_id: str, calls: list[str]) -> int:
    agent = build_agent(db)
    try:
        done = await agent.resume(run_id, approve=calls)
    except ProcflowError as exc:  # an unknown run, one not suspended, a wrong call id
        print(f"cannot approve: {exc}", file=sys.stderr)
        return 1
    status = (await agent.workflow.get_run(run_id)).status
    print(f"run {run_id}: {status}")
    for result in done.tool_results:
        print(f"  {result.tool_name} -> {result.result}")
    print(done.text)
    return 0 if status == "success" else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=DEFAULT_DB, help="the SQLite file")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("start", help="ask for a refund; the run waits for approval")
    approving = commands.add_parser("approve", help="approve the refund and finish the run")
    approving.add_argument("run_id")
    approving.add_argument("call_id", nargs="*", default=[CALL_ID],
                           help=f"the calls to approve (default: {CALL_ID})")
    args = parser.parse_args()
    if args.command == "start":
        return anyio.run(start, args.db)
    return anyio.run(approve, args.db, args.run_id, args.call_id)


if __name__ == "__main__":
    sys.exit(main())
