"""What ``generate()`` returns (``FullOutput``) and what ``stream()`` returns (``ModelOutput``)."""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic

import anyio
import sniffio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from procflow.agent.structured import OutputT
from procflow.messages import Chunk, Message, Part
from procflow.models.base import ModelFallback
from procflow.records import ToolCallRecord, ToolResultRecord, Tripwire, Usage
from procflow.runtime.stream import close_task_group

if TYPE_CHECKING:
    from procflow.agent.state import Emit
    from procflow.agent.structured import OutputSpec

__all__ = ["AgentResponse", "FullOutput", "ModelOutput", "StepRecord", "SuspendedCall",
           "UIMessage"]


@dataclass(slots=True)
class StepRecord:
    """One model call of the agent loop.

    Attributes:
        step_number: 0-based.
        text: The step's text after stream processors.
        tool_calls: ``{"tool_call_id", "tool_name", "args"}`` per call.
        tool_results: ``{"tool_call_id", "tool_name", "result", "is_error"}`` per result.
        finish_reason: Why the model stopped.
        usage: Tokens of this call.
        from_cache: Whether a processor answered from cache.
        model: The model that answered, as ``"provider/model_id"``.
        fallbacks: The models that failed this call before ``model`` answered
            (``FallbackModel``), as ``ModelFallback.to_dict()``.
    """

    step_number: int
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    tool_results: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    from_cache: bool = False
    model: str | None = None
    fallbacks: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class UIMessage:
    """A message as a user interface shows it (hidden signals are left out).

    Attributes:
        id: The message id.
        role: "user", "assistant", "system" or "tool".
        parts: Its parts.
        metadata: ``content.metadata`` (where processors put custom data).
        text: Its text.
    """

    id: str
    role: str
    parts: list[Part]
    metadata: dict[str, Any]
    text: str

    @classmethod
    def from_message(cls, msg: Message) -> UIMessage:
        # One per message of every call: the slots set directly, without the generated
        # frozen __init__'s object.__setattr__ calls (as ``TextDelta`` does).
        content = msg.content
        ui = object.__new__(cls)
        _set_ui_id(ui, msg.id)
        _set_ui_role(ui, msg.role)
        _set_ui_parts(ui, list(content.parts))
        _set_ui_metadata(ui, dict(content.metadata))
        _set_ui_text(ui, msg.text)
        return ui


_set_ui_id = UIMessage.__dict__["id"].__set__
_set_ui_role = UIMessage.__dict__["role"].__set__
_set_ui_parts = UIMessage.__dict__["parts"].__set__
_set_ui_metadata = UIMessage.__dict__["metadata"].__set__
_set_ui_text = UIMessage.__dict__["text"].__set__


@dataclass(frozen=True, slots=True)
class AgentResponse:
    """The response messages of a call.

    Attributes:
        messages: Every response message (assistant and tool), after processors.
        ui_messages: The user-visible messages of the conversation (input and response,
            hidden signals excluded), with their metadata.
        model: The model that gave the last answer, as ``"provider/model_id"``.
        fallbacks: The models that failed a call of this request before another
            answered (``FallbackModel``), with their errors, in order.
    """

    messages: list[Message]
    ui_messages: list[UIMessage]
    model: str | None = None
    fallbacks: list[ModelFallback] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SuspendedCall:
    """A tool call the run is waiting on (an approval, or a tool that suspended).

    Attributes:
        tool_call_id: The call's id (what ``agent.resume(approve=[...])`` takes).
        tool_name: The tool.
        args: The model's arguments.
        payload: What the tool passed to ``ctx.suspend()`` (``None`` for approvals).
    """

    tool_call_id: str
    tool_name: str
    args: dict[str, Any]
    payload: Any = None


