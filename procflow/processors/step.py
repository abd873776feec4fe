"""Processors as workflow steps: the ``ProcessorStepSchema`` envelope and ``ProcessorStep``.

A processor step runs the hook of its envelope's phase on a *copy* of the message
list (so parallel branches never see each other's edits) and returns the envelope
with the changes merged. A processor without that hook passes the envelope through.
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SkipValidation, field_validator, model_validator

from procflow.errors import ProcessorError, WorkflowDefinitionError
from procflow.messages import Chunk, Message, MessageList
from procflow.processors._hooks import PHASES, TABLE, HookCall
from procflow.processors._stream import StreamPipeline
from procflow.processors.args import ProcessorContext, ProcessorViolation
from procflow.processors.base import Processor
from procflow.steps.context import StepContext
from procflow.steps.step import Step

__all__ = ["PROCESSOR_CONTEXT_KEY", "Phase", "ProcessorStep", "ProcessorStepSchema",
           "processor_workflow_hooks", "run_envelope"]

Phase = Literal["input", "input_step", "output_stream", "output_step", "output_result",
                "tool_result"]

PROCESSOR_CONTEXT_KEY = "procflow__processorContext"
"""Request-context key under which the runner hands its ``ProcessorContext`` to steps."""

class ProcessorStepSchema(BaseModel):
    """The envelope processor steps take and return, discriminated on ``phase``.

    Per phase: "input" (messages, message_list, system_messages, retry_count);
    "input_step" (+ step_number, model, tools, tool_choice, steps); "output_stream"
    (part, stream_parts, state); "output_step" (+ step_number, finish_reason,
    tool_calls, text, usage); "output_result" (messages, result); "tool_result"
    (tool_name, tool_call_id, args, result). ``violations`` collects warnings;
    ``base`` is the message list the last processor step started from (what
    ``merge_processor_results`` diffs parallel branches against).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    phase: Phase
    messages: list[Message] | None = None
    message_list: MessageList | None = None
    system_messages: list[Message] = Field(default_factory=list)
    retry_count: int = 0
    step_number: int = 0
    steps: list[Any] = Field(default_factory=list)
    model: Any = None
    tools: Any = None
    tool_choice: Any = None
    part: Annotated[Chunk | None, SkipValidation] = None
    stream_parts: Annotated[list[Chunk], SkipValidation] = Field(default_factory=list)
    state: dict[str, Any] = Field(default_factory=dict)
    finish_reason: str | None = None
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    text: str = ""
    usage: dict[str, Any] | None = None
    result: Any = None
    tool_name: str | None = None
    tool_call_id: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    violations: Annotated[list[ProcessorViolation], SkipValidation] = Field(
        default_factory=list)
    base: MessageList | None = Field(default=None, exclude=True)

    @field_validator("messages", "system_messages", mode="before")
    @classmethod
    def _coerce_messages(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [m if isinstance(m, Message) else Message.from_input(m) for m in value]
        return value

    @model_validator(mode="after")
    def _phase_fields(self) -> ProcessorStepSchema:
        missing = [f for f in PHASES[self.phase].required
                   if getattr(self, f) is None and not (f == "messages" and self.message_list)]
        if missing:
            raise ValueError(f"phase {self.phase!r} needs {', '.join(missing)}")
        return self

    def live_list(self) -> MessageList:
        """The envelope's message list, built from ``messages`` when there is none."""
        if self.message_list is not None:
            return self.message_list
        ml = MessageList()
        ml.add(self.messages or [], source=PHASES[self.phase].source)
        ml.add_system(self.system_messages)
        return ml


def is_processor_workflow(obj: Any) -> bool:
    """Whether ``obj`` is a workflow whose input and output are ``ProcessorStepSchema``."""
    return (getattr(obj, "kind", None) == "workflow"
            and getattr(obj, "input_schema", None) is ProcessorStepSchema
            and getattr(obj, "output_schema", None) is ProcessorStepSchema)


_WORKFLOW_HOOKS: weakref.WeakKeyDictionary[Any, frozenset[str] | None] = \
    weakref.WeakKeyDictionary()


def processor_workflow_hooks(wf: Any) -> frozenset[str] | None:
    """The hooks the processors of a processor workflow implement, nested workflows
    included: a phase none of them has is work the workflow would not do. ``None`` when
    some step is not a processor's (it may act at any phase). Cached per workflow."""
    try:
        return _WORKFLOW_HOOKS[wf]
    except (KeyError, TypeError):
        pass
    hooks: set[str] = set()
    found: frozenset[str] | None = None
    for step_id in wf.step_ids():
        step = wf.get_step(step_id)
        inner = (step.processor.implemented_hooks() if isinstance(step, ProcessorStep)
                 else processor_workflow_hooks(step)
                 if getattr(step, "kind", None) == "workflow" else None)
        if inner is None:
            break
        hooks |= inner
    else:
        found = frozenset(hooks)
    with contextlib.suppress(TypeError):  # not weakly referable: asked again next time
        _WORKFLOW_HOOKS[wf] = found
    return found


async def run_envelope(p: Processor, env: ProcessorStepSchema,
                       ctx: ProcessorContext) -> ProcessorStepSchema:
    """Run processor ``p`` for the envelope's phase; return the updated envelope."""
    hook = PHASES[env.phase]
    if hook.name not in p.implemented_hooks():
        return env
    before = len(ctx.violations)
    ctx.retry_count = env.retry_count
    update: dict[str, Any]
    if hook.stream:
        if env.part is None:
            return env
        pipe = StreamPipeline([p], ctx, env.message_list)
        out = await pipe.process(env.part)
        update = {"part": out[0] if len(out) == 1 else None,
                  "stream_parts": [*env.stream_parts, env.part], "state": ctx.state_for(p.id)}
    else:
        start = env.live_list()
        ml = start.copy()
        call = HookCall(ml)
        for name in hook.env_in:
            setattr(call, name, getattr(env, name))
        from procflow.processors._runner import ProcessorRunner

        await ProcessorRunner([p], context=ctx, validate=False).run(hook, call)
        update = {f: getattr(call, f) for f in hook.env_out}
        update |= {"message_list": ml, "messages": hook.messages(ml),
                   "system_messages": ml.system(), "base": start}
    if len(ctx.violations) > before:
        update["violations"] = [*env.violations, *ctx.violations[before:]]
    return env.model_copy(update=update)


class ProcessorStep(Step):
    """A processor as a workflow step: id ``processor:<id>``, envelope in and out."""

    kind = "processor"
    span_kind = "processor"

    def __init__(self, processor: Processor) -> None:
        pid = getattr(processor, "id", None)
        if not isinstance(pid, str) or not pid:
            raise ProcessorError(
                f"{type(processor).__name__} has no id; set a class attribute like "
                f"id = \"my-processor\"", processor_id=None)
        self.processor = processor
        hooks = sorted(processor.implemented_hooks())
        stranded = [h for h in hooks if TABLE[h].phase is None]
        if stranded:
            raise WorkflowDefinitionError(
                f"processor '{pid}' ({type(processor).__name__}) cannot be a step of a "
                f"processor workflow: its hook(s) {stranded} never run there (a workflow "
                "runs only process_input, process_input_step, process_output_stream, "
                "process_output_step, process_output_result and process_tool_result); list "
                "it directly in the agent's input_processors (or error_processors)",
                step_id=f"processor:{pid}")
        super().__init__(id=f"processor:{pid}", execute=self._execute,
                         input_schema=ProcessorStepSchema, output_schema=ProcessorStepSchema,
                         description=processor.description or f"Processor {pid}",
                         metadata={"hooks": hooks, "processor_id": pid})

    async def _execute(self, ctx: StepContext) -> ProcessorStepSchema:
        env: ProcessorStepSchema = ctx.input_data
        pctx = ctx.request_context.get(PROCESSOR_CONTEXT_KEY)
        if not isinstance(pctx, ProcessorContext):
            pctx = ProcessorContext(request_context=ctx.request_context)
            pctx.tracer = ctx.tracer
        if pctx.tracer is not None:
            pctx.span = ctx.span  # read before the first await: safe beside parallel siblings
        return await run_envelope(self.processor, env, pctx)


Processor.step_adapter = ProcessorStep
