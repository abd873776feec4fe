"""The agent, through the seed's examples translated to Python, both ways (generate
and stream) wherever the result should be the same."""

from __future__ import annotations

from typing import Any

import pytest

from procflow import RequestContext, create_step, create_workflow
from procflow.agent import Agent, FullOutput, tool
from procflow.errors import ProcessorError
from procflow.messages import Chunk, Message, TripwireChunk
from procflow.models import ScriptedModel, ToolCall
from procflow.processors import (
    ProcessInputStepResult,
    Processor,
    ProcessorStepSchema,
    ProcessorViolation,
    Signal,
    merge_processor_results,
)
from procflow.records import ToolResultRecord, Tripwire
from procflow.runtime import RunMode


async def run_both(make_agent: Any, prompt: Any = "hi", **options: Any,
                   ) -> tuple[FullOutput, FullOutput, list[Chunk]]:
    """generate() and stream() on fresh agents; returns both outputs and the chunks."""
    generated = await make_agent().generate(prompt, **options)
    out = await make_agent().stream(prompt, **options)
    chunks = [c async for c in out.full_stream]
    streamed = await out.output
    return generated, streamed, chunks


@tool
async def lookup_order(order_id: str) -> dict[str, str]:
    """Look up an order by id."""
    return {"order_id": order_id, "status": "shipped"}


def same(a: FullOutput, b: FullOutput) -> None:
    assert a.text == b.text and a.finish_reason == b.finish_reason
    assert [(m.role, m.text, m.content.metadata) for m in a.messages] == \
        [(m.role, m.text, m.content.metadata) for m in b.messages]
    assert [u.metadata for u in a.response.ui_messages] == \
        [u.metadata for u in b.response.ui_messages]


async def test_plain_answer_both_ways() -> None:
    def make() -> Agent:
        return Agent(id="plain", instructions="be nice", model=ScriptedModel(["Hello there world"]))

    gen, streamed, chunks = await run_both(make)
    same(gen, streamed)
    assert gen.text == "Hello there world" and gen.finish_reason == "stop"
    deltas = [c.text for c in chunks if c.type == "text-delta"]
    assert deltas == ["Hello ", "there ", "world"]
    assert chunks[0].type == "start" and chunks[-1].type == "finish"
    assert gen.usage.output_tokens == 3


async def test_tool_loop_runs_tools_and_feeds_results_back() -> None:
    model = ScriptedModel([[ToolCall("lookup_order", {"order_id": "A-1"})],
                           "Your order shipped."])
    agent = Agent(id="support", model=model, tools=[lookup_order])
    out = await agent.generate("where is A-1?")
    assert out.text == "Your order shipped."
    assert out.tool_results[0].result == {"order_id": "A-1", "status": "shipped"}
    assert len(out.steps) == 2
    second_prompt = model.requests[1].prompt
    assert any(isinstance(m["content"], list) and m["content"][0]["type"] == "tool-result"
               for m in second_prompt)
    assert [t.name for t in model.requests[0].tools or []] == ["lookup_order"]


async def test_tool_errors_become_error_results() -> None:
    @tool
    def broken(x: int) -> int:
        """Always fails."""
        raise RuntimeError("db down")

    model = ScriptedModel([[ToolCall("broken", {"x": 1}), ToolCall("broken", {"x": "nan"}),
                            ToolCall("missing", {})], "sorry"])
    out = await Agent(id="a", model=model, tools=[broken]).generate("go")
    errors = [(r.is_error, str(r.result)) for r in out.tool_results]
    assert all(flag for flag, _ in errors)
    assert "RuntimeError: db down" in errors[0][1]
    assert "invalid arguments for tool 'broken' at 'x'" in errors[1][1]
    assert "unknown tool 'missing'" in errors[2][1]


async def test_moderation_workflow_as_input_processor() -> None:
    class Block(Processor):
        id = "moderation"

        def process_input(self, args: Any) -> None:
            if "hate" in args.messages[-1].text:
                args.abort("Content blocked by moderation")

    class Redact(Processor):
        id = "pii-detector"

        def process_input(self, args: Any) -> Any:
            return [m.with_text(m.text.replace("555-0100", "[PHONE]")) for m in args.messages]

    moderation = (create_workflow(id="moderation-pipeline", input_schema=ProcessorStepSchema,
                                  output_schema=ProcessorStepSchema)
                  .parallel([create_step(Redact()), create_step(Block())])
                  .map(lambda ctx: ctx.input_data["processor:pii-detector"]).commit())

    model = ScriptedModel(["ok", "never"])
    agent = Agent(id="moderated", model=model, input_processors=[moderation])
    out = await agent.generate("call me at 555-0100")
    assert "[PHONE]" in str(model.requests[0].prompt) and "555-0100" not in str(
        model.requests[0].prompt)
    blocked = await agent.generate("I hate you")
    assert blocked.finish_reason == "other" and blocked.text == ""
    assert blocked.tripwire == Tripwire("Content blocked by moderation", "moderation")
    assert len(model.requests) == 1  # the blocked call never reached the model
    assert out.text == "ok"