@dataclass(frozen=True, slots=True)
class FullOutput(Generic[OutputT]):
    """The result of ``agent.generate()``; ``FullOutput[Model]`` for ``output_type=Model``.

    Attributes:
        text: The final answer's text, after output processors.
        finish_reason: "stop", "length", "tool-calls", "content-filter", "error",
            "other" (a tripwire) or "suspended" (waiting on ``suspended``).
        usage: Tokens summed over the model calls.
        steps: One ``StepRecord`` per model call.
        tool_calls: Every tool call of the run.
        tool_results: Every tool result of the run.
        tripwire: Why a processor aborted (``out.tripwire.reason``), else ``None``.
        messages: The whole conversation after processors (system messages excluded).
        response: The response messages and the UI messages.
        run_id: The stored run of the agent's loop workflow.
        suspended: The tool calls waiting on ``agent.resume(run_id, ...)``.
        output: The answer validated as the ``output_type`` (``None`` without one, or
            when the call ended without an answer: suspended, tripped).
        agent_id: The agent that answered (after a handoff, the agent handed to; its
            run is ``run_id``).
    """

    text: str
    finish_reason: str
    usage: Usage
    steps: list[StepRecord]
    tool_calls: list[ToolCallRecord]
    tool_results: list[ToolResultRecord]
    tripwire: Tripwire | None
    messages: list[Message]
    response: AgentResponse
    run_id: str
    suspended: list[SuspendedCall] = field(default_factory=list)
    output: OutputT | None = None
    agent_id: str | None = None


Producer = Callable[[MemoryObjectSendStream[Chunk]], Awaitable[FullOutput[Any]]]


