"""Property: random then/parallel/branch/when/foreach workflows run each step exactly as
often as they should, and every result lands under its step id."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from procflow import StepContext, create_step, create_workflow

MOD = 1_000_003

then_ = st.tuples(st.just("then"))
parallel_ = st.tuples(st.just("parallel"), st.integers(1, 4))
branch_ = st.tuples(st.just("branch"), st.lists(st.booleans(), min_size=1, max_size=4))
when_ = st.tuples(st.just("when"), st.booleans())
foreach_ = st.tuples(st.just("foreach"), st.integers(0, 5), st.integers(1, 3))
plans = st.lists(st.one_of(then_, parallel_, branch_, when_, foreach_), min_size=1,
                 max_size=8)


def f(index: int, value: int) -> int:
    return (value * 31 + index) % MOD


class Model:
    """Builds the workflow and, beside it, what running it must give."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.expected_calls: dict[str, int] = {}
        self.expected_outputs: dict[str, Any] = {}
        self.skipped: set[str] = set()
        self.n = 0

    def make(self) -> tuple[Any, int]:
        self.n += 1
        index, name = self.n, f"s{self.n}"
        self.expected_calls[name] = 0

        async def run(ctx: StepContext) -> int:
            self.calls[name] = self.calls.get(name, 0) + 1
            await anyio.lowlevel.checkpoint()
            return f(index, ctx.input_data)

        return create_step(id=name, execute=run), index

    def build(self, plan: list[tuple[Any, ...]], start: int) -> tuple[Any, int]:
        wf = create_workflow(id="random")
        value = start
        for item in plan:
            if item[0] == "then":
                step, index = self.make()
                wf.then(step)
                value = self._ran(step.id, f(index, value))
            elif item[0] == "when":
                step, index = self.make()
                wf.when(lambda ctx, on=item[1]: on, step)
                if item[1]:
                    value = self._ran(step.id, f(index, value))
                else:
                    self.skipped.add(step.id)  # and the value passes on unchanged
            elif item[0] in ("parallel", "branch"):
                flags = [True] * item[1] if item[0] == "parallel" else item[1]
                made = [self.make() for _ in flags]
                if item[0] == "parallel":
                    wf.parallel([s for s, _ in made])
                else:
                    wf.branch([(lambda ctx, on=on: on, s)
                               for (s, _), on in zip(made, flags, strict=True)])
                total = 0
                for (step, index), on in zip(made, flags, strict=True):
                    if on:
                        total += self._ran(step.id, f(index, value))
                    else:
                        self.skipped.add(step.id)
                wf.map(lambda ctx: sum(ctx.input_data.values()) % MOD)
                value = total % MOD
            else:
                _, length, concurrency = item
                step, index = self.make()
                wf.map(lambda ctx, k=length: [ctx.input_data + i for i in range(k)])
                wf.foreach(step, concurrency=concurrency)
                outs = [f(index, value + i) for i in range(length)]
                self.expected_calls[step.id] = length
                self.expected_outputs[step.id] = outs
                wf.map(lambda ctx: sum(ctx.input_data) % MOD)
                value = sum(outs) % MOD
        return wf.commit(), value

    def _ran(self, name: str, output: int) -> int:
        self.expected_calls[name] = 1
        self.expected_outputs[name] = output
        return output


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans, start=st.integers(0, 1000))
def test_random_workflows_run_each_step_exactly_once(plan: list[tuple[Any, ...]],
                                                      start: int) -> None:
    model = Model()
    wf, expected = model.build(plan, start)
    result = anyio.run(lambda: wf.create_run().start(input_data=start))
    assert result.status == "success", result.error
    assert result.result == expected
    assert {k: v for k, v in model.calls.items()} == {
        k: v for k, v in model.expected_calls.items() if v}
    for name, output in model.expected_outputs.items():
        assert result.steps[name].status == "success"
        assert result.steps[name].output == output
    for name in model.skipped:
        assert result.steps[name].status == "skipped"
    items = {p for p in result.steps if "[" in p}  # foreach items, recorded one by one
    assert set(result.steps) - items == set(model.expected_outputs) | model.skipped
    for path in items:
        each = result.steps[path.split("[", 1)[0]]
        assert result.steps[path].output == each.output[int(path.split("[")[1][:-1])]
