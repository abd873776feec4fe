"""Processor workflows on the output stream: compiled once, run in process (issue 11.5)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from procflow import WorkflowDefinitionError, create_step, create_workflow
from procflow.agent import Agent
from procflow.context import RequestContext
from procflow.messages import Chunk, TripwireChunk
from procflow.processors import (
    BatchPartsProcessor,
    PIIDetector,
    Processor,
    ProcessorStepSchema,
    merge_processor_results,
)
from procflow.processors._runner import ProcessorRunner
from procflow.storage import InMemoryStorage

TEXT = "my cat and dog met a cow; mail bob@example.com or call +1 415 555 0100 today."


class Replace(Processor):
    """Replaces a word in streamed text: a stand-in for a redacting guard."""

    def __init__(self, id: str, word: str, by: str) -> None:
        self.id, self.word, self.by = id, word, by

    def process_output_stream(self, args: Any) -> Any:
        part = args.part
        if part.type != "text-delta" or self.word not in part.text:
            return part
        return Chunk.text_delta(part.text.replace(self.word, self.by))


class Blocker(Processor):
    id = "blocker"

    async def process_output_stream(self, args: Any) -> Any:
        if args.part.type == "text-delta" and "dog" in args.part.text:
            args.abort("no dogs", metadata={"family": "pets"})
        return args.part


def proc_wf(id: str) -> Any:
    return create_workflow(id=id, input_schema=ProcessorStepSchema,
                           output_schema=ProcessorStepSchema)


def guards() -> list[Processor]:
    return [Replace("cats", "cat", "[C]"), Replace("dogs", "dog", "[D]"),
            PIIDetector(strategy="redact")]


def parallel(processors: list[Processor], id: str = "guards") -> Any:
    return (proc_wf(id).parallel([create_step(p) for p in processors])
            .map(merge_processor_results).commit())


def words(text: str) -> list[str]:
    return [w + " " for w in text.split(" ")]


async def streamed(agent: Agent, **options: Any) -> tuple[str, list[Chunk], Any]:
    out = await agent.stream("hi", **options)
    chunks = [c async for c in out.full_stream]
    text = "".join(c.text for c in chunks if c.type == "text-delta")
    return text, chunks, out


@pytest.mark.parametrize("cuts", [[], [5, 40, 41], list(range(1, len(TEXT)))],
                         ids=["whole", "some-cuts", "char-by-char"])
async def test_three_way_parallel_streams_the_same_text_as_flat(chunked: Any,
                                                                cuts: list[int]) -> None:
    deltas = chunked.split_at(TEXT, cuts)
    flat, _, flat_out = await streamed(Agent(id="flat", model=chunked(deltas),
                                             output_processors=guards()))
    par, _, par_out = await streamed(Agent(id="par", model=chunked(deltas),
                                           output_processors=[parallel(guards())]))
    assert par == flat == await par_out.text == await flat_out.text
    assert "bob@example.com" not in par and "555 0100" not in par


async def _trace(chunked: Any, deltas: list[str]) -> Any:
    storage = InMemoryStorage()
    agent = Agent(id="traced", model=chunked(deltas), storage=storage,
                  output_processors=[parallel(guards())])
    _, _, out = await streamed(agent)
    trace = await storage.load_trace((await out.output).run_id)
    assert trace is not None
    return trace


async def test_one_span_per_processor_and_no_workflow_run_per_chunk(chunked: Any) -> None:
    trace = await _trace(chunked, words(TEXT))
    stream_spans = [s["name"] for s in trace.spans if s["name"].startswith("output stream")]
    assert sorted(stream_spans) == sorted(f"output stream processor: {p}"
                                          for p in ("cats", "dogs", "pii-detector"))
    # The workflow runs once, for the result (pii-detector's output_result), never per
    # chunk, and not in the output step, where none of its processors acts.
    assert [s["name"] for s in trace.spans].count("guards") == 1
    assert [s["name"] for s in trace.spans].count("processor:cats") == 1
    assert len(trace.spans) == len((await _trace(chunked, [TEXT])).spans)


async def test_counts_show_every_processor_saw_every_chunk() -> None:
    pipe = ProcessorRunner([parallel(guards())]).output_stream()
    for w in words("a cat here"):
        await pipe.process(Chunk.text_delta(w))
    assert pipe.counts == {"cats": 3, "dogs": 3, "pii-detector": 3}


async def test_branch_conditions_are_evaluated_for_each_chunk(chunked: Any) -> None:
    def shouting(ctx: Any) -> bool:
        return ctx.input_data.part.type == "text-delta" and ctx.input_data.part.text.istitle()

    class Upper(Processor):
        id = "upper"

        def process_output_stream(self, args: Any) -> Any:
            return Chunk.text_delta(args.part.text.upper())

    wf = (proc_wf("route").branch([(shouting, create_step(Upper())),
                                   (lambda ctx: True, create_step(Replace("r", "cat", "[C]")))])
          .map(merge_processor_results).commit())
    text, _, _ = await streamed(Agent(id="b", model=chunked(["Hello ", "my ", "cat ", "Tom"]),
                                      output_processors=[wf]))
    assert text == "HELLO my [C] TOM"


async def test_branch_condition_sees_the_request_context(chunked: Any) -> None:
    wf = (proc_wf("tenant").branch([
        (lambda ctx: ctx.request_context.get("tenant") == "strict",
         create_step(Replace("strict", "cat", "***"))),
        (lambda ctx: True, create_step(Replace("lax", "zzz", "z")))])
          .map(merge_processor_results).commit())
    agent = Agent(id="t", model=chunked(["a cat"]), output_processors=[wf])
    assert (await streamed(agent, request_context=RequestContext({"tenant": "strict"})))[0] \
        == "a ***"
    assert (await streamed(agent))[0] == "a cat"


async def test_abort_inside_a_parallel_lane_is_a_tripwire_chunk(chunked: Any) -> None:
    agent = Agent(id="abort", model=chunked(["my cat ", "and dog ", "ran"]),
                  output_processors=[parallel([Replace("cats", "cat", "[C]"), Blocker()])])
    text, chunks, _ = await streamed(agent)
    trips = [c for c in chunks if isinstance(c, TripwireChunk)]
    assert len(trips) == 1 and trips[0].processor_id == "blocker"
    assert trips[0].metadata == {"family": "pets"}
    assert "dog" not in text and "ran" not in text
    result = await agent.generate("hi")
    assert result.tripwire is not None and result.tripwire.processor_id == "blocker"
    assert result.finish_reason == "other"


@pytest.mark.parametrize("finish", [True, False], ids=["finish", "no-finish"])
async def test_flush_reaches_a_batcher_inside_a_parallel(chunked: Any, finish: bool) -> None:
    text = "one two three four five six seven"
    wf = parallel([BatchPartsProcessor(batch_size=3), Replace("r", "five", "5"),
                   PIIDetector(strategy="redact")])
    got, _, out = await streamed(Agent(id="batch", model=chunked(words(text), finish=finish),
                                       output_processors=[wf]))
    assert got == "one two three four 5 six seven " == await out.text


async def test_a_map_picking_one_lane_runs_per_chunk_in_process(chunked: Any) -> None:
    wf = (proc_wf("pick").parallel([create_step(Replace("a", "cat", "[C]")),
                                    create_step(Replace("b", "dog", "[D]"))])
          .map(lambda ctx: ctx.input_data["processor:b"]).commit())
    text, _, _ = await streamed(Agent(id="pick", model=chunked(["cat ", "dog"]),
                                      output_processors=[wf]))
    assert text == "cat [D]"


async def test_nested_and_linear_workflows_compile_into_stages() -> None:
    inner = parallel([Replace("x", "cat", "[C]"), Replace("y", "dog", "[D]")], id="inner")
    outer = proc_wf("outer").then(create_step(Replace("z", "cow", "[W]"))).then(inner).commit()
    pipe = ProcessorRunner([outer]).output_stream()
    assert pipe.counts == {"z": 0, "x": 0, "y": 0}
    out = await pipe.process(Chunk.text_delta("cat dog cow"))
    assert [c.text for c in out] == ["[C] [D] [W]"]


def test_a_shape_the_stream_cannot_run_fails_at_build_time() -> None:
    looped = proc_wf("looped").dountil(create_step(Replace("r", "a", "b")),
                                       lambda ctx: True).commit()
    with pytest.raises(WorkflowDefinitionError, match="'looped' cannot run on the output"):
        Agent(id="bad", model="openai/x", output_processors=[looped])
    plain = proc_wf("plain").then(create_step(Replace("r", "a", "b"))).then(
        create_step(id="s", input_schema=ProcessorStepSchema, output_schema=ProcessorStepSchema,
                    execute=lambda ctx: ctx.input_data)).commit()
    with pytest.raises(WorkflowDefinitionError, match="step 's' is not a processor step"):
        Agent(id="bad2", model="openai/x", output_processors=[plain])
    gated = proc_wf("gated").when(lambda ctx: True,
                                  create_step(Replace("r", "a", "b"))).commit()
    with pytest.raises(WorkflowDefinitionError, match=r"'gated': \.when\(\) cannot run on"):
        Agent(id="bad3", model="openai/x", output_processors=[gated])


async def test_a_branch_with_no_condition_held_is_a_clear_error() -> None:
    from procflow.errors import ProcessorError

    wf = (proc_wf("none").branch([(lambda ctx: False, create_step(Replace("r", "a", "b")))])
          .map(merge_processor_results).commit())
    pipe = ProcessorRunner([wf]).output_stream()
    with pytest.raises(ProcessorError, match="no branch\\(\\) condition held"):
        await pipe.process(Chunk.text_delta("a"))


SECRETS = ["bob.smith@example.com", "+1 415 555 0100", "4111 1111 1111 1111",
           "sk-proj-4fG7hJ2kL9mN3pQ8rS1tV6wX0yZ5aB7c"]


async def _pipe_text(items: list[Any], deltas: list[str]) -> list[str]:
    pipe = ProcessorRunner(items).output_stream()
    out: list[Chunk] = []
    for delta in deltas:
        out += await pipe.process(Chunk.text_delta(delta))
    out += await pipe.finish()
    return [c.text for c in out if c.type == "text-delta"]


async def _leak_check(text: str, deltas: list[str], size: int) -> None:
    wf = parallel([PIIDetector(strategy="redact"), BatchPartsProcessor(batch_size=size),
                   Replace("noop", "\0", "")])
    emitted = await _pipe_text([wf], deltas)
    assert "".join(emitted) == "".join(await _pipe_text([PIIDetector(strategy="redact")],
                                                        [text]))
    for value in SECRETS:
        assert all(value not in chunk for chunk in emitted)
        assert value not in "".join(emitted)


# A plain test running its own event loop per example: Hypothesis then imports its
# shrinker on a shallow stack (CPython 3.11's AST recursion-depth SystemError).
@pytest.mark.timeout(600)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(order=st.permutations(SECRETS), size=st.integers(1, 4), data=st.data())
def test_a_guard_in_a_parallel_leaks_nothing_over_any_chunking(
        order: list[str], size: int, data: st.DataObject) -> None:
    text = "see " + " and then ".join(order) + " ok."
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(text) - 1), max_size=40))))
    deltas = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    anyio.run(_leak_check, text, deltas, size)