class ModelOutput(Generic[OutputT]):
    """The result of ``agent.stream()``: chunks as they come, then the final values.

    The run starts when you first iterate ``full_stream`` (or ``text_stream``) or await
    one of the final values. Iterate to the end, or use ``async with`` to be free to
    leave the loop early (the run then finishes without a listener)::

        async with await agent.stream("hi") as out:
            async for chunk in out.full_stream:
                ...

    ``await out.text``, ``out.usage``, ``out.finish_reason`` and ``out.response`` wait
    for the end of the run (reading the rest of the stream if nobody else does) and
    equal what ``generate()`` returns for the same call.

    Any order works: every ``full_stream``, ``text_stream`` or
    ``partial_output_stream`` reads the run's chunks from the first one (the chunks
    read so far are kept and replayed), whether it comes before, after or beside the
    others and the final values. Only once a reader left a stream early (``break``,
    leaving ``async with``) are the chunks after that point gone: a stream read later
    then raises ``RuntimeError`` there, saying to read the final values. They are still
    in the run's stream log: ``agent.stream(resume_from=run_id, after=n)`` reads them.

    With ``output_type``, ``out.partial_output`` is the answer so far (validated
    leniently), ``out.partial_output_stream`` yields it as it grows, and
    ``await out.final_output`` (or ``await out.object``) is the validated answer.
    """

    def __init__(self, producer: Producer, *, buffer: int = 64,
                 output: OutputSpec[Any] | None = None) -> None:
        self._producer = producer
        self._buffer = buffer
        self._started = False
        self._spec = output
        self._answer: list[str] = []  # the current model step's text, with output_type
        self._output: FullOutput[OutputT] | None = None
        self._error: BaseException | None = None
        self._done = anyio.Event()
        self._tg: TaskGroup | None = None
        self._receive: MemoryObjectReceiveStream[Chunk] | None = None
        self._scope: anyio.CancelScope | None = None
        self._chunks: list[Chunk] = []
        """Every chunk received so far: each reader reads from the first."""
        self._ended = False
        """The run's stream ended (every chunk is in ``_chunks``)."""
        self._closed = False
        """The last reader left early: delivery stopped, later chunks are not kept."""
        self._readers = 0
        """Readers that have started and not reached the end."""
        self._pulling: anyio.Lock | None = None

    @property
    def full_stream(self) -> AsyncIterator[Chunk]:
        """Every chunk: text deltas, tool calls and results, data-*, tripwire, finish.

        Each access is a reader of its own from the first chunk (the chunks read
        before are replayed); touching it starts nothing until it is iterated.
        """
        return _Reading(self)

    @property
    def text_stream(self) -> AsyncIterator[str]:
        """Only the text deltas, as strings (from the first, like ``full_stream``)."""
        return self._texts()

    async def _texts(self) -> AsyncIterator[str]:
        async for chunk in self.full_stream:
            if chunk.type == "text-delta":
                yield chunk.text

    def _start(self) -> MemoryObjectSendStream[Chunk]:
        if self._started:
            raise RuntimeError("this stream was already started; use out.full_stream / "
                               "out.text_stream (each reads from the first chunk) or the "
                               "final values (await out.text, ...) instead of async with")
        self._started = True
        send, self._receive = anyio.create_memory_object_stream[Chunk](self._buffer)
        return send

    def _own(self) -> None:
        # Read without ``async with``: the call runs in a task of its own, so a reader
        # that stops early (``break``) leaves no task group open in its task (an async
        # generator must not yield inside one: its finaliser runs in another task).
        send = self._start()
        self._scope = scope = anyio.CancelScope()  # cancelled with a cancelled reader
        _spawn(self._produce_alone, send, scope)

    async def _pull(self, at: int) -> Chunk | None:
        """The chunk at index ``at``, received if nobody has yet; ``None`` at the end.

        Raises:
            RuntimeError: Delivery stopped (a reader left early) before that chunk.
        """
        chunks = self._chunks
        while at >= len(chunks):
            if self._ended:
                return None
            if self._closed:
                raise RuntimeError(
                    "this stream stopped when an earlier reader left it early (break, or "
                    "leaving async with); its later chunks were not kept: read the final "
                    "values instead (await out.text, out.output, ...)")
            if not self._started:
                self._own()
            if self._pulling is None:
                self._pulling = anyio.Lock()
            try:
                await self._receive_one()
            except anyio.get_cancelled_exc_class():
                if self._scope is not None:  # a cancelled reader cancels the call
                    self._scope.cancel()
                    with anyio.CancelScope(shield=True):  # as a task group would
                        await self._done.wait()
                    self._closed = True
                    if self._receive is not None:
                        self._receive.close()
                raise
        return chunks[at]

    async def _receive_one(self) -> None:
        """Receive the next chunk into ``_chunks`` unless another reader did while this
        one waited for its turn."""
        assert self._pulling is not None and self._receive is not None
        seen = len(self._chunks)
        if not self._pulling.locked():  # a chunk already sent is taken without a wait
            try:
                self._chunks.append(self._receive.receive_nowait())
                return
            except anyio.WouldBlock:
                pass
            except anyio.EndOfStream:
                self._ended = True
                self._receive.close()
                return
            except anyio.ClosedResourceError:
                self._closed = True
                return
        async with self._pulling:  # one reader receives; the others read the list
            if len(self._chunks) > seen or self._ended or self._closed:
                return
            try:
                self._chunks.append(await self._receive.receive())
            except anyio.EndOfStream:
                self._ended = True
                self._receive.close()
            except anyio.ClosedResourceError:  # stopped while this reader waited
                self._closed = True

    def _left(self) -> None:
        """A reader was dropped before the end: when it was the last one, stop delivery
        (the call finishes on its own, as after ``async with``; inside ``async with``,
        leaving it does that)."""
        self._readers -= 1
        if (self._readers == 0 and not self._ended and self._receive is not None
                and self._tg is None):
            self._closed = True
            self._receive.close()  # synchronous: safe wherever the reader is collected

    async def _produce_alone(self, send: MemoryObjectSendStream[Chunk],
                             scope: anyio.CancelScope) -> None:
        with scope:
            await self._produce(send)

    async def _produce(self, send: MemoryObjectSendStream[Chunk]) -> None:
        async with send:
            try:
                self._output = await self._producer(send)
            except Exception as exc:
                self._error = exc
            finally:
                self._done.set()

    def watch(self, emit: Emit) -> Emit:
        """``emit`` that also keeps the current step's text, for ``partial_output``."""
        if self._spec is None:
            return emit
        answer = self._answer

        async def watching(chunk: Chunk) -> None:
            kind = chunk.type
            if kind == "text-delta":
                answer.append(chunk.text)
            elif kind == "step-start":
                answer.clear()
            await emit(chunk)
        return watching

    @property
    def partial_output(self) -> OutputT | None:
        """The structured answer so far, validated leniently (an unfinished last string
        or list item is allowed); ``None`` until it validates, or without ``output_type``."""
        if self._spec is None:
            return None
        value: OutputT | None = self._spec.partial("".join(self._answer))
        return value

    @property
    def partial_output_stream(self) -> AsyncIterator[OutputT]:
        """Each new partial answer as text arrives (reads ``full_stream``)."""
        return self._partials()

    async def _partials(self) -> AsyncIterator[OutputT]:
        last: Any = None
        async for chunk in self.full_stream:
            if chunk.type != "text-delta":
                continue
            value = self.partial_output
            if value is not None and value != last:
                last = value
                yield value

    @property
    def final_output(self) -> Awaitable[OutputT | None]:
        """The validated structured answer (``FullOutput.output``)."""
        return self._field(lambda o: o.output)

    @property
    def object(self) -> Awaitable[OutputT | None]:
        """The validated structured answer: ``final_output`` under Mastra's name."""
        return self.final_output

    async def _final(self) -> FullOutput[OutputT]:
        # Read the rest of the stream (kept for later readers): a run nobody reads
        # would otherwise wait for room in the buffer forever.
        at = 0
        try:
            while await self._pull(at) is not None:
                at += 1
        except RuntimeError:
            if not self._closed:
                raise
        await self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._output is not None
        return self._output

    @property
    def text(self) -> Awaitable[str]:
        """The final text (after output processors)."""
        return self._field(lambda o: o.text)

    @property
    def usage(self) -> Awaitable[Usage]:
        """Tokens summed over the run."""
        return self._field(lambda o: o.usage)

    @property
    def finish_reason(self) -> Awaitable[str]:
        """Why the run finished."""
        return self._field(lambda o: o.finish_reason)

    @property
    def response(self) -> Awaitable[AgentResponse]:
        """The response messages and UI messages."""
        return self._field(lambda o: o.response)

    @property
    def output(self) -> Awaitable[FullOutput[OutputT]]:
        """Everything ``generate()`` would have returned."""
        return self._final()

    async def _field(self, pick: Callable[[FullOutput[OutputT]], Any]) -> Any:
        return pick(await self._final())

    async def __aenter__(self) -> ModelOutput[OutputT]:
        send = self._start()
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._produce, send)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        assert self._tg is not None and self._receive is not None
        if not self._ended:  # leaving early stops delivery; the run finishes on its own
            self._closed = True
            self._receive.close()
        await close_task_group(self._tg, exc_type, exc, tb)