async def test_tripwire_chunk_in_stream_and_on_violation() -> None:
    seen: list[ProcessorViolation] = []

    class Guard(Processor):
        id = "guard"

        def process_output_stream(self, args: Any) -> Any:
            if "secret" in args.part.text:
                args.abort("leak", metadata={"kind": "secret"})
            return args.part

    guard = Guard()
    guard.on_violation = seen.append
    agent = Agent(id="a", model=ScriptedModel(["the secret is 42"]), output_processors=[guard])
    out = await agent.stream("tell me")
    chunks = [c async for c in out.full_stream]
    trip = [c for c in chunks if c.type == "tripwire"]
    assert trip == [TripwireChunk("leak", "guard", False, {"kind": "secret"})]
    assert trip[0].payload.processor_id == "guard" and trip[0].payload.reason == "leak"
    assert [c.text for c in chunks if c.type == "text-delta"] == ["the "]
    assert await out.finish_reason == "other"
    assert [v.message for v in seen] == ["leak"]


async def test_stream_filter_drops_chunks_and_word_counter_state() -> None:
    class StreamFilter(Processor):
        id = "stream-filter"

        def process_output_stream(self, args: Any) -> Any:
            return None if "secret" in args.part.text else args.part

    class WordCounter(Processor):
        id = "word-counter"

        def process_output_stream(self, args: Any) -> Any:
            if args.part.type == "text-delta":
                args.state["words"] = args.state.get("words", 0) + len(args.part.text.split())
            return args.part

        def process_output_result(self, args: Any) -> Any:
            for msg in args.messages:
                msg.content.metadata["words"] = args.state["words"]
            return args.messages

    def make() -> Agent:
        return Agent(id="a", model=ScriptedModel(["a secret word here"]),
                     output_processors=[StreamFilter(), WordCounter()])

    gen, streamed, chunks = await run_both(make)
    same(gen, streamed)
    assert gen.text == "a word here"
    assert "secret" not in "".join(c.text for c in chunks)
    assert gen.response.messages[-1].content.metadata["words"] == 3


async def test_metadata_from_output_result_is_in_ui_messages_both_ways() -> None:
    class MetadataProcessor(Processor):
        id = "metadata-processor"

        def process_output_result(self, args: Any) -> Any:
            out = []
            for msg in args.messages:
                msg = msg.model_copy(deep=True)
                if msg.role == "assistant":
                    msg.content.metadata["customData"] = "your data here"
                out.append(msg)
            return out

    def make() -> Agent:
        return Agent(id="a", model=ScriptedModel(["Hello"]),
                     output_processors=[MetadataProcessor()])

    gen, streamed, _ = await run_both(make)
    same(gen, streamed)
    for output in (gen, streamed):
        assistant = [u for u in output.response.ui_messages if u.role == "assistant"]
        assert assistant[0].metadata["customData"] == "your data here"


async def test_prepare_step_switches_model_and_tool_choice() -> None:
    fast = ScriptedModel([[ToolCall("lookup_order", {"order_id": "1"})]], model_id="fast")
    # the script is the conversation's: its turn 0 is answered by ``fast``
    big = ScriptedModel([[ToolCall("unused")], "done"], model_id="big")

    def prepare(args: Any) -> Any:
        if args.step_number == 0:
            return ProcessInputStepResult(model=fast)
        return ProcessInputStepResult(tool_choice="none")

    out = await Agent(id="a", model=big, tools=[lookup_order]).generate("x", prepare_step=prepare)
    assert out.text == "done"
    assert len(fast.requests) == 1 and len(big.requests) == 1
    assert big.requests[0].tool_choice == "none"


async def test_ensure_final_response_signal_on_the_last_step() -> None:
    max_steps = 2

    class EnsureFinalResponse(Processor):
        id = "ensure-final-response"

        async def process_input_step(self, args: Any) -> None:
            if args.step_number == max_steps - 1:
                await args.send_signal(Signal(
                    contents="This is your final step.",
                    attributes={"reason": "max-steps-reached", "step": args.step_number + 1}))

    model = ScriptedModel([[ToolCall("lookup_order", {"order_id": "1"})], "final answer"])
    agent = Agent(id="a", model=model, tools=[lookup_order],
                  input_processors=[EnsureFinalResponse()])
    out = await agent.generate("go", max_steps=max_steps)
    last_prompt = model.requests[-1].prompt
    assert last_prompt[-1] == {"role": "user", "content": (
        '<system-reminder reason="max-steps-reached" step="2">This is your final step.'
        "</system-reminder>")}
    assert "system-reminder" not in str(model.requests[0].prompt)
    assert all("system-reminder" not in u.text for u in out.response.ui_messages)


