"""A tour of the workflow runtime, offline, on the embedded SQLite storage.

Run it with ``python examples/quickstart.py``. It builds a small order-triage workflow
(then, parallel, map, branch, foreach, dountil), runs it while streaming events,
suspends for a human approval, and resumes the run from a fresh ``get_run`` — the
same thing a new process would do.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
from pydantic import BaseModel

from procflow import StepContext, create_workflow, step
from procflow.storage import SQLiteStorage


class Order(BaseModel):
    id: str
    items: list[str]
    total: float


class Priced(BaseModel):
    id: str
    items: list[str]
    total: float
    tax: float


@step(id="price", input_schema=Order, output_schema=Priced)
async def price(ctx: StepContext) -> Priced:
    order: Order = ctx.input_data
    return Priced(**order.model_dump(), tax=round(order.total * 0.2, 2))


@step(id="fraud-score")
async def fraud_score(ctx: StepContext) -> float:
    return 0.9 if ctx.input_data.total > 1000 else 0.1


@step(id="stock-check")
async def stock_check(ctx: StepContext) -> list[str]:
    return list(ctx.input_data.items)


@step(id="approve", resume_schema=dict)
async def approve(ctx: StepContext) -> str:
    if ctx.resume_data is None:
        await ctx.suspend({"reason": "large order needs a human", "score": ctx.input_data})
    return "approved" if ctx.resume_data.get("ok") else "rejected"


@step(id="auto-approve")
def auto_approve(ctx: StepContext) -> str:
    return "approved"


@step(id="pack")
async def pack(ctx: StepContext) -> str:
    return f"packed {ctx.input_data}"


@step(id="retry-label")
async def retry_label(ctx: StepContext) -> int:
    return int(ctx.input_data) + 1


triage = (
    create_workflow(id="order-triage", input_schema=Order)
    .then(price)
    .parallel([fraud_score, stock_check])
    .map(lambda ctx: ctx.input_data["fraud-score"])
    .branch([
        (lambda ctx: ctx.input_data >= 0.5, approve),
        (lambda ctx: ctx.input_data < 0.5, auto_approve),
    ])
    .map(lambda ctx: ctx.get_step_result("stock-check"))
    .foreach(pack, concurrency=4)
    .map(lambda ctx: len(ctx.input_data))
    .dountil(retry_label, lambda ctx: ctx.input_data >= 3)
    .commit()
)


async def main(db: Path) -> int:
    storage = SQLiteStorage(db)
    try:
        order = {"id": "A-1", "items": ["lamp", "desk"], "total": 1200.0}
        run = triage.create_run(storage=storage)
        async with run.stream(input_data=order) as events:
            async for event in events:
                if event.type in ("step-result", "step-suspended", "step-skipped"):
                    print(f"  {event.type:<15} {event.step_id}")
        assert events.result is not None
        print(f"run {run.run_id}: {events.result.status} at "
              f"{', '.join(events.result.suspended_at)}")

        again = await triage.get_run(run.run_id, storage=storage)  # as a new process would
        result = await again.resume(step="approve", resume_data={"ok": True})
        print(f"resumed: {result.status}, result={result.result}, "
              f"approve={result.steps['approve'].output!r}")
        return 0 if result.status == "success" else 1
    finally:
        await storage.aclose()


if __name__ == "__main__":
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".procflow/procflow.db")
    sys.exit(anyio.run(main, path))
