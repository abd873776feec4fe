"""Control flow: a catalogue of graph shapes, then each construct's own rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from procflow import (
    StepContext,
    StepExecutionError,
    StepValidationError,
    Workflow,
    WorkflowDefinitionError,
)
from procflow import create_step as cs
from procflow import create_workflow as cw


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def add(id: str, n: int) -> Any:
    return cs(id=id, execute=lambda ctx: ctx.input_data + n)


def fail(id: str) -> Any:
    def boom(ctx: StepContext) -> None:
        raise RuntimeError(f"{id} broke")
    return cs(id=id, execute=boom)


def _inner() -> Workflow:
    return cw(id="inner").then(add("i1", 1)).then(add("i2", 2)).commit()


SHAPES = [
    pytest.param(lambda: cw(id="linear").then(add("a", 1)).then(add("b", 2)), 0, "success", 3,
                 id="linear"),
    pytest.param(lambda: cw(id="diamond").then(add("a", 1)).parallel([add("b", 1), add("c", 2)])
                 .map(lambda ctx: ctx.input_data["b"] + ctx.input_data["c"]).then(add("d", 0)),
                 0, "success", 5, id="diamond"),
    pytest.param(lambda: cw(id="fan").parallel([add(f"p{i}", i) for i in range(10)])
                 .map(lambda ctx: sum(ctx.input_data.values())), 0, "success", 45,
                 id="fan-out-fan-in"),
    pytest.param(lambda: cw(id="loop").dountil(add("inc", 1), lambda ctx: ctx.input_data >= 5),
                 0, "success", 5, id="loop-with-exit"),
    pytest.param(lambda: cw(id="nested").then(add("a", 1)).then(_inner()), 0, "success", 4,
                 id="nested"),
    pytest.param(lambda: cw(id="failing").parallel([add("ok", 1), fail("bad")]), 0, "failed",
                 None, id="failing-branch"),
    pytest.param(lambda: cw(id="each").map(lambda ctx: list(range(ctx.input_data)))
                 .foreach(add("f", 1), concurrency=3), 4, "success", [1, 2, 3, 4],
                 id="foreach"),
]


@pytest.mark.parametrize(("build", "given", "status", "expected"), SHAPES)
async def test_shape_catalogue(build: Any, given: Any, status: str, expected: Any) -> None:
    result = await build().commit().create_run().start(input_data=given)
    assert result.status == status
    assert result.result == expected


async def test_parallel_failure_keeps_sibling_results() -> None:
    result = await cw(id="w").parallel([add("ok", 1), fail("bad")]).commit().create_run().start(
        input_data=1)
    assert result.steps["ok"].output == 2
    assert result.steps["bad"].status == "failed"
    assert isinstance(result.error, StepExecutionError) and result.error.step_id == "bad"


async def test_parallel_runs_concurrently() -> None:
    order: list[str] = []

    async def slow(ctx: StepContext) -> str:
        order.append("slow-start")
        await anyio.sleep(0.05)
        order.append("slow-end")
        return "slow"

    async def fast(ctx: StepContext) -> str:
        order.append("fast")
        return "fast"

    wf = cw(id="w").parallel([cs(id="slow", execute=slow), cs(id="fast", execute=fast)]).commit()
    result = await wf.create_run().start()
    assert result.result == {"slow": "slow", "fast": "fast"}
    assert order.index("fast") < order.index("slow-end")


async def test_parallel_state_merges_in_declaration_order() -> None:
    async def writer(key: str, value: str, delay: float) -> Any:
        async def run(ctx: StepContext) -> None:
            await anyio.sleep(delay)
            ctx.state[key] = value
            ctx.state["last"] = value
        return run

    first = cs(id="first", execute=await writer("a", "first", 0.03))
    second = cs(id="second", execute=await writer("b", "second", 0.0))
    wf = cw(id="w").parallel([first, second]).commit()
    result = await wf.create_run().start(initial_state={"keep": 1})
    # "second" finishes first, yet declaration order decides: later branch wins per key.
    assert result.state == {"keep": 1, "a": "first", "b": "second", "last": "second"}


async def test_branch_runs_every_true_condition_and_skips_others() -> None:
    wf = cw(id="w").branch([
        (lambda ctx: ctx.input_data > 0, add("pos", 1)),
        (lambda ctx: ctx.input_data > 5, add("big", 2)),
        (lambda ctx: ctx.input_data < 0, add("neg", 3)),
    ]).commit()
    result = await wf.create_run().start(input_data=10)
    assert result.result == {"pos": 11, "big": 12}
    assert result.steps["neg"].status == "skipped"


async def test_branch_with_async_condition_and_none_true() -> None:
    async def never(ctx: StepContext) -> bool:
        return False

    after = cs(id="after", execute=lambda c: c.input_data)
    wf = cw(id="w").branch([(never, add("x", 1))]).then(after).commit()
    result = await wf.create_run().start(input_data=1)
    assert result.steps["x"].status == "skipped"
    assert result.result == {}


async def test_branch_condition_error_names_the_step() -> None:
    wf = cw(id="w").branch([(lambda ctx: 1 / 0, add("x", 1))]).commit()
    result = await wf.create_run().start(input_data=1)
    assert result.status == "failed"
    assert "branch condition of step 'x' raised ZeroDivisionError" in str(result.error)


async def test_when_runs_its_step_or_passes_the_data_on() -> None:
    async def small(ctx: StepContext) -> bool:
        return bool(ctx.input_data < 5)

    wf = (cw(id="w").when(lambda ctx: ctx.input_data > 3, add("big", 100))
          .when(small, add("small", 1000)).then(add("last", 1)).commit())
    ran = await wf.create_run().start(input_data=4)  # big ran (104), then small is skipped
    assert ran.result == 105
    assert ran.steps["big"].output == 104 and ran.steps["small"].status == "skipped"
    skipped = await wf.create_run().start(input_data=1)
    assert skipped.result == 1002  # big skipped: 1 passes on unchanged
    assert skipped.steps["big"].status == "skipped" and skipped.steps["small"].output == 1001


async def test_when_streams_a_skipped_event_and_runs_nested_workflows() -> None:
    wf = (cw(id="w").when(lambda ctx: False, add("no", 1))
          .when(lambda ctx: True, _inner()).commit())
    run = wf.create_run()
    seen = []
    async with run.stream(input_data=1) as events:
        async for event in events:
            seen.append((event.type, event.step_id))
    assert ("step-skipped", "no") in seen and ("step-result", "inner.i2") in seen
    assert (await run.result()).result == 4


async def test_when_condition_error_names_the_step() -> None:
    async def broken(ctx: StepContext) -> bool:
        raise KeyError("flag")

    for condition in (lambda ctx: 1 / 0, broken):
        wf = cw(id="w").when(condition, add("x", 1)).commit()
        result = await wf.create_run().start(input_data=1)
        assert result.status == "failed"
        assert "branch condition of step 'x' raised" in str(result.error)
        assert result.steps["x"].status == "failed"


def test_when_rejects_bad_arguments_by_name() -> None:
    with pytest.raises(WorkflowDefinitionError, match="when\\(\\) takes a callable condition"):
        cw(id="w").when(add("a", 1), add("b", 1))  # type: ignore[arg-type]
    with pytest.raises(WorkflowDefinitionError, match="when\\(\\) label= takes a string"):
        cw(id="w").when(lambda ctx: True, add("b", 1), label=["x"])  # type: ignore[arg-type]
    with pytest.raises(WorkflowDefinitionError, match="when\\(\\) takes steps"):
        cw(id="w").when(lambda ctx: True, 3)  # type: ignore[arg-type]
    with pytest.raises(WorkflowDefinitionError, match="'a'"):
        cw(id="w").then(add("a", 1)).when(lambda ctx: True, add("a", 2)).commit()


async def test_map_is_not_a_step_result_and_can_be_async() -> None:
    async def reshape(ctx: StepContext) -> int:
        return ctx.input_data * 3

    wf = cw(id="w").then(add("a", 1)).map(reshape).then(add("b", 0)).commit()
    result = await wf.create_run().start(input_data=1)
    assert result.result == 6
    assert set(result.steps) == {"a", "b"}


async def test_foreach_keeps_order_and_respects_concurrency() -> None:
    running = 0
    peak = 0

    async def work(ctx: StepContext) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await anyio.sleep(0.01 * (5 - ctx.input_data % 5))
        running -= 1
        return int(ctx.input_data) * 10

    wf = cw(id="w").foreach(cs(id="work", execute=work), concurrency=3).commit()
    result = await wf.create_run().start(input_data=list(range(10)))
    assert result.result == [i * 10 for i in range(10)]
    assert peak == 3


async def test_foreach_items_share_no_mutable_context() -> None:
    async def item(ctx: StepContext) -> Any:
        mine = ctx.state.setdefault("items", [])
        mine.append(ctx.input_data)
        await anyio.lowlevel.checkpoint()
        return list(mine)

    wf = cw(id="w").foreach(cs(id="item", execute=item), concurrency=4).commit()
    result = await wf.create_run().start(input_data=[1, 2, 3, 4])
    assert result.result == [[1], [2], [3], [4]]


async def test_foreach_over_non_list_is_a_clear_error() -> None:
    wf = cw(id="w").foreach(add("each", 1)).commit()
    result = await wf.create_run().start(input_data={"not": "a list"})
    assert result.status == "failed"
    assert isinstance(result.error, StepValidationError)
    assert "foreach step 'each' needs a list as input, got dict" in str(result.error)


async def test_foreach_stops_on_first_failure() -> None:
    def maybe(ctx: StepContext) -> int:
        if ctx.input_data == 2:
            raise ValueError("two")
        return int(ctx.input_data)

    wf = cw(id="w").foreach(cs(id="maybe", execute=maybe)).commit()
    result = await wf.create_run().start(input_data=[1, 2, 3])
    assert result.status == "failed"
    assert result.steps["maybe"].partial == {0: 1}
    assert "step 'maybe[1]' failed" in str(result.error)


async def test_dowhile_and_dountil_iteration_counts() -> None:
    seen: list[int] = []

    def cond(ctx: StepContext) -> bool:
        seen.append(ctx.iteration_count)
        return bool(ctx.input_data < 3)

    wf = cw(id="w").dowhile(add("inc", 1), cond).commit()
    result = await wf.create_run().start(input_data=0)
    assert result.result == 3 and seen == [1, 2, 3]
    assert result.steps["inc"].iterations == 3
    # dountil runs the body at least once even when the condition already holds
    until = cw(id="u").dountil(add("inc", 1), lambda ctx: True).commit()
    assert (await until.create_run().start(input_data=10)).result == 11


async def test_loop_max_iterations() -> None:
    wf = cw(id="w").dowhile(add("inc", 1), lambda ctx: True, max_iterations=4).commit()
    result = await wf.create_run().start(input_data=0)
    assert result.status == "failed" and "max_iterations=4" in str(result.error)


async def test_sleep_and_sleep_until_pass_data_through() -> None:
    soon = datetime.now(UTC) + timedelta(milliseconds=20)
    wf = (cw(id="w").sleep(0.01).sleep(lambda ctx: 0.0).sleep_until(soon)
          .sleep_until(lambda ctx: datetime(2000, 1, 1)).then(add("a", 1)).commit())
    result = await wf.create_run().start(input_data=1)
    assert result.result == 2
    assert datetime.now(UTC) >= soon


async def test_nested_workflow_results_are_prefixed_and_validated() -> None:
    result = await cw(id="outer").then(_inner()).commit().create_run().start(input_data=0)
    assert result.result == 3
    assert result.steps["inner.i1"].output == 1
    assert result.steps["inner"].output == 3