async def test_transient_signal_is_not_stacked() -> None:
    class Steering(Processor):
        id = "steering-reminder"

        async def process_input_step(self, args: Any) -> None:
            await args.send_signal(Signal(contents="Stay on task.", transient=True))

    model = ScriptedModel([[ToolCall("lookup_order", {"order_id": "1"})], "ok"])
    await Agent(id="a", model=model, tools=[lookup_order],
                input_processors=[Steering()]).generate("go")
    assert str(model.requests[1].prompt).count("Stay on task.") == 1


async def test_quality_checker_retry_with_feedback() -> None:
    class QualityChecker(Processor):
        id = "quality-checker"

        def process_output_step(self, args: Any) -> Any:
            if len(args.text.split()) < 3 and args.retry_count < 3:
                args.abort("Response quality score too low. Please provide a more detailed "
                           "answer.", retry=True, metadata={"score": 0.2})
            return None

    model = ScriptedModel(["short", "a much longer answer"])
    agent = Agent(id="a", model=model, output_processors=[QualityChecker()],
                  max_processor_retries=3)
    out = await agent.generate("explain")
    assert out.text == "a much longer answer"
    assert "Response quality score too low" in str(model.requests[1].prompt)
    no_budget = Agent(id="b", model=ScriptedModel(["short"]),
                      output_processors=[QualityChecker()])
    blocked = await no_budget.generate("explain")
    assert blocked.finish_reason == "other" and blocked.tripwire is not None
    assert blocked.tripwire.retry is True


async def test_per_call_arrays_replace_and_dynamic_arrays() -> None:
    class Tag(Processor):
        def __init__(self, id: str) -> None:
            self.id = id

        def process_input(self, args: Any) -> Any:
            return [m.with_text(f"{m.text}+{self.id}") for m in args.messages]

    model = ScriptedModel(["1", "2", "3"])
    agent = Agent(id="a", model=model, input_processors=[Tag("agent")])
    await agent.generate("x")
    await agent.generate("x", input_processors=[Tag("call")])
    dynamic = Agent(id="d", model=model,
                    input_processors=lambda rc: [Tag(rc.get("tag") or "none")])
    await dynamic.generate("x", request_context=RequestContext({"tag": "rc"}))
    texts = [r.prompt[-1]["content"] for r in model.requests]
    assert texts == ["x+agent", "x+call", "x+rc"]


async def test_custom_data_chunks_reach_the_stream_from_a_nested_workflow() -> None:
    class Announce(Processor):
        id = "announce"

        async def process_input(self, args: Any) -> None:
            await args.writer.custom({"type": "data-status", "data": {"phase": "input"}})

    inner = (create_workflow(id="inner", input_schema=ProcessorStepSchema,
                             output_schema=ProcessorStepSchema)
             .parallel([create_step(Announce())]).map(merge_processor_results).commit())
    outer = (create_workflow(id="outer", input_schema=ProcessorStepSchema,
                             output_schema=ProcessorStepSchema).then(inner).commit())
    out = await Agent(id="a", model=ScriptedModel(["ok"]), input_processors=[outer]).stream("x")
    chunks = [c async for c in out.full_stream]
    assert [(c.type, c.data) for c in chunks if c.type.startswith("data-")] == [
        ("data-status", {"phase": "input"})]


async def test_bad_options_and_arrays_are_clear() -> None:
    agent = Agent(id="a", model=ScriptedModel(["x"]))
    with pytest.raises(TypeError,
                       match=r"generate\(\) got an unexpected option 'max_stepz'; options: "):
        await agent.generate("x", max_stepz=3)  # type: ignore[call-arg]
    with pytest.raises(ProcessorError, match="input_processors"):
        await agent.generate("x", input_processors="nope")
    with pytest.raises(ValueError, match="max_steps"):
        Agent(id="a", model=ScriptedModel([]), max_steps=0)


async def test_inputs_accept_message_dicts_and_lists() -> None:
    model = ScriptedModel(["ok"])

    await Agent(id="a", model=model).generate(
        [{"role": "system", "content": "extra rules"}, Message.user("one"),
         {"role": "user", "content": "two"}])
    prompt = model.requests[0].prompt
    assert prompt[0] == {"role": "system", "content": "extra rules"}
    assert [p["content"] for p in prompt[1:]] == ["one", "two"]


