"""Targets for ``procflow mcp serve`` in the tests: workflows and an agent."""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import BaseModel

from procflow import Agent, StepContext, create_step, create_workflow
from procflow.mcp import MCPServerStdio
from procflow.models import ScriptedModel


class Number(BaseModel):
    n: int


class Doubled(BaseModel):
    doubled: int


async def times_two(ctx: StepContext) -> Doubled:
    return Doubled(doubled=ctx.input_data.n * 2)


double = (create_workflow(id="double", input_schema=Number, output_schema=Doubled,
                          description="Double a number.")
          .then(create_step(id="times-two", input_schema=Number, output_schema=Doubled,
                            execute=times_two))
          .commit())


async def wait_for_approval(ctx: StepContext) -> str:
    if ctx.resume_data is None:
        await ctx.suspend({"question": f"ship {ctx.input_data}?"})
    return "shipped"


approve = (create_workflow(id="approve", input_schema=str, output_schema=str)
           .then(create_step(id="wait", input_schema=str, output_schema=str,
                             execute=wait_for_approval))
           .commit())

helper = Agent(id="helper", model=ScriptedModel(["hello from the agent"]),
               description="A helpful agent.")

with_mcp = Agent(id="with-mcp", model=ScriptedModel(["hi"]), tools=[MCPServerStdio(
    sys.executable, args=[str(Path(__file__).parent.parent / "servers" / "basic.py")])])
