"""Plan entries are the one dispatch point: a new kind of entry is one new class, and
the runtime, the output stream, ``commit()``, ``wf.graph`` and the studio all handle it
unchanged."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from procflow import create_step, create_workflow
from procflow.studio import GraphView
from procflow.workflows.check import Shape
from procflow.workflows.plan import Entry, Layout, NodeLayout, Reader, ReadT


@dataclass(frozen=True, slots=True)
class Tap(Entry):
    """A made-up entry: calls ``fn(ctx)`` for its effect, passing the data through."""

    id: str
    fn: Any

    def read(self, reader: Reader[ReadT]) -> ReadT:
        fn = self.fn

        def tap(ctx: Any) -> Any:
            fn(ctx)
            return ctx.input_data
        return reader.map(self.id, tap)

    def ids(self) -> list[tuple[str, str]]:
        return [(self.id, "tap()")]

    def output_shape(self, wf: Any, shape: Shape) -> Shape:
        return shape

    def layout(self) -> Layout:
        return NodeLayout(self.id, "map", f"tap {self.id}", has_result=False)


async def test_a_new_entry_class_runs_checks_graphs_and_draws() -> None:
    seen: list[Any] = []
    double = create_step(id="double", execute=lambda ctx: ctx.input_data * 2)
    wf = create_workflow(id="tapped").then(double)
    wf.entries.append(Tap("peek", lambda ctx: seen.append(ctx.input_data)))
    wf.then(double.clone(id="again")).commit()

    result = await wf.create_run().start(input_data=3)
    assert (result.status, result.result, seen) == ("success", 12, [6])
    assert list(wf.graph.successors("peek")) == ["again"]
    console = Console(width=60, color_system=None, record=True, file=io.StringIO())
    console.print(GraphView(wf))
    assert "tap peek" in console.export_text()


async def test_a_new_entry_class_runs_on_the_output_stream_too() -> None:
    from procflow.messages import Chunk
    from procflow.processors import Processor, ProcessorStepSchema
    from procflow.processors._runner import ProcessorRunner

    class Upper(Processor):
        id = "upper"

        def process_output_stream(self, args: Any) -> Any:
            return Chunk.text_delta(args.part.text.upper())

    seen: list[str] = []
    wf = create_workflow(id="tapped", input_schema=ProcessorStepSchema,
                         output_schema=ProcessorStepSchema).then(create_step(Upper()))
    wf.entries.append(Tap("peek", lambda ctx: seen.append(ctx.input_data.part.text)))
    pipe = ProcessorRunner([wf.commit()]).output_stream()
    out = await pipe.process(Chunk.text_delta("hi"))
    assert [c.text for c in out] == ["HI"] and seen == ["HI"]
