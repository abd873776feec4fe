"""The per-step and agent figures of issue 48's targets, warm, in one process.

Run: ``python benchmarks/targets.py [--rounds 30]``; for an A/B, run it alternately
with ``PYTHONPATH=/tmp/base`` (a ``git worktree add --detach /tmp/base HEAD`` made
before the change) and without, several times, and compare the best figures.

- chain: one 200-step chain (``.then()`` steps returning input + 1, as
  ``../shared/peer-bench/bench_procflow.py``), µs per step, warm: best of ``--rounds``
  rounds of 20 runs. The peer-bench harness times 5 single runs, cold, so its figure
  is higher (~3.5 where this gives ~2.5).
- run-1, run-10: one run of a 1-step and of a 10-step chain, µs per run; run-1 is
  mostly what a run costs beside its steps.
- agent text / tool: ``Agent.generate`` with fake models (the peer-bench agent cases):
  an 18-word text answer; a tool call then that answer. Traced, default storage (the
  in-memory fallback: run from a folder without a project database).

Wall-clock time, best of the rounds: on a shared machine the best is the figure least
hit by other processes.
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from procflow import StepContext, create_step, create_workflow
from procflow.agent import Agent, tool
from procflow.models import ModelRequest, ScriptedModel, ToolCall

ANSWER = "The quick brown fox jumps over the lazy dog " * 2


async def _inc(ctx: StepContext[Any]) -> Any:
    return ctx.input_data + 1


def chain(n: int) -> Callable[[], Awaitable[Any]]:
    wf = create_workflow(id=f"chain-{n}")
    for i in range(n):
        wf = wf.then(create_step(id=f"s{i}", execute=_inc))
    committed = wf.commit()

    async def run() -> Any:
        result = await committed.create_run().start(input_data=0)
        assert result.status == "success", result.error
        return result.result
    return run


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class Repeating:
    """A ScriptedModel that never runs out: a fresh one per call."""

    provider = "scripted"
    model_id = "repeating"

    def __init__(self, turns: list[Any]) -> None:
        self.turns = turns

    def stream(self, request: ModelRequest) -> Any:
        return ScriptedModel(list(self.turns)).stream(request)


def agents() -> tuple[Callable[[], Awaitable[Any]], Callable[[], Awaitable[Any]]]:
    text_agent = Agent(id="text", model=Repeating([ANSWER]))
    tool_agent = Agent(id="tool", model=Repeating(
        [[ToolCall(name="add", args={"a": 1, "b": 2})], ANSWER]), tools=[add])

    async def text() -> Any:
        return (await text_agent.generate("hi")).text

    async def tool_call() -> Any:
        return (await tool_agent.generate("add 1 and 2")).text
    return text, tool_call


async def main(rounds: int) -> None:
    os.environ.pop("PROCFLOW_DB", None)  # runs go to the in-memory fallback
    os.chdir(tempfile.mkdtemp(prefix="procflow-targets-"))
    text, tool_call = agents()
    # (name, call, calls per round, units per call)
    cases = [("chain, µs per step", chain(200), 20, 200), ("run-1, µs per run", chain(1), 300, 1),
             ("run-10, µs per run", chain(10), 200, 1), ("agent text, µs", text, 100, 1),
             ("agent tool, µs", tool_call, 50, 1)]
    best = {name: float("inf") for name, *_ in cases}
    for _, fn, calls, _ in cases:
        for _ in range(calls):
            await fn()
    for _ in range(rounds):  # round-robin: a slow spell hits every case alike
        for name, fn, calls, units in cases:
            gc.collect()
            start = time.perf_counter()
            for _ in range(calls):
                await fn()
            best[name] = min(best[name], (time.perf_counter() - start) / calls / units * 1e6)
    for name, figure in best.items():
        print(f"{name:22s} {figure:8.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    anyio.run(main, parser.parse_args().rounds)
