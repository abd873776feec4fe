"""The executor opens and closes step spans and builds step paths inline (a call saved
on every step: about 3 % of a 200-step chain). These tests pin each inline form to the
definition it stands for (``Tracer.open``, ``Tracer.ok``, ``Scope.path``), so the two
cannot drift apart."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from procflow import create_step, create_workflow
from procflow.records import Span
from procflow.runtime.execution import Scope
from procflow.runtime.tracing import ParentSpan, Tracer

pytestmark = pytest.mark.anyio


def _plus(n: int, trace_io: bool = True) -> Any:
    return create_step(id=f"plus{n}", execute=lambda ctx: ctx.input_data + n,
                       trace_io=trace_io)


@pytest.mark.parametrize("trace_io", [True, False], ids=["io", "no-io"])
async def test_step_spans_are_what_tracer_open_and_ok_make(trace_io: bool) -> None:
    inner = create_workflow(id="inner", trace_io=trace_io).then(_plus(2, trace_io)).commit()
    wf = (create_workflow(id="outer", trace_io=trace_io).then(_plus(1, trace_io))
          .then(inner).commit())
    tracer = Tracer()
    top = tracer.start("caller", "step", None)
    result = await wf.create_run(parent_span=ParentSpan(tracer, top)).start(input_data=1)
    assert result.result == 4
    spans = [s for s in tracer.spans if isinstance(s, Span)]
    by_id = {s.span_id: s for s in spans}
    steps = [s for s in spans if s.kind == "step" and s is not top]
    assert [s.path for s in steps] == ["plus1", "inner.plus2"]
    for made in steps:
        index = tracer.spans.index(made)
        ref = Tracer()
        ref.spans.extend(tracer.spans[:index])  # the same ids are taken before it
        expected = ref.open(made.name, made.kind, by_id[made.parent_id or ""], made.path,
                            made.start, made.input)
        assert (made.input is not None) is trace_io
        Tracer.ok(expected, made.output)
        assert dataclasses.replace(expected, end=made.end) == made
        assert (made.output is not None) is trace_io


async def test_step_paths_are_what_scope_path_makes() -> None:
    inner = create_workflow(id="inner").then(_plus(2)).commit()
    wf = create_workflow(id="outer").then(_plus(1)).then(inner).commit()
    run = wf.create_run()
    result = await run.start(input_data=1)
    assert result.result == 4
    scope = Scope(inner, "inner.", None, {}, None, None)
    for path in result.steps:
        if "." in path:
            made = scope.path(path.removeprefix("inner."))
            assert made is path  # the same interned string
