"""An agent call on durable storage beside a workflow run of the same shape.

Run: ``python benchmarks/agent_durable.py [--quick] [--store sqlite|redis]``. Issue 10
asks that an agent run on durable storage cost what a workflow run of the same number
of steps costs. Both sides run traced on the same kind of store (a fresh SQLite file,
or a Redis database with its own key prefix) and print µs per call:

- ``agent.generate``: one model step (``ScriptedModel``, 18 streamed words) with the 5
  processors of ``benchmarks/agent.py``: 7 stored step results (the two processor
  stages, the loop and the four steps of its iteration, one of them skipped);
- a workflow of that shape: a step, a ``dountil`` of a nested workflow of three steps
  and a ``when`` whose condition fails (skipped), then a step; 7 stored step
  results too, each passing on a value of the size of the agent's state (the prompt,
  the answer and a usage dict);
- the same two on ``InMemoryStorage``, to show what the store itself adds.

The ratio agent / workflow is printed per store. Rounds alternate between the cases and
the best of each is kept, so a slow spell of the machine hits both alike.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from agent import ANSWER, Noop, Repeating

from procflow import StepContext, create_step, create_workflow
from procflow.agent import Agent
from procflow.storage import InMemoryStorage, SQLiteStorage
from procflow.storage.base import Storage
from procflow.workflows.workflow import Workflow

Call = Callable[[], Awaitable[Any]]


async def _pass(ctx: StepContext[dict[str, Any]]) -> dict[str, Any]:
    data = dict(ctx.input_data)
    data["steps"] = data.get("steps", 0) + 1
    return data


def same_shape(storage: Storage) -> Workflow:
    """Seven step results: step, dountil(step, step, step, skipped when), step."""
    inner = (create_workflow(id="iteration")
             .then(create_step(id="before", execute=_pass))
             .then(create_step(id="call", execute=_pass))
             .then(create_step(id="after", execute=_pass))
             .when(lambda ctx: False, create_step(id="tools", execute=_pass))
             .commit())
    wf = (create_workflow(id="same-shape")
          .then(create_step(id="first", execute=_pass))
          .dountil(inner, lambda ctx: True)
          .then(create_step(id="last", execute=_pass))
          .commit())
    wf.storage = storage
    return wf


def state_value() -> dict[str, Any]:
    """A value of the size of the agent's state after its one step."""
    return {"messages": [{"role": "user", "content": "hi"},
                         {"role": "assistant", "content": ANSWER.strip()}],
            "usage": {"input_tokens": 1, "output_tokens": 18, "total_tokens": 19},
            "finish_reason": "stop"}


def cases(storage: Storage) -> tuple[Call, Call]:
    procs = [Noop(f"noop-{i}") for i in range(5)]
    agent = Agent(id="bench", model=Repeating(), input_processors=procs,
                  output_processors=procs, storage=storage)
    wf = same_shape(storage)
    value = state_value()

    async def agent_call() -> None:
        await agent.generate("hi")

    async def workflow_run() -> None:
        result = await wf.create_run().start(value)
        if result.status != "success":
            raise RuntimeError(f"the same-shape workflow ended {result.status}")

    return agent_call, workflow_run


def open_store(kind: str, directory: Path) -> Storage:
    if kind == "sqlite":
        return SQLiteStorage(directory / "runs.db")
    if kind == "redis":
        from procflow.storage import RedisStorage
        url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
        return RedisStorage(url, prefix=f"bench-{uuid.uuid4().hex[:8]}:")
    return InMemoryStorage()


async def main(quick: bool, kind: str) -> None:
    n, repeats = (50, 3) if quick else (200, 7)
    with tempfile.TemporaryDirectory() as tmp:
        durable = open_store(kind, Path(tmp))
        memory = InMemoryStorage()
        named: dict[str, Call] = {}
        for label, store in ((kind, durable), ("memory", memory)):
            agent_call, workflow_run = cases(store)
            named[f"{label}: agent.generate, 5 processors"] = agent_call
            named[f"{label}: workflow of the same shape"] = workflow_run
        for call in named.values():  # warm up: tables made, first calls done
            for _ in range(5):
                await call()
        best = {name: float("inf") for name in named}
        for _ in range(repeats):
            for name, call in named.items():
                start = time.perf_counter()
                for _ in range(n):
                    await call()
                best[name] = min(best[name], (time.perf_counter() - start) / n * 1e6)
        await durable.aclose()
    print(f"agent run vs workflow run of the same shape (traced; best of {repeats} "
          f"rounds of {n}; µs per call)")
    for name, us in best.items():
        print(f"  {name:<48}{us:>10.1f}")
    for label in (kind, "memory"):
        ratio = (best[f"{label}: agent.generate, 5 processors"]
                 / best[f"{label}: workflow of the same shape"])
        extra = (best[f"{label}: agent.generate, 5 processors"]
                 - best[f"{label}: workflow of the same shape"])
        print(f"  {label}: agent / workflow {ratio:.2f} (the agent's own work: "
              f"{extra:+.1f} µs)")
    store_agent = best[f"{kind}: agent.generate, 5 processors"] - best[
        "memory: agent.generate, 5 processors"]
    store_wf = best[f"{kind}: workflow of the same shape"] - best[
        "memory: workflow of the same shape"]
    print(f"  what {kind} adds: to the agent call {store_agent:.1f} µs, to the workflow "
          f"run {store_wf:.1f} µs (ratio {store_agent / store_wf:.2f})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--store", choices=["sqlite", "redis"], default="sqlite")
    args = parser.parse_args()
    anyio.run(main, args.quick, args.store)
