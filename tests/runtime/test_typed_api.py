"""Issue 14's runtime points: bare ``@step``, ``start_sync``, usage summed over a run
(nested workflows and agents used as steps included), unpredictable run ids, and the
``procflow.runtime`` log."""

from __future__ import annotations

import logging
import os
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from procflow import (
    Agent,
    StepContext,
    Usage,
    WorkflowDefinitionError,
    create_step,
    create_workflow,
    step,
)
from procflow.messages import new_id, new_secret_id
from procflow.models import ScriptedModel
from procflow.storage import InMemoryStorage


class Num(BaseModel):
    value: int


@step
async def bare(ctx: StepContext) -> Any:
    return ctx.input_data


@step()
def called(ctx: StepContext) -> Any:
    return ctx.input_data


def test_bare_and_called_step_take_the_function_name() -> None:
    assert (bare.id, called.id) == ("bare", "called")


def test_step_refuses_a_positional_id() -> None:
    with pytest.raises(WorkflowDefinitionError, match=r"@step takes the function to decorate"):
        step("double")  # type: ignore[call-overload]


async def test_bare_steps_run() -> None:
    wf = create_workflow(id="bare-wf").then(bare).then(called).commit()
    assert (await wf.create_run().start(3)).result == 3


def test_start_sync_runs_the_workflow() -> None:
    @step(input_schema=Num, output_schema=Num)
    def inc(ctx: StepContext[Num]) -> Num:
        return Num(value=ctx.input_data.value + 1)

    wf = create_workflow(id="sync-wf", input_schema=Num, output_schema=Num).then(inc).commit()
    result = wf.create_run().start_sync({"value": 1})
    assert (result.status, result.result) == ("success", Num(value=2))


async def test_start_sync_inside_a_running_loop_names_the_async_method() -> None:
    wf = create_workflow(id="sync-wf").then(bare).commit()
    with pytest.raises(RuntimeError, match=r"Run.start_sync\(\) cannot be called inside a "
                                           r"running event loop; use 'await run.start"):
        wf.create_run().start_sync(1)


async def test_generate_sync_inside_a_running_loop_names_the_async_method() -> None:
    agent = Agent(id="a", model=ScriptedModel(["hi"]))
    with pytest.raises(RuntimeError, match=r"await agent.generate\(...\)"):
        agent.generate_sync("x")


def test_generate_sync_answers_and_checks_options() -> None:
    agent = Agent(id="a", model=ScriptedModel(["hello world"]))
    assert agent.generate_sync("x", max_steps=1).text == "hello world"
    with pytest.raises(TypeError, match=r"generate_sync\(\) got an unexpected option 'maxsteps'"):
        agent.generate_sync("x", maxsteps=1)  # type: ignore[call-arg]


# -- usage ----------------------------------------------------------------------------


def test_usage_adds_and_round_trips() -> None:
    a = Usage.from_dict({"input_tokens": 3, "output_tokens": 4})
    assert a.total_tokens == 7
    b = a + Usage(1, 1, 2, reasoning_tokens=1)
    assert b.to_dict() == {"input_tokens": 4, "output_tokens": 5, "total_tokens": 9,
                           "reasoning_tokens": 1}
    assert Usage.from_dict(b.to_dict()) == b
    with pytest.raises(ValueError, match="input_tokens must be a non-negative whole number"):
        Usage.from_dict({"input_tokens": -1})


_counts = st.integers(min_value=0, max_value=10**12)
_usages = st.builds(lambda i, o, r, c: Usage(i, o, i + o, r, c),
                    _counts, _counts, _counts, _counts)


@settings(max_examples=50, deadline=None)
@given(_usages, _usages, _usages)
def test_usage_sums_in_any_order_and_survives_its_dict(a: Usage, b: Usage, c: Usage) -> None:
    assert (a + b) + c == a + (b + c) == c + (b + a)
    assert Usage.from_dict((a + b).to_dict()) == a + b


async def test_a_run_without_model_calls_has_no_usage() -> None:
    result = await create_workflow(id="plain").then(bare).commit().create_run().start(1)
    assert result.usage is None


