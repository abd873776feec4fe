"""What ``mypy --strict`` infers for the public API (checked by ``.ci/run`` and executed by
``tests/typing/test_check_api.py``). Each ``assert_type`` pins one inference; the lines
marked ``type: ignore[...]`` must stay errors (``warn_unused_ignores`` under ``--strict``
fails the check when they stop being errors)."""

from __future__ import annotations

from typing import Any, assert_type

from pydantic import BaseModel

from procflow import (
    Agent,
    Run,
    Step,
    StepContext,
    Usage,
    Workflow,
    WorkflowResult,
    create_step,
    create_workflow,
    step,
)
from procflow.agent import FullOutput
from procflow.models import ScriptedModel


class Order(BaseModel):
    amount: int


class Refund(BaseModel):
    refund: int


@step(input_schema=Order, output_schema=Refund)
async def refund(ctx: StepContext[Order]) -> Refund:
    assert_type(ctx.input_data, Order)
    return Refund(refund=5000 - ctx.input_data.amount)


@step
def untyped(ctx: StepContext) -> Any:
    return ctx.input_data


@step()
async def named_by_function(ctx: StepContext) -> Any:
    return ctx.input_data


@step(input_schema=Order, output_schema=Refund)  # type: ignore[arg-type]
async def returns_the_wrong_type(ctx: StepContext[Order]) -> int:
    return ctx.input_data.amount


@step(input_schema=Order)
async def misspelled_field(ctx: StepContext[Order]) -> object:
    return ctx.input_data.amout  # type: ignore[attr-defined]


def plain(ctx: StepContext[Order]) -> Refund:
    return Refund(refund=ctx.input_data.amount)


made = create_step(id="plain", execute=plain, input_schema=Order, output_schema=Refund)

assert_type(refund, Step[Order, Refund])
assert_type(untyped, Step[Any, Any])
assert_type(made, Step[Order, Refund])

workflow = create_workflow(id="refunds", input_schema=Order, output_schema=Refund)
assert_type(workflow, Workflow[Order, Refund])
committed = workflow.then(refund).commit()
assert_type(committed, Workflow[Order, Refund])


def run_workflow() -> Refund | None:
    run = committed.create_run()
    assert_type(run, Run[Refund])
    result = run.start_sync({"amount": 1200})
    assert_type(result, WorkflowResult[Refund])
    assert_type(result.result, Refund | None)
    assert_type(result.usage, Usage | None)
    return result.result


async def run_workflow_async() -> int:
    result = await committed.create_run().start(Order(amount=100))
    return 0 if result.result is None else result.result.refund


async def call_agent() -> str:
    agent = Agent(id="support", model=ScriptedModel(["hello"]))
    out = await agent.generate("hi", max_steps=2, memory={"thread": "t1", "resource": "u1"})
    assert_type(out, FullOutput)
    await agent.generate("hi", max_stepz=3)  # type: ignore[call-overload]
    await agent.generate("hi", max_steps="3")  # type: ignore[call-overload]
    return out.text


def call_agent_sync() -> str:
    agent = Agent(id="support", model=ScriptedModel(["hello"]))
    out = agent.generate_sync("hi", max_steps=2)
    assert_type(out, FullOutput)
    return out.text


class Answer(BaseModel):
    city: str


async def call_agent_structured() -> str:
    agent = Agent(id="geo", model=ScriptedModel(['{"city": "Paris"}']), output_type=Answer)
    assert_type(agent, Agent[Answer])
    out = await agent.generate("capital of France?")
    assert_type(out, FullOutput[Answer])
    assert_type(out.output, Answer | None)
    per_call = await agent.generate("again", output_type=Order, output_retries=2)
    assert_type(per_call.output, Order | None)
    stream = await agent.stream("capital of France?")
    assert_type(stream.partial_output, Answer | None)
    assert_type(await stream.final_output, Answer | None)
    await agent.generate("hi", output_retries="2")  # type: ignore[call-overload]
    return "" if out.output is None else out.output.city


total = Usage(input_tokens=1, output_tokens=2, total_tokens=3) + Usage.from_dict(
    {"input_tokens": 4})
assert_type(total, Usage)
