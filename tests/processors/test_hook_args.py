"""Every field of every hook's args holds what the runner was given.

The runner builds args positionally (it is the hot path), so a field out of order
would silently hand a hook the wrong value; this pins each one.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from procflow.errors import APICallError
from procflow.messages import Chunk, Message, MessageList
from procflow.processors import OutputResult, Processor, ProcessorContext, ProcessorWriter
from procflow.processors._hooks import StepInfo, StepOverrides
from procflow.processors._runner import ProcessorRunner
from procflow.processors.args import ProcessorArgs

SHARED = {f.name for f in dataclasses.fields(ProcessorArgs)}


class Recorder(Processor):
    id = "rec"

    def __init__(self) -> None:
        self.seen: dict[str, Any] = {}

    def _keep(self, name: str, args: Any) -> None:
        self.seen[name] = args

    def process_input(self, args: Any) -> None:
        self._keep("input", args)

    def process_input_step(self, args: Any) -> None:
        self._keep("input_step", args)

    def process_llm_request(self, args: Any) -> None:
        self._keep("llm_request", args)

    def process_llm_response(self, args: Any) -> None:
        self._keep("llm_response", args)

    def process_output_stream(self, args: Any) -> Any:
        self._keep("output_stream", args)
        return args.part

    def process_output_step(self, args: Any) -> None:
        self._keep("output_step", args)

    def process_output_result(self, args: Any) -> None:
        self._keep("output_result", args)

    def process_tool_result(self, args: Any) -> None:
        self._keep("tool_result", args)

    def process_api_error(self, args: Any) -> None:
        self._keep("api_error", args)


async def test_every_hook_gets_each_field_in_its_place() -> None:
    ctx = ProcessorContext(writer=ProcessorWriter())
    ctx.retry_count = 2
    ctx.request_context["tenant"] = "acme"
    rec = Recorder()
    runner = ProcessorRunner([rec], context=ctx, max_processor_retries=3)
    ml = MessageList()
    system = Message.system("be nice")
    ml.add_system(system)
    question = Message.user("hi")
    ml.add(question, source="input")
    answer = Message.assistant("hello")
    prior = object()
    info = StepInfo(step_number=4, steps=[prior])
    prompt = [{"role": "user", "content": "hi"}]
    chunks = [Chunk.text_delta("hello")]
    result = OutputResult(text="hello")
    error = APICallError("rejected", status_code=400)

    await runner.run_input(ml)
    await runner.run_input_step(ml, info, StepOverrides("m", ["t"], "auto"))
    await runner.run_llm_request(prompt, ml, info, "model-x")
    await runner.run_llm_response(chunks, ml, info, "model-x", from_cache=True)
    ml.add(answer, source="response")
    await runner.output_stream(ml).process(chunks[0])
    await runner.run_output_step(ml, info, finish_reason="stop", tool_calls=[{"c": 1}],
                                 text="hello", usage={"total_tokens": 3})
    await runner.run_tool_result(ml, info, tool_name="lookup", tool_call_id="c1",
                                 args={"q": 1}, result={"n": 1})
    await runner.run_api_error(error, ml, info)
    await runner.run_output_result(ml, result)

    expected: dict[str, dict[str, Any]] = {
        "input": {"messages": [question], "system_messages": [system]},
        "input_step": {"messages": [question], "system_messages": [system],
                       "step_number": 4, "steps": [prior], "model": "m", "tools": ["t"],
                       "tool_choice": "auto"},
        "llm_request": {"prompt": prompt, "model": "model-x", "step_number": 4,
                        "steps": [prior]},
        "llm_response": {"chunks": chunks, "model": "model-x", "step_number": 4,
                         "steps": [prior], "from_cache": True},
        "output_stream": {"part": chunks[0], "stream_parts": [chunks[0]],
                          "text_before": "", "text_after": ""},
        "output_step": {"messages": [question, answer], "system_messages": [system],
                        "step_number": 4, "steps": [prior], "finish_reason": "stop",
                        "tool_calls": [{"c": 1}], "text": "hello",
                        "usage": {"total_tokens": 3}},
        "tool_result": {"tool_name": "lookup", "tool_call_id": "c1", "args": {"q": 1},
                        "result": {"n": 1}, "step_number": 4, "steps": [prior]},
        "api_error": {"error": error, "messages": [question, answer], "step_number": 4,
                      "steps": [prior]},
        "output_result": {"messages": [answer], "result": result},
    }
    assert set(rec.seen) == set(expected)
    for hook, own in expected.items():
        args = rec.seen[hook]
        fields = {f.name for f in dataclasses.fields(args)}
        assert fields == SHARED | set(own), hook
        assert args.message_list is ml, hook
        assert args.state is ctx.states["rec"], hook
        assert args.retry_count == 2, hook
        assert args.request_context is ctx.request_context, hook
        assert args.writer is ctx.writer, hook
        assert args.processor is rec, hook
        assert args.context is ctx, hook
        for name, value in own.items():
            assert getattr(args, name) == value, (hook, name)
