"""Targets for the README's studio walkthrough: ``procflow graph|run|runs|trace``.

Everything runs offline. From the repository root::

    procflow graph examples/studio_demo.py:onboarding
    procflow run examples/studio_demo.py:onboarding --input '{"name": "Ada", "documents": 3}'
    procflow run examples/studio_demo.py:assistant --input hello
    procflow runs

``approval`` keeps its runs in its own ``approvals.db`` (the CLI uses it too);
``long_review`` has 40 steps, taller than most terminals (``STUDIO_DEMO_DELAY``
seconds each, default 0.05).
"""

from __future__ import annotations

import os

import anyio

from procflow import Agent, StepContext, create_step, create_workflow
from procflow.models import ScriptedModel
from procflow.storage import SQLiteStorage

DELAY = float(os.environ.get("STUDIO_DEMO_DELAY", "0.05"))


def check_identity(ctx: StepContext) -> dict[str, object]:
    applicant = dict(ctx.input_data)
    return {**applicant, "verified": bool(applicant.get("name"))}


def is_verified(ctx: StepContext) -> bool:
    return bool(ctx.input_data.get("verified"))


async def review_document(ctx: StepContext) -> str:
    await anyio.sleep(DELAY)
    return f"document {ctx.input_data} reviewed"


onboarding = (
    create_workflow(id="customer-onboarding-kyc-document-review",
                    description="checks an applicant and reviews their documents")
    .then(create_step(id="check-identity", execute=check_identity))
    .branch([(is_verified, create_step(id="collect-documents",
                                       execute=lambda ctx: list(range(
                                           int(ctx.input_data.get("documents", 1)))))),
             (lambda ctx: not ctx.input_data.get("verified"),
              create_step(id="reject", execute=lambda ctx: []))])
    .map(lambda ctx: ctx.input_data.get("collect-documents") or [])
    .foreach(create_step(id="review-document", execute=review_document), concurrency=2)
    .then(create_step(id="decide", execute=lambda ctx: {"approved": len(ctx.input_data) > 0,
                                                        "reviewed": len(ctx.input_data)}))
    .commit())


async def approve(ctx: StepContext) -> dict[str, object]:
    if ctx.resume_data is None:
        await ctx.suspend({"question": f"approve a payment of {ctx.input_data}?"})
    return {"amount": ctx.input_data, "approved": bool(ctx.resume_data["ok"])}


approval = (create_workflow(id="payment-approval", storage=SQLiteStorage("approvals.db"))
            .then(create_step(id="approve", execute=approve))
            .commit())


def issue_key(ctx: StepContext) -> dict[str, str]:
    # a step that returns a secret: the studio prints it masked, as the trace stores it
    return {"user": str(ctx.input_data), "api_key": "sk-live-" + "4f9a" * 6}


keys = create_workflow(id="issue-key").then(create_step(id="issue", execute=issue_key)).commit()


def _slow(index: int) -> object:
    async def execute(ctx: StepContext) -> int:
        await anyio.sleep(DELAY)
        return int(ctx.input_data) + 1
    return create_step(id=f"step-{index:02d}", execute=execute)


long_review = create_workflow(id="long-review")
for _n in range(1, 41):
    long_review = long_review.then(_slow(_n))
long_review = long_review.commit()

assistant = Agent(id="assistant", instructions="Answer briefly.",
                  model=ScriptedModel(["Hello! How can I help you today?"] * 50))