class _Reading:
    """One reader of a ``ModelOutput``'s chunks, from the first (``full_stream``).

    A plain async iterator, not a generator: a reader that stops early (``break``)
    leaves nothing to finalise, and dropping the last reader stops delivery (the call
    finishes on its own, as after ``async with``); a reader cancelled while it waits
    for a chunk cancels the call too (its run is stored as "canceled")."""

    __slots__ = ("_at", "_out", "_reading")

    def __init__(self, out: ModelOutput[Any]) -> None:
        self._out = out
        self._at = 0
        self._reading = False

    def __aiter__(self) -> _Reading:
        return self

    async def __anext__(self) -> Chunk:
        out = self._out
        if not self._reading:
            self._reading = True
            out._readers += 1
        try:
            chunk = await out._pull(self._at)
        except BaseException:
            self._stop()
            raise
        if chunk is None:
            self._stop()
            raise StopAsyncIteration
        self._at += 1
        return chunk

    def _stop(self) -> None:
        if self._reading:
            self._reading = False
            self._out._readers -= 1

    def __del__(self) -> None:
        if self._reading:
            self._reading = False
            self._out._left()


_BACKGROUND: set[Any] = set()  # strong references to running calls (asyncio)


def _spawn(fn: Callable[[MemoryObjectSendStream[Chunk], anyio.CancelScope],
                        Coroutine[Any, Any, None]],
           send: MemoryObjectSendStream[Chunk], scope: anyio.CancelScope) -> None:
    """Run ``fn(send, scope)`` in a new task not bound to the caller's (with the
    caller's context variables); its errors are caught by ``fn`` itself (``_produce``)."""
    if sniffio.current_async_library() == "trio":
        import trio

        trio.lowlevel.spawn_system_task(fn, send, scope, context=contextvars.copy_context())
        return
    import asyncio  # noqa: TID251 - anyio has no task outside a task group

    task = asyncio.get_running_loop().create_task(fn(send, scope))
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)


async def _replayed(chunks: list[Chunk]) -> AsyncIterator[Chunk]:
    for chunk in chunks:
        yield chunk
