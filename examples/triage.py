"""Agents together: a triage agent hands the user to billing or support; billing asks
a research agent (an agent used as a tool). Offline: the models are functions.

Run it with ``python examples/triage.py [runs.db]``: two users are routed, each answered
by the agent they were handed to; the runs are stored in ``runs.db`` (default
``triage.db``), so ``procflow --db triage.db trace <run id>`` shows billing's run with
the research agent's run nested under its tool call.

``procflow graph examples/triage.py:triage`` draws the triage agent with its handoff
tools (``transfer_to_billing``, ``transfer_to_support``).
"""

from __future__ import annotations

import sys
from typing import Any

import anyio

from procflow.agent import Agent, handoff, tool
from procflow.models import FunctionModel, ToolCall
from procflow.storage import SQLiteStorage

storage = SQLiteStorage(sys.argv[1] if len(sys.argv) > 1 else "triage.db")

CHARGES = {"A-1001": ["2026-11-02  €12.00  Pro plan", "2026-11-02  €12.00  Pro plan"]}


def last_user_text(request: Any) -> str:
    """The text of the last user message of a model request."""
    for message in reversed(request.prompt):
        if message["role"] == "user":
            content = message["content"]
            return content if isinstance(content, str) else " ".join(
                part.get("text", "") for part in content)
    return ""


def tool_results(request: Any) -> list[Any]:
    """The results of the tool calls in a model request."""
    return [part["result"] for m in request.prompt if m["role"] == "tool"
            for part in m["content"]]


@tool
async def list_charges(account: str) -> list[str]:
    """The charges on an account (like A-1001), one line each."""
    return CHARGES.get(account.strip().upper(), [])


def research_model(request: Any) -> Any:
    # first the charges, then the finding
    results = tool_results(request)
    if not results:
        return [ToolCall("list_charges", {"account": "A-1001"})]
    charges = results[-1]
    return (f"Account A-1001 was charged {len(charges)} times on 2026-11-02 for the "
            "same Pro plan: a duplicate.")


research = Agent(id="research", instructions="You look up facts in the account records.",
                 description="Looks up an account's charges and reports what it finds.",
                 model=FunctionModel(research_model), tools=[list_charges], storage=storage)


def billing_model(request: Any) -> Any:
    # ask the research agent, then answer with what it found
    results = tool_results(request)
    if not any("duplicate" in str(r) for r in results):
        return [ToolCall("research", {"prompt": "Check the charges of account A-1001."})]
    return "You were charged twice for the Pro plan on 2026-11-02; I refunded €12.00."


billing = Agent(id="billing", instructions="You handle invoices, charges and refunds.",
                description="Invoices, charges and refunds.",
                model=FunctionModel(billing_model), tools=[research.as_tool()],
                storage=storage)

support = Agent(id="support", instructions="You fix technical problems.",
                description="Technical problems with the product.",
                model=FunctionModel(lambda request: "Restart the router, then wait a "
                                                    "minute before you connect again."),
                storage=storage)


def triage_model(request: Any) -> Any:
    # route on a keyword; a real model reads the tools' descriptions
    text = last_user_text(request).lower()
    target = "billing" if "charge" in text or "invoice" in text else "support"
    return [ToolCall(f"transfer_to_{target}", {})]


triage = Agent(id="triage", instructions="Route the user to the right agent.",
               model=FunctionModel(triage_model), storage=storage,
               handoffs=[billing, handoff(support)])


async def main() -> None:
    for question in ("Why was I charged twice this month?", "My router keeps dropping."):
        out = await triage.generate(question)
        print(f"user: {question}")
        print(f"{out.agent_id}: {out.text}")
        print(f"  (run {out.run_id} of agent:{out.agent_id}, {out.usage.total_tokens} "
              "tokens)")
    await storage.aclose()


if __name__ == "__main__":
    anyio.run(main)