async def test_usage_sums_agents_and_nested_workflows_and_shows_per_step() -> None:
    storage = InMemoryStorage()
    # ScriptedModel counts one input token per prompt word and one output token a word.
    first = Agent(id="first", model=ScriptedModel(["one two three"]))
    second = Agent(id="second", model=ScriptedModel(["four five"]))

    @step
    async def reports(ctx: StepContext) -> Any:
        ctx.add_usage({"input_tokens": 10, "output_tokens": 1})
        ctx.add_usage(Usage(input_tokens=5, output_tokens=0, total_tokens=5))
        return ctx.input_data

    inner = create_workflow(id="inner").then(second).commit()
    wf = (create_workflow(id="outer", storage=storage)
          .then(first).map(lambda ctx: ctx.input_data["text"]).then(inner).then(reports)
          .commit())
    run = wf.create_run()
    result = await run.start("hi")
    assert result.status == "success"
    alone = [(await Agent(id=a.id, model=ScriptedModel([t])).generate(p)).usage
             for a, t, p in ((first, "one two three", "hi"), (second, "four five",
                                                             "one two three"))]
    expected = alone[0] + alone[1] + Usage(input_tokens=15, output_tokens=1, total_tokens=16)
    assert result.usage == expected
    trace = await storage.load_trace(run.run_id)
    assert trace is not None
    by_path = {s["path"]: s["attributes"].get("usage") for s in trace.spans if s["path"]}
    assert by_path["agent:first"] == alone[0].to_dict()
    assert by_path["inner.agent:second"] == alone[1].to_dict()
    assert by_path["reports"] == {"input_tokens": 15, "output_tokens": 1, "total_tokens": 16}
    run_span = next(s for s in trace.spans if s["kind"] == "run")
    assert run_span["attributes"]["usage"] == expected.to_dict()


async def test_an_agent_loop_run_reports_its_usage_on_the_llm_call_step() -> None:
    storage = InMemoryStorage()
    agent = Agent(id="a", model=ScriptedModel(["alpha beta"]), storage=storage)
    out = await agent.generate("hello")
    trace = await storage.load_trace(out.run_id)
    assert trace is not None
    steps = [s for s in trace.spans if s["kind"] == "step" and s["attributes"].get("usage")]
    assert [s["attributes"]["usage"] for s in steps] == [out.usage.to_dict()]


# -- ids and logging ----------------------------------------------------------------


def test_run_ids_are_unpredictable_hex() -> None:
    wf = create_workflow(id="ids").then(bare).commit()
    ids = {wf.create_run().run_id for _ in range(200)}
    assert len(ids) == 200
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    assert re.fullmatch(r"[0-9a-f]{32}", new_secret_id())
    assert re.fullmatch(r"[0-9a-f]{32}", new_id())


async def test_the_normal_path_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="procflow")
    wf = create_workflow(id="quiet").then(bare).then(called).commit()
    await wf.create_run().start(1)
    assert [r for r in caplog.records if r.name.startswith("procflow.runtime")] == []


async def test_retries_failures_suspends_and_resumes_are_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="procflow.runtime")
    attempts = 0

    async def flaky(ctx: StepContext) -> Any:
        nonlocal attempts
        attempts += 1
        raise ValueError(f"boom {attempts}")

    async def wait(ctx: StepContext) -> Any:
        if ctx.resume_data is None:
            await ctx.suspend({"why": "approval"})
        return ctx.resume_data

    failing = create_workflow(id="logs", retries=1, retry_delay=0).then(
        create_step(id="flaky", execute=flaky)).commit()
    run = failing.create_run()
    await run.start(None)
    inner = create_workflow(id="inner").then(create_step(id="wait", execute=wait)).commit()
    pausing = create_workflow(id="pausing", storage=InMemoryStorage()).then(inner).commit()
    paused = pausing.create_run()
    await paused.start(None)
    await paused.resume(resume_data="ok")
    got = [(r.levelname, r.step_path, r.run_id, r.getMessage()) for r in caplog.records
           if r.name == "procflow.runtime"]
    assert [g[:3] for g in got] == [
        ("INFO", "flaky", run.run_id), ("WARNING", "flaky", run.run_id),
        ("INFO", "inner.wait", paused.run_id), ("INFO", "inner.wait", paused.run_id)]
    assert "failed on attempt 1 of 2, retrying" in got[0][3]
    assert "boom 1" in got[0][3]
    # the failure is said once, naming the workflow and the step once
    assert got[1][3] == (f"run {run.run_id}: workflow 'logs', step 'flaky' failed after 2 "
                         "attempts: ValueError: boom 2")
    assert got[2][3].endswith("step inner.wait suspended")
    assert "resuming step inner.wait" in got[3][3]


async def test_runs_with_retries_configured_log_nothing_when_they_succeed(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="procflow.runtime")
    wf = create_workflow(id="ok", retries=2, retry_delay=0).then(bare).commit()
    for _ in range(3):
        await wf.create_run().start(1)
    assert caplog.records == []


def test_secret_ids_never_repeat_across_pool_refills_and_forks() -> None:
    ids = [new_secret_id() for _ in range(1000)]  # several 4 KiB refills
    assert len(set(ids)) == 1000
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child must not hand out the bytes its parent already read
        os.write(write, "".join(new_secret_id() for _ in range(50)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    child = {text[i:i + 32] for i in range(0, len(text), 32)}
    parent = {new_secret_id() for _ in range(50)}
    assert len(child) == 50 and not child & parent and not child & set(ids)
