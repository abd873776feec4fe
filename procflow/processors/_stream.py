"""The output-stream fast path: chunks through ``process_output_stream`` hooks, in process.

No persistence, no planning and no tracing per chunk: each stage keeps one args
object for the whole stream and only its ``part`` changes; appending to the stage's
``stream_parts`` is all the bookkeeping. A hook may return the chunk (changed or not),
``None`` to drop it, or a list of chunks (a batcher releasing what it held).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from procflow.errors import ProcessorError, TripWire
from procflow.messages import Chunk, MessageList
from procflow.processors._call import span_name
from procflow.processors._hooks import TABLE
from procflow.processors.args import ProcessorContext, ProcessorViolation, ProcessOutputStreamArgs

if TYPE_CHECKING:
    from procflow.processors.base import Processor

__all__ = ["Stage", "StreamPipeline"]

_STREAM = TABLE["process_output_stream"]
_HOOK = _STREAM.name
_START = Chunk("start")


@dataclass(slots=True)
class Stage:
    """One stream processor of one model call.

    Attributes:
        processor: The processor.
        hook: Its bound ``process_output_stream``.
        is_async: Whether the hook must be awaited.
        data_parts: Whether it sees custom "data-*" chunks.
        args: Kept for the whole stream; only ``part`` changes, and every chunk it saw
            is appended to ``args.stream_parts``.
    """

    processor: Processor
    hook: Callable[[Any], Any]
    is_async: bool
    data_parts: bool
    args: ProcessOutputStreamArgs

    def plan(self) -> _Step:
        """The stage as the per-chunk loop runs it (see ``_Step``)."""
        return (self, self.hook, self.is_async, self.data_parts, self.args,
                self.args.stream_parts.append)


_Step = tuple[Stage, Callable[[Any], Any], bool, bool, ProcessOutputStreamArgs,
              Callable[[Chunk], None]]
"""A ``Stage`` flattened for the per-chunk loop: (stage, hook, is_async, data_parts, args,
append to ``args.stream_parts``). An exact tuple because the loop unpacks one per stream
processor per chunk, and unpacking a tuple is several times cheaper than reading the
same fields as attributes."""


def _stage(p: Processor, ml: MessageList | None, ctx: ProcessorContext) -> Stage:
    # The retry count cannot change while one model call streams: set it once.
    # (positional: message_list, state, retry_count, request_context, writer, processor,
    # context, part, stream_parts)
    args = ProcessOutputStreamArgs(ml, ctx.state_for(p.id), ctx.retry_count,
                                   ctx.request_context, ctx.writer, p, ctx, _START, [])
    return Stage(p, getattr(p, _HOOK), p.hook_is_async(_HOOK), p.process_data_parts, args)


class StreamPipeline:
    """Runs each chunk through the stream hooks of a processor array, in order.

    Attributes:
        tripwire: The abort that stopped the stream, once one did.
        counts: Processor id -> chunks it saw (the only per-chunk bookkeeping).
    """

    __slots__ = ("_ctx", "_plan", "_stages", "tripwire")

    def __init__(self, processors: Sequence[Processor], ctx: ProcessorContext,
                 message_list: MessageList | None = None) -> None:
        self._ctx = ctx
        self._stages = [_stage(p, message_list, ctx) for p in processors
                         if _HOOK in p.implemented_hooks()]
        self._plan = [stage.plan() for stage in self._stages]
        self.tripwire: TripWire | None = None

    @property
    def empty(self) -> bool:
        """Whether no processor has a stream hook (chunks pass straight through)."""
        return not self._stages

    @property
    def counts(self) -> dict[str, int]:
        return {s.processor.id: len(s.args.stream_parts) for s in self._stages}

    def record_spans(self, started: float) -> None:
        """One span per stream processor for this stream (not one per chunk), with its
        chunk count, in the context's trace."""
        tracer = self._ctx.tracer
        if tracer is None or not self._stages:
            return
        parent = self._ctx.span
        tripped_id = None if self.tripwire is None else self.tripwire.processor_id
        ended = time.time()
        for stage in self._stages:
            pid = stage.processor.id
            tracer.leaf(span_name(pid, _STREAM), "processor", parent, started,
                        "tripwire" if pid == tripped_id else "success",
                        {"chunks": len(stage.args.stream_parts)}, ended)

    async def process(self, chunk: Chunk) -> list[Chunk]:
        """The chunks to emit for one incoming chunk; a "tripwire" chunk ends the stream.

        Raises:
            ProcessorError: A hook raised something other than a TripWire, or returned
                something other than a chunk, a list of chunks or ``None``.
        """
        if self.tripwire is not None:
            return []
        return await self._from(chunk)

    async def _from(self, part: Chunk, start: int = 0) -> list[Chunk]:
        """Run ``part`` through the stages from ``start`` on (one chunk at a time)."""
        plan = self._plan if start == 0 else self._plan[start:]
        is_data = part.type.startswith("data-")
        for step in plan:
            stage, fn, is_async, data_parts, args, append = step
            if is_data and not data_parts:
                continue
            args.part = part
            append(part)
            try:
                out = fn(args)
                if is_async:
                    out = await out
            except TripWire as trip:
                return [self._tripped(stage.processor, trip)]
            except ProcessorError:
                raise
            except Exception as exc:
                pid = stage.processor.id
                raise ProcessorError(f"processor '{pid}': {_HOOK}() raised "
                                     f"{type(exc).__name__}: {exc}", processor_id=pid,
                                     hook=_HOOK) from exc
            if out is part:
                continue
            if out is None:
                return []
            if isinstance(out, Chunk):
                part = out
                is_data = part.type.startswith("data-")
                continue
            if isinstance(out, list) and all(isinstance(c, Chunk) for c in out):
                index = next(i for i, s in enumerate(self._plan) if s is step)
                emitted: list[Chunk] = []
                for item in out:
                    emitted += await self._from(item, index + 1)
                    if self.tripwire is not None:
                        break
                return emitted
            pid = stage.processor.id
            raise ProcessorError(
                f"processor '{pid}': {_HOOK}() returned {type(out).__name__}; expected a "
                "Chunk, a list of chunks, or None to drop the chunk", processor_id=pid,
                hook=_HOOK)
        return [part]

    def _tripped(self, p: Processor, trip: TripWire) -> Chunk:
        if trip.processor_id is None:
            trip.processor_id = p.id
        p.report_violation(ProcessorViolation(p.id, trip.reason, dict(trip.metadata)),
                           self._ctx)
        self.tripwire = trip
        return Chunk.tripwire(trip.reason, trip.processor_id, trip.retry, trip.metadata)
