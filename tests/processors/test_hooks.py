"""Each hook and each return-value rule of the seed, driven through ProcessorRunner."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from procflow.errors import ProcessorError, TripwireError
from procflow.messages import Chunk, Message, MessageList, TripwireChunk
from procflow.processors import (
    APIErrorResult,
    OutputResult,
    ProcessInputResult,
    ProcessInputStepResult,
    ProcessLLMRequestResult,
    Processor,
    ProcessorContext,
    ProcessorViolation,
    ProcessorWriter,
    ProcessToolResultResult,
    Signal,
)
from procflow.processors._hooks import StepInfo, StepOverrides
from procflow.processors._runner import ProcessorRunner


def history(*texts: str, source: Any = "input") -> MessageList:
    ml = MessageList()
    ml.add_system(Message.system("be nice"))
    for text in texts:
        ml.add(Message.user(text), source=source)
    return ml


class Fn(Processor):
    """A processor whose one hook is given as a function."""

    def __init__(self, hook: str, fn: Any, id: str = "fn") -> None:
        self.id = id
        setattr(self, hook, fn)

    def implemented_hooks(self) -> frozenset[str]:
        return frozenset(h for h in vars(self) if h.startswith("process_"))


async def test_process_input_list_replaces_and_missing_ids_are_removed() -> None:
    ml = history("keep", "drop")
    keep = ml.input()[0]
    runner = ProcessorRunner([Fn("process_input", lambda a: [keep.with_text("KEEP")])])
    await runner.run_input(ml)
    assert [m.text for m in ml.input()] == ["KEEP"]
    assert ml.input()[0].id == keep.id and ml.source_of(keep.id) == "input"


async def test_process_input_async_result_object_sets_system_messages() -> None:
    async def hook(args: Any) -> ProcessInputResult:
        return ProcessInputResult(system_messages=[Message.system("be brief")])

    ml = history("hi")
    await ProcessorRunner([Fn("process_input", hook)]).run_input(ml)
    assert [m.text for m in ml.system()] == ["be brief"]
    assert [m.text for m in ml.input()] == ["hi"]


async def test_returned_system_role_goes_to_system_list() -> None:
    ml = history("hi")
    await ProcessorRunner([Fn("process_input", lambda a: [*a.messages,
                                                          Message.system("extra")])]).run_input(ml)
    assert "extra" in [m.text for m in ml.system()]


async def test_in_place_edit_and_same_list_return_are_accepted() -> None:
    def hook(args: Any) -> MessageList:
        args.message_list.add(Message.user("added"), source="input")
        return args.message_list

    ml = history("a")
    await ProcessorRunner([Fn("process_input", hook)]).run_input(ml)
    assert [m.text for m in ml.input()] == ["a", "added"]


@pytest.mark.parametrize(("value", "match"), [
    (MessageList(), "returned a different MessageList"),
    ("text", "returned str"),
    (["not a message", 3], "item 1 is not a message"),
])
async def test_wrong_returns_name_processor_and_hook(value: Any, match: str) -> None:
    with pytest.raises(ProcessorError, match=match) as err:
        await ProcessorRunner([Fn("process_input", lambda a: value, id="bad")]).run_input(
            history("x"))
    assert (err.value.processor_id, err.value.hook) == ("bad", "process_input")


async def test_process_input_step_overrides_chain() -> None:
    seen: list[Any] = []

    def first(args: Any) -> ProcessInputStepResult:
        return ProcessInputStepResult(model="fast-model", tool_choice="none")

    def second(args: Any) -> None:
        seen.append((args.model, args.tool_choice, args.tools, args.step_number))

    runner = ProcessorRunner([Fn("process_input_step", first, "a"),
                              Fn("process_input_step", second, "b")])
    got = await runner.run_input_step(history("q"), StepInfo(2, []),
                                      StepOverrides("big-model", ["t"], "auto"))
    assert (got.model, got.tools, got.tool_choice) == ("fast-model", ["t"], "none")
    assert seen == [("fast-model", "none", ["t"], 2)]


async def test_llm_request_rewrites_prompt_and_first_response_wins() -> None:
    cached = [Chunk.text_delta("cached"), Chunk.finish("stop")]
    runner = ProcessorRunner([
        Fn("process_llm_request", lambda a: [*a.prompt, {"role": "user", "content": "more"}], "a"),
        Fn("process_llm_request", lambda a: ProcessLLMRequestResult(response=cached), "b"),
        Fn("process_llm_request", lambda a: ProcessLLMRequestResult(response=[]), "c"),
    ])
    got = await runner.run_llm_request([{"role": "user", "content": "q"}], None, StepInfo(), None)
    assert got.prompt is not None and got.prompt[-1]["content"] == "more"
    assert got.response is cached


async def test_llm_request_and_response_share_state() -> None:
    class Cache(Processor):
        id = "cache"

        def process_llm_request(self, args: Any) -> None:
            args.state["key"] = "k1"

        def process_llm_response(self, args: Any) -> None:
            args.state["wrote"] = (args.state["key"], len(args.chunks), args.from_cache)

    runner = ProcessorRunner([Cache()])
    await runner.run_llm_request([], None, StepInfo(), None)
    await runner.run_llm_response([Chunk.finish("stop")], None, StepInfo(), None,
                                  from_cache=False)
    assert runner.context.states["cache"]["wrote"] == ("k1", 1, False)


async def test_stream_hook_modifies_drops_and_expands() -> None:
    def hook(args: Any) -> Any:
        text = args.part.text
        if "secret" in text:
            return None
        if text == "split":
            return [Chunk.text_delta("sp"), Chunk.text_delta("lit")]
        return Chunk.text_delta(text.upper())

    pipe = ProcessorRunner([Fn("process_output_stream", hook)]).output_stream()
    assert [c.text for c in await pipe.process(Chunk.text_delta("hi"))] == ["HI"]
    assert await pipe.process(Chunk.text_delta("a secret")) == []
    assert [c.text for c in await pipe.process(Chunk.text_delta("split"))] == ["sp", "lit"]
    assert pipe.counts == {"fn": 3}


async def test_data_chunks_skip_processors_unless_opted_in() -> None:
    seen: list[str] = []

    class Watcher(Processor):
        id = "watcher"

        def process_output_stream(self, args: Any) -> Any:
            seen.append(args.part.type)
            return args.part

    class Collector(Watcher):
        id = "collector"
        process_data_parts = True

    pipe = ProcessorRunner([Watcher(), Collector()]).output_stream()
    out = await pipe.process(Chunk.custom("status", {"ok": True}))
    assert [c.type for c in out] == ["data-status"]
    assert seen == ["data-status"]  # only the collector saw it


async def test_stream_abort_becomes_tripwire_chunk_and_stops() -> None:
    def hook(args: Any) -> Any:
        if "bad" in args.part.text:
            args.abort("bad word", metadata={"word": "bad"})
        return args.part

    pipe = ProcessorRunner([Fn("process_output_stream", hook, "guard")]).output_stream()
    out = await pipe.process(Chunk.text_delta("so bad"))
    assert out[0].type == "tripwire"
    assert out[0] == TripwireChunk("bad word", "guard", False, {"word": "bad"})
    assert pipe.tripwire is not None
    assert await pipe.process(Chunk.text_delta("more")) == []


async def test_stream_hook_error_is_a_processor_error() -> None:
    def hook(args: Any) -> Any:
        raise KeyError("oops")

    pipe = ProcessorRunner([Fn("process_output_stream", hook, "broken")]).output_stream()
    with pytest.raises(ProcessorError, match="'broken': process_output_stream\\(\\) raised"):
        await pipe.process(Chunk.text_delta("x"))


async def test_word_counter_state_is_shared_between_stream_and_result() -> None:
    class WordCounter(Processor):
        id = "word-counter"

        async def process_output_stream(self, args: Any) -> Any:
            if args.part.type == "text-delta":
                args.state["words"] = args.state.get("words", 0) + len(args.part.text.split())
            return args.part

        async def process_output_result(self, args: Any) -> Any:
            args.state["total"] = args.state["words"]
            return args.messages

    runner = ProcessorRunner([WordCounter()])
    pipe = runner.output_stream()
    for text in ["one two ", "three"]:
        await pipe.process(Chunk.text_delta(text))
    await runner.run_output_result(history(source="response"), OutputResult(text=""))
    assert runner.context.states["word-counter"]["total"] == 3


async def test_output_step_retry_abort_counts_against_budget() -> None:
    def checker(args: Any) -> None:
        args.abort("too short", retry=True, metadata={"score": 0.2})

    runner = ProcessorRunner([Fn("process_output_step", checker, "quality")],
                             max_processor_retries=2)
    for expected in (True, True, False):
        with pytest.raises(TripwireError) as err:
            await runner.run_output_step(history("a"), StepInfo(), finish_reason="stop",
                                         tool_calls=[], text="a", usage=None)
        assert err.value.retry and err.value.metadata == {"score": 0.2}
        assert runner.can_retry(err.value) is expected
        if expected:
            runner.note_retry()
    assert runner.context.retry_count == 2


async def test_output_result_replaces_response_and_adds_metadata() -> None:
    def hook(args: Any) -> list[Message]:
        out = []
        for msg in args.messages:
            copy = msg.model_copy(deep=True)
            copy.content.metadata["custom"] = "yes"
            out.append(copy)
        return out

    ml = history("answer", source="response")
    await ProcessorRunner([Fn("process_output_result", hook)]).run_output_result(
        ml, OutputResult(text="answer"))
    assert ml.response()[0].content.metadata == {"custom": "yes"}


async def test_tool_result_can_be_replaced() -> None:
    hook = Fn("process_tool_result", lambda a: ProcessToolResultResult({"masked": a.result["n"]}))
    got = await ProcessorRunner([hook]).run_tool_result(
        None, StepInfo(), tool_name="lookup", tool_call_id="c1", args={}, result={"n": 1})
    assert got == {"masked": 1}


async def test_api_error_first_retry_wins_and_raising_processor_is_skipped(
        caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []

    def broken(args: Any) -> None:
        calls.append("broken")
        raise RuntimeError("handler bug")

    def fixer(args: Any) -> APIErrorResult:
        calls.append("fixer")
        return APIErrorResult(retry=True)

    def never(args: Any) -> None:
        calls.append("never")

    runner = ProcessorRunner([Fn("process_api_error", broken, "a"),
                              Fn("process_api_error", fixer, "b"),
                              Fn("process_api_error", never, "c")])
    with caplog.at_level(logging.ERROR):
        assert await runner.run_api_error(ValueError("400"), history("q"), StepInfo())
    assert calls == ["broken", "fixer"]
    assert "error processor 'a' raised" in caplog.text


async def test_on_violation_fires_on_abort_and_warn_and_its_errors_are_swallowed(
        caplog: pytest.LogCaptureFixture) -> None:
    got: list[ProcessorViolation] = []

    class Guard(Processor):
        id = "guard"

        def process_input(self, args: Any) -> None:
            args.warn("suspicious", {"level": 1})
            args.abort("blocked", metadata={"level": 2})

    guard = Guard()
    guard.on_violation = got.append
    with pytest.raises(TripwireError):
        await ProcessorRunner([guard]).run_input(history("x"))
    assert [(v.message, v.detail) for v in got] == [("suspicious", {"level": 1}),
                                                    ("blocked", {"level": 2})]

    def explode(v: ProcessorViolation) -> None:
        raise RuntimeError("monitor down")

    guard.on_violation = explode
    with caplog.at_level(logging.ERROR), pytest.raises(TripwireError):
        await ProcessorRunner([guard]).run_input(history("x"))
    assert "on_violation of processor 'guard' raised" in caplog.text


async def test_signals_render_and_transient_ones_replace_themselves() -> None:
    signal = Signal(contents="Final step.", attributes={"reason": "max-steps", "step": 5})
    assert signal.render() == ('<system-reminder reason="max-steps" step="5">Final step.'
                               '</system-reminder>')

    async def hook(args: Any) -> None:
        await args.send_signal(Signal(contents="stay on task", transient=True))
        await args.send_signal({"contents": "kept", "attributes": {"k": "v"}})

    ml = history("q")
    runner = ProcessorRunner([Fn("process_input_step", hook, "steer")])
    for _ in range(2):
        await runner.run_input_step(ml, StepInfo(), StepOverrides())
    texts = [m.text for m in ml.all()]
    assert texts.count("<system-reminder>stay on task</system-reminder>") == 1
    assert texts.count('<system-reminder k="v">kept</system-reminder>') == 2
    transient = ml.get("transient:steer:system-reminder")
    assert transient is not None and transient.content.metadata["signal"]["transient"]


async def test_writer_custom_emits_data_chunks_and_rejects_other_types() -> None:
    sent: list[Chunk] = []

    async def emit(chunk: Chunk) -> None:
        sent.append(chunk)

    async def hook(args: Any) -> None:
        await args.writer.custom({"type": "data-moderation-update", "data": {"ok": 1}})
        await args.writer.custom("data-status", "done")

    ctx = ProcessorContext(writer=ProcessorWriter(emit))
    ml = history("answer", source="response")
    await ProcessorRunner([Fn("process_output_result", hook)], context=ctx).run_output_result(
        ml, OutputResult())
    assert [(c.type, c.data) for c in sent] == [("data-moderation-update", {"ok": 1}),
                                                ("data-status", "done")]
    with pytest.raises(ProcessorError, match="must start with 'data-'"):
        await ctx.writer.custom("status", 1)


async def test_bad_arrays() -> None:
    class NoId(Processor):
        pass

    class Same(Processor):
        id = "same"

    with pytest.raises(ProcessorError, match="NoId has no id"):
        ProcessorRunner([NoId()])
    with pytest.raises(ProcessorError, match="two processors have the id 'same'"):
        ProcessorRunner([Same(), Same()])
    with pytest.raises(ProcessorError, match="expected a Processor"):
        ProcessorRunner([object()])
    with pytest.raises(ProcessorError, match="max_processor_retries"):
        ProcessorRunner([], max_processor_retries=-1)
