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
from typing import TYPE_CHECKING, Any, TypeAlias

from procflow.errors import ProcessorError, TripwireError
from procflow.messages import Chunk, DataChunk, Finish, MessageList, Start, TextDelta
from procflow.processors._call import span_name, stream_bad_return, stream_hook_failed
from procflow.processors._compile import ForkNode, MapNode
from procflow.processors._fork import ForkStage, MapStage, flat
from procflow.processors._hooks import TABLE
from procflow.processors.args import ProcessorContext, ProcessorViolation, ProcessOutputStreamArgs

if TYPE_CHECKING:
    from procflow.processors._compile import StreamNode
    from procflow.processors.base import Processor

__all__ = ["WINDOW_CONTEXT", "Stage", "StreamPipeline", "Window"]

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


Stage: TypeAlias = tuple["Processor", Callable[[Any], Any], bool, bool,
                         ProcessOutputStreamArgs, Callable[[Chunk], None], "Window | None"]
"""One stream processor of one model call: ``(processor, hook, is_async, data_parts,
args, append, window)``.

``data_parts``: whether it sees custom "data-*" chunks; ``args``: kept for the whole
stream, only its ``part`` changes; ``append``: appends to ``args.stream_parts``;
``window``: the held text of a ``stream_window`` processor. A plain tuple, not a named
one: CPython specializes unpacking an exact tuple, which the per-chunk loop does for
every stage (a named tuple cost it a third more per stage).
"""


def _stage(p: Processor, ml: MessageList | None, ctx: ProcessorContext) -> Stage:
    # The retry count cannot change while one model call streams: set it once.
    # (positional: message_list, state, retry_count, request_context, writer, processor,
    # context, part, stream_parts)
    parts: list[Chunk] = []
    args = ProcessOutputStreamArgs(ml, ctx.state_for(p.id), ctx.retry_count,
                                   ctx.request_context, ctx.writer_for(p), p, ctx, _START, parts)
    return (p, getattr(p, _HOOK), p.hook_is_async(_HOOK), p.process_data_parts, args,
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

    __slots__ = ("_ctx", "_ml", "_origins", "_stages", "tripwire")

    def __init__(self, processors: Sequence[Processor | StreamNode], ctx: ProcessorContext,
                 message_list: MessageList | None = None,
                 origins: Sequence[int] | None = None) -> None:
        self._ctx = ctx
        self._ml = message_list
        self.tripwire: TripwireError | None = None
        if origins is None:
            self._stages = self.stages_of(processors)
            self._origins: list[int] = list(range(len(self._stages)))
            return
        self._stages, self._origins = [], []
        for item, origin in zip(processors, origins, strict=True):
            stages = self.stages_of([item])
            self._stages += stages
            self._origins += [origin] * len(stages)

    def after(self, origin: int) -> list[Stage]:
        """The stages of the processors placed after array position ``origin`` (where
        the custom chunks that processor writes go)."""
        return [s for s, o in zip(self._stages, self._origins, strict=True) if o > origin]

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

    @property
    def counts(self) -> dict[str, int]:
        return {s[0].id: len(s[4].stream_parts) for s in flat(self._stages)}

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
        for p, _, _, _, args, _, _ in flat(self._stages):
            pid = p.id
            chunks = len(args.stream_parts)
            counted = attributes.get(chunks)
            if counted is None:
                counted = attributes[chunks] = {"chunks": chunks}
            tracer.leaf(span_name(pid, _STREAM), "processor", parent, started,
                        "tripwire" if pid == tripped_id else "success", counted, ended)

    async def finish(self) -> list[Chunk]:
        """The end of a model call that sent no "finish" chunk: a finish goes through
        the stages so that each releases what it holds (the caller drops the finish)."""
        return await self.process(Finish(None))

    async def process(self, part: Chunk, stages: list[Stage] | None = None,
                      released: bool = False) -> list[Chunk]:
        """The chunks to emit for one incoming chunk; a "tripwire" chunk ends the stream.

        The one loop every chunk takes (the agent's model call and a fork's lanes too).

        Args:
            part: The chunk.
            stages: The stages to run it through (a fork's lane, the stages after one),
                else the pipeline's.
            released: ``part`` is text the window of the first stage just let go.

        Raises:
            ProcessorError: A hook raised something other than a TripwireError, or returned
                something other than a chunk, a list of chunks or ``None``.
        """
        if self.tripwire is not None:
            return []
        is_data = isinstance(part, DataChunk)
        for stage in self._stages if stages is None else stages:
            p, fn, is_async, data_parts, args, append, window = stage
            if window is not None:
                if released:
                    released = False
                elif isinstance(part, TextDelta):
                    window.add(p, part)
                    got = window.take(p, args, flush=False)
                    if got is None:
                        return []
                    part = got
                elif window.held:
                    # Text held back leaves before anything that follows it.
                    got = window.take(p, args, flush=True)
                    assert got is not None
                    rest = self._from(stages, stage)
                    head = await self.process(got, rest, True)
                    if self.tripwire is not None:
                        return head
                    return head + await self.process(part, rest)
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
            return await self._released(self._from(stages, stage)[1:], p, out)
        return [part]

    def _from(self, stages: list[Stage] | None, stage: Stage) -> list[Stage]:
        """``stage`` and the stages after it (of ``stages``, else the pipeline's); found
        by identity, off the hot path."""
        lane = self._stages if stages is None else stages
        return lane[next(i for i, s in enumerate(lane) if s is stage):]

    async def _released(self, later: list[Stage], p: Processor, out: Any) -> list[Chunk]:
        """A stage (processor ``p``) returned ``out``, neither its chunk, ``None`` nor one
        chunk: a list of chunks goes on through the ``later`` stages."""
        if isinstance(out, list) and all(isinstance(c, Chunk) for c in out):
            if self.tripwire is not None:  # a fork's lane tripped: its tripwire chunk
                return out
            emitted: list[Chunk] = []
            for item in out:
                emitted += await self.process(item, later)
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

