"""The output-stream fast path: chunks through ``process_output_stream`` hooks, in process.

No persistence, no planning and no tracing per chunk: each stage keeps one args
object for the whole stream and only its ``part`` changes; appending to the stage's
``stream_parts`` is all the bookkeeping. A hook may return the chunk (changed or not),
``None`` to drop it, or a list of chunks (a batcher releasing what it held).

A processor workflow arrives compiled (``_compile``): its processors are stages like
any other, and its ``parallel``/``branch``/``map`` are stages whose lanes are stage
lists of their own (``_fork``), run by the same loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from procflow.errors import ProcessorError, TripwireError
from procflow.messages import Chunk, DataChunk, Finish, MessageList, Start, TextDelta
from procflow.processors._call import span_name, stream_bad_return, stream_hook_failed
from procflow.processors._compile import ForkNode, MapNode
from procflow.processors._fork import CompositeStage, ForkStage, MapStage
from procflow.processors._hooks import TABLE
from procflow.processors.args import ProcessorContext, ProcessorViolation, ProcessOutputStreamArgs

if TYPE_CHECKING:
    from procflow.processors._compile import StreamNode
    from procflow.processors.base import Processor

__all__ = ["WINDOW_CONTEXT", "PlainStage", "Stage", "StreamPipeline", "Window"]

_STREAM = TABLE["process_output_stream"]
_HOOK = _STREAM.name
_START = Start()


WINDOW_CONTEXT = 256
"""How much already-released raw text a windowed processor gets as ``text_before``."""


class Window:
    """The text a ``stream_window`` processor has not been shown yet, and its context."""

    __slots__ = ("before", "held", "metadata")

    def __init__(self) -> None:
        self.held = ""
        self.before = ""
        self.metadata: Mapping[str, Any] | None = None

    def add(self, p: Processor, part: Chunk) -> None:
        self.held += part.text
        self.metadata = part.metadata

    def take(self, p: Processor, args: ProcessOutputStreamArgs, *, flush: bool) -> Chunk | None:
        """The segment to show the processor now (all held text when ``flush``), with
        ``args.text_before``/``text_after`` set; ``None`` while all of it must wait."""
        held = self.held
        if not held:
            return None
        keep = 0
        if not flush and len(held) <= p.stream_window_limit:
            keep = p.hold_back(held)
            if not isinstance(keep, int) or isinstance(keep, bool) or keep < 0:
                raise ProcessorError(f"processor '{p.id}': hold_back() returned {keep!r}; "
                                     "expected an int >= 0", processor_id=p.id,
                                     hook="hold_back")
        cut = max(len(held) - keep, 0)
        if cut == 0:
            return None
        segment, self.held = held[:cut], held[cut:]
        args.text_before = self.before
        args.text_after = self.held
        self.before = (self.before + segment)[-WINDOW_CONTEXT:]
        return TextDelta(segment, self.metadata)


class Stage(NamedTuple):
    """One stream processor of one model call: what running a chunk through it needs.

    A named tuple, so the per-chunk loop unpacks it as fast as a plain tuple.
    """

    processor: Processor
    hook: Callable[[Any], Any]
    is_async: bool
    data_parts: bool
    """Whether it sees custom "data-*" chunks."""
    args: ProcessOutputStreamArgs
    """Kept for the whole stream; only ``part`` changes."""
    append: Callable[[Chunk], None]
    """Appends to ``args.stream_parts``."""
    window: Window | None
    """The held text of a ``stream_window`` processor."""


PlainStage = tuple[Any, Callable[[Any], Any], bool, ProcessOutputStreamArgs,
                   Callable[[Chunk], None]]
"""A stage of a pipeline with no window: (processor, hook, is_async, args, append)."""


def _stage(p: Processor, ml: MessageList | None, ctx: ProcessorContext) -> Stage:
    # The retry count cannot change while one model call streams: set it once.
    # (positional: message_list, state, retry_count, request_context, writer, processor,
    # context, part, stream_parts)
    parts: list[Chunk] = []
    args = ProcessOutputStreamArgs(ml, ctx.state_for(p.id), ctx.retry_count,
                                   ctx.request_context, ctx.writer, p, ctx, _START, parts)
    return Stage(p, getattr(p, _HOOK), p.hook_is_async(_HOOK), p.process_data_parts, args,
                 parts.append, Window() if p.stream_window else None)


class StreamPipeline:
    """Runs each chunk through the stream hooks of a processor array, in order.

    Args:
        processors: Processors, and the nodes of compiled processor workflows
            (``compile_stream``), in order.
        ctx: The request's processor context.
        message_list: The live message list the hooks see.

    Attributes:
        tripwire: The abort that stopped the stream, once one did.
        counts: Processor id -> chunks it saw (the only per-chunk bookkeeping).
    """

    __slots__ = ("_ctx", "_ml", "_plain", "_stages", "tripwire")

    def __init__(self, processors: Sequence[Processor | StreamNode], ctx: ProcessorContext,
                 message_list: MessageList | None = None) -> None:
        self._ctx = ctx
        self._ml = message_list
        self.tripwire: TripwireError | None = None
        self._stages = stages = self.stages_of(processors)
        # What ``process`` needs of each stage when none holds a window (the usual case).
        plain: list[PlainStage] = []
        for p, hook, is_async, _, args, append, window in stages:
            if window is not None:
                break
            plain.append((p, hook, is_async, args, append))
        self._plain = plain if len(plain) == len(stages) else None

    @property
    def context(self) -> ProcessorContext:
        """The request's processor context."""
        return self._ctx

    def stages_of(self, items: Sequence[Processor | StreamNode]) -> list[Stage]:
        """The stages for processors and compiled workflow nodes (fork and map stages
        take their lanes' stages from here too)."""
        stages: list[Stage] = []
        for item in items:
            if isinstance(item, ForkNode):
                stages.append(_stage(ForkStage(item, self), self._ml, self._ctx))
            elif isinstance(item, MapNode):
                stages.append(_stage(MapStage(item, self), self._ml, self._ctx))
            elif _HOOK in item.implemented_hooks():
                stages.append(_stage(item, self._ml, self._ctx))
        return stages

    @property
    def empty(self) -> bool:
        """Whether no processor has a stream hook (chunks pass straight through)."""
        return not self._stages

    def _processor_stages(self) -> list[Stage]:
        out: list[Stage] = []
        for s in self._stages:
            if isinstance(s.processor, CompositeStage):
                out += s.processor.stages()
            else:
                out.append(s)
        return out

    @property
    def counts(self) -> dict[str, int]:
        return {s.processor.id: len(s.args.stream_parts) for s in self._processor_stages()}

    def record_spans(self, started: float) -> None:
        """One span per stream processor for this stream (not one per chunk), with its
        chunk count, in the context's trace (processors inside a processor workflow's
        parallel or branch included; the workflow itself runs no steps, so has none)."""
        tracer = self._ctx.tracer
        if tracer is None or not self._stages:
            return
        parent = self._ctx.span
        tripped_id = None if self.tripwire is None else self.tripwire.processor_id
        ended = time.time()
        # Processors that saw the same number of chunks (usually all) share one
        # attributes dict: the trace is stored, and leaves are never changed.
        attributes: dict[int, dict[str, Any]] = {}
        for stage in self._processor_stages():
            pid = stage.processor.id
            chunks = len(stage.args.stream_parts)
            counted = attributes.get(chunks)
            if counted is None:
                counted = attributes[chunks] = {"chunks": chunks}
            tracer.leaf(span_name(pid, _STREAM), "processor", parent, started,
                        "tripwire" if pid == tripped_id else "success", counted, ended)

    async def process(self, chunk: Chunk) -> list[Chunk]:
        """The chunks to emit for one incoming chunk; a "tripwire" chunk ends the stream.

        Raises:
            ProcessorError: A hook raised something other than a TripwireError, or returned
                something other than a chunk, a list of chunks or ``None``.
        """
        if self.tripwire is not None:
            return []
        # ``run`` from the first stage, inlined for the common case (no coroutine of its
        # own per chunk, no window or data-part checks per stage): a chunk that is not
        # "data-*" through stages none of which holds a window. Anything else (a data
        # chunk made, a list returned) hands over to ``run``.
        plain = self._plain
        if plain is None or isinstance(chunk, DataChunk):
            return await self.run(self._stages, chunk)
        part = chunk
        for p, fn, is_async, args, append in plain:  # (the agent loop inlines this loop)
            args.part = part
            append(part)
            try:
                out = fn(args)
                if is_async:
                    out = await out
            except Exception as exc:
                return [self.failed(p, exc)]
            if out is part:
                continue
            if out is None:
                return []
            if isinstance(out, Chunk) and not isinstance(out, DataChunk):
                part = out
                continue
            return await self.after(args, p, out)
        return [part]

    @property
    def plain(self) -> list[PlainStage] | None:
        """The stages as ``(processor, hook, is_async, args, append)``, for a caller
        running a chunk that is not "data-*" through them itself, as ``process`` does
        (``failed`` and ``after`` for what is not a chunk passed on); ``None`` when a
        stage holds a window (``process`` then)."""
        return self._plain

    def failed(self, p: Processor, exc: Exception) -> Chunk:
        """The chunk for a stream hook of ``p`` that raised ``exc``: a TripwireError's tripwire
        chunk (the stream is over).

        Raises:
            ProcessorError: ``exc`` was not a TripwireError (the original is the cause).
        """
        if isinstance(exc, TripwireError):
            return self.tripped(p, exc)
        if isinstance(exc, ProcessorError):
            raise exc
        raise stream_hook_failed(p.id, exc) from exc

    async def after(self, args: ProcessOutputStreamArgs, p: Processor,
                    out: Any) -> list[Chunk]:
        """The chunks for the stage with ``args`` (processor ``p``) returning ``out``, a
        "data-*" chunk or a list of chunks: through the stages after it."""
        stages = self._stages
        i = next(i for i, stage in enumerate(stages) if stage.args is args)
        if isinstance(out, Chunk):  # a data chunk: the later stages decide on it
            return await self.run(stages, out, i + 1)
        return await self._released(stages, i, p, out)

    async def finish(self) -> list[Chunk]:
        """The end of a model call that sent no "finish" chunk: a finish goes through
        the stages so that each releases what it holds (the caller drops the finish)."""
        return await self.process(Finish(None))

    async def run(self, stages: list[Stage], part: Chunk, start: int = 0,
                  released: bool = False) -> list[Chunk]:
        """Run ``part`` through ``stages`` from ``start`` on (one chunk at a time);
        ``released``: ``part`` is text the first stage's window just let go."""
        is_data = isinstance(part, DataChunk)
        i = start - 1
        for stage in stages if start == 0 else stages[start:]:
            i += 1
            p, fn, is_async, data_parts, args, append, window = stage
            if window is not None and not released:
                if isinstance(part, TextDelta):
                    window.add(p, part)
                    got = window.take(p, args, flush=False)
                    if got is None:
                        return []
                    part = got
                elif window.held:
                    # Text held back leaves before anything that follows it.
                    got = window.take(p, args, flush=True)
                    assert got is not None
                    head = await self.run(stages, got, i, True)
                    if self.tripwire is not None:
                        return head
                    return head + await self.run(stages, part, i)
            released = False
            if is_data and not data_parts:
                continue
            args.part = part
            append(part)
            try:
                out = fn(args)
                if is_async:
                    out = await out
            except TripwireError as trip:
                return [self.tripped(p, trip)]
            except ProcessorError:
                raise
            except Exception as exc:
                raise stream_hook_failed(p.id, exc) from exc
            if out is part:
                continue
            if out is None:
                return []
            if isinstance(out, Chunk):
                part = out
                is_data = isinstance(part, DataChunk)
                continue
            return await self._released(stages, i, p, out)
        return [part]

    async def _released(self, stages: list[Stage], i: int, p: Processor,
                        out: Any) -> list[Chunk]:
        """Stage ``i`` (processor ``p``) returned ``out``, neither its chunk, ``None`` nor
        one chunk: a list of chunks goes on through the stages after it."""
        if isinstance(out, list) and all(isinstance(c, Chunk) for c in out):
            if self.tripwire is not None:  # a fork's lane tripped: its tripwire chunk
                return out
            emitted: list[Chunk] = []
            for item in out:
                emitted += await self.run(stages, item, i + 1)
                if self.tripwire is not None:
                    break
            return emitted
        raise stream_bad_return(p.id, out)

    def tripped(self, p: Processor, trip: TripwireError) -> Chunk:
        """Record the abort of ``p`` (stream over, violation reported): its chunk."""
        if trip.processor_id is None:
            trip.processor_id = p.id
        p.report_violation(ProcessorViolation(p.id, trip.reason, dict(trip.metadata)),
                           self._ctx)
        self.tripwire = trip
        return Chunk.tripwire(trip.reason, trip.processor_id, trip.retry, trip.metadata)