async def test_agent_loop_is_a_workflow_and_agent_is_a_step() -> None:
    agent = Agent(id="a", model=ScriptedModel(["from agent"]))
    wf = agent.workflow
    assert wf.committed and wf.step_ids() == ["input-processors", "agent-step",
                                              "output-processors"]
    outer = create_workflow(id="uses-agent").then(create_step(agent)).commit()
    result = await outer.create_run().start(input_data="question")
    assert result.result == {"text": "from agent"}


async def test_a_traced_agent_run_leaves_no_reference_cycles() -> None:
    import gc

    from procflow import set_default_storage
    from procflow.storage import NullStorage

    class Noop(Processor):
        id = "noop"

        def process_input(self, args: Any) -> None:
            return None

        def process_output_stream(self, args: Any) -> Any:
            return args.part

    def make() -> Agent:
        return Agent(id="a", model=ScriptedModel([[ToolCall("lookup_order", {"order_id": "1"})],
                                                  "done"]),
                     tools=[lookup_order], input_processors=[Noop()],
                     output_processors=[Noop()])

    set_default_storage(NullStorage())
    await make().generate("warm up")  # one-time caches (the tool's JSON schema) fill here
    gc.collect()
    gc.disable()
    try:
        await make().generate("hi")
        # Everything the run made is freed by reference counting: a cycle here would
        # leave the whole run (messages, runners, spans) to the cyclic collector.
        assert gc.collect() == 0
    finally:
        gc.enable()
        set_default_storage(None)


async def test_cancelling_the_caller_stops_the_call_and_its_tools() -> None:
    import anyio

    from procflow.errors import RunStateError
    from procflow.workflows.workflow import create_workflow as cw

    started = anyio.Event()
    finished: list[str] = []

    @tool
    async def slow(seconds: float) -> str:
        """Sleep, then answer."""
        started.set()
        await anyio.sleep(seconds)
        finished.append("slow")
        return "done"

    model = ScriptedModel([[ToolCall("slow", {"seconds": 30})], "never"])
    agent = Agent(id="a", model=model, tools=[slow])
    with anyio.move_on_after(5) as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(agent.generate, "go")
            await started.wait()
            tg.cancel_scope.cancel()
    assert not scope.cancelled_caught  # the tool's 30 s sleep was cancelled at once
    assert finished == []

    # Runs the library keeps to itself refuse cancel(): their caller is what to cancel.
    wf = cw(id="w").then(create_step(id="s", execute=lambda c: 1)).commit()
    run = wf.create_run()
    run.mode = RunMode.EPHEMERAL
    with pytest.raises(RunStateError, match="cannot be cancelled on its own"):
        await run.cancel()


async def test_a_processor_bug_names_the_processor_and_hook() -> None:
    class Buggy(Processor):
        id = "buggy"

        def process_input(self, args: Any) -> None:
            raise KeyError("missing")

    agent = Agent(id="a", model=ScriptedModel(["x"]), input_processors=[Buggy()])
    with pytest.raises(ProcessorError, match=r"processor 'buggy': process_input\(\) raised "
                                             r"KeyError") as info:
        await agent.generate("hi")
    assert isinstance(info.value.__cause__, KeyError)


async def test_tools_a_processor_adds_are_called_and_shaped_for_the_model() -> None:
    from pydantic import BaseModel

    from procflow.agent import Tool

    class Query(BaseModel):
        q: str

    secret = Tool("secret", "Look something up.", Query, lambda data: {"raw": data.q * 2},
                  to_model_output=lambda value: f"shaped:{value['raw']}")

    class AddTool(Processor):
        id = "add-tool"

        def process_input_step(self, args: Any) -> ProcessInputStepResult:
            return ProcessInputStepResult(tools=[*(args.tools or []), secret])

    model = ScriptedModel([[ToolCall("secret", {"q": "ab"}), ToolCall("nope", {})], "done"])
    out = await Agent(id="a", model=model, tools=[lookup_order],
                      input_processors=[AddTool()]).generate("go")
    assert out.text == "done"
    results = {r.tool_name: r for r in out.tool_results}
    assert results["secret"] == ToolResultRecord(results["secret"].tool_call_id, "secret",
                                                 {"raw": "abab"}, is_error=False)
    # The unknown tool's error lists the step's tools, the added one included.
    assert results["nope"].is_error
    assert "['lookup_order', 'secret']" in results["nope"].result
    # What the model saw for the added tool is its to_model_output.
    tool_entries = [e for e in model.requests[1].prompt if e["role"] == "tool"]
    assert any(part.get("result") == "shaped:abab"
               for e in tool_entries for part in e["content"])
