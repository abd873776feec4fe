"""A fixed workload whose instruction count compares two versions on a loaded machine.

``valgrind --tool=callgrind python benchmarks/fixed_workload.py runtime|agent|agent5``:
"runtime" runs 5 chains of 200 steps, 200 runs of 10 steps, 5 fan-outs of 100 and a
foreach over 1,000 items (``InMemoryStorage``); "agent" makes 100 ``generate`` calls of
18 streamed words (``ScriptedModel``), traced; "agent5" the same with 5 processors of
5 hooks each (those of ``benchmarks/agent.py``). Subtract the count of a script doing only the
imports to get the workload's own. Wall-clock time is never measured here.

``... fixed_workload.py MODE N`` first warms up (one run of each workflow, or one
``generate``), then runs the workload N times: the count of N=1 minus that of N=0 is
the workload alone, with one-time costs (lazy imports, first calls) on neither side.
After the warm-up the objects made so far are frozen out of the garbage collector
(``gc.freeze``): otherwise a full collection, walking every object the imports made,
lands inside the workload or not by chance, and moves a count by a million or more.
Run with ``PYTHONHASHSEED=0`` for repeatable counts. The script ends with ``os._exit``:
the interpreter's exit (freeing every stored run at once, its last collections) is
not part of any call, and would weigh on N=1 and not on N=0.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import Any

import anyio

from procflow import StepContext, Workflow, create_step, create_workflow
from procflow.storage import InMemoryStorage


async def inc(ctx: StepContext[int]) -> int:
    return ctx.input_data + 1


def build() -> tuple[Workflow, ...]:
    chain = create_workflow(id="chain")
    for i in range(200):
        chain = chain.then(create_step(id=f"s{i}", execute=inc))
    small = create_workflow(id="small")
    for i in range(10):
        small = small.then(create_step(id=f"s{i}", execute=inc))
    fan = create_workflow(id="fan").parallel(
        [create_step(id=f"p{i}", execute=inc) for i in range(100)])
    each = create_workflow(id="each").foreach(create_step(id="one", execute=inc), concurrency=8)
    return chain.commit(), small.commit(), fan.commit(), each.commit()


async def main() -> Any:
    storage = InMemoryStorage()
    chain, small, fan, each = build()
    mode = sys.argv[1]
    warm = len(sys.argv) > 2
    rounds = int(sys.argv[2]) if warm else 1
    if mode == "imports":  # the count to subtract: imports and set-up only
        from procflow import Agent
        from procflow.models import ScriptedModel
        return
    if mode == "runtime":
        if warm:
            for wf in (chain, small, fan):
                await wf.create_run(storage=storage).start(0)
            await each.create_run(storage=storage).start([0, 1])
        _freeze()
        for _ in range(rounds):
            for _ in range(5):
                await chain.create_run(storage=storage).start(0)
            for _ in range(200):
                await small.create_run(storage=storage).start(0)
            for _ in range(5):
                await fan.create_run(storage=storage).start(0)
            await each.create_run(storage=storage).start(list(range(1000)))
    else:
        from procflow import Agent, set_default_storage
        from procflow.models import ScriptedModel
        words = " ".join(f"w{i}" for i in range(18))
        procs = [_noop(f"noop-{i}") for i in range(5 if mode == "agent5" else 0)]
        set_default_storage(storage)  # older versions have no Agent(storage=...)
        agent = Agent(id="a", model=ScriptedModel([words] * (100 * rounds + 1)),
                      input_processors=procs, output_processors=procs)
        if warm:
            await agent.generate("warm up")
        _freeze()
        for _ in range(100 * rounds):
            await agent.generate("hello there")


def _freeze() -> None:
    """Leave what the imports and the warm-up made out of later collections."""
    gc.collect()
    gc.freeze()


def _noop(id: str) -> Any:
    """A processor with the five hooks of ``benchmarks/agent.py``'s, doing nothing."""
    from agent import Noop  # benchmarks/agent.py, beside this script

    return Noop(id)


if __name__ == "__main__":
    anyio.run(main)
    sys.stdout.flush()
    os._exit(0)
