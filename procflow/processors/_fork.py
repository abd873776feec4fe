"""Fork and map stages: a compiled processor workflow's ``parallel``/``branch``/``map``
on the stream (see ``_compile``), run in process by ``StreamPipeline``.

Each is a stage like any processor's (its hook takes the chunk and returns what to
emit), so the pipeline's per-chunk loop needs no case of its own. The lanes of a fork
run one after another for each chunk, in the order listed: a stream hook handles one
chunk, and the merge is deterministic whatever the lanes' timing.
"""

from __future__ import annotations

import difflib
import inspect
from typing import TYPE_CHECKING, Any

from procflow.errors import ProcessorError
from procflow.messages import Chunk
from procflow.processors._compile import ForkNode, MapNode
from procflow.processors.base import Processor

if TYPE_CHECKING:
    from procflow.context import RequestContext
    from procflow.processors._stream import Stage, StreamPipeline
    from procflow.processors.args import ProcessOutputStreamArgs

__all__ = ["CompositeStage", "ForkStage", "MapStage", "StreamStepContext", "flat"]


class StreamStepContext:
    """What a branch condition or a map function sees on the stream, for one chunk:
    the step-context fields that make sense without a workflow run.

    Attributes:
        input_data: The chunk's ``ProcessorStepSchema`` envelope (for a map after a
            fork: the dict of lane id -> envelope).
        request_context: The request's context.
        retry_count: The processor retry count of the model call.
        step_id: The map's id or the lane's step id.
        workflow_id: The processor workflow's id.
        state: An empty dict (a stream has no workflow state).
    """

    __slots__ = ("input_data", "request_context", "retry_count", "state", "step_id",
                 "workflow_id")

    def __init__(self, input_data: Any, request_context: RequestContext, retry_count: int,
                 step_id: str, workflow_id: str) -> None:
        self.input_data = input_data
        self.request_context = request_context
        self.retry_count = retry_count
        self.step_id = step_id
        self.workflow_id = workflow_id
        self.state: dict[str, Any] = {}

    def get_init_data(self) -> Any:
        """The chunk's envelope (what the workflow would have been started with)."""
        return self.input_data


def _envelope(part: Chunk | None, args: ProcessOutputStreamArgs) -> Any:
    from procflow.processors.step import ProcessorStepSchema

    return ProcessorStepSchema.model_construct(
        phase="output_stream", part=part, stream_parts=args.stream_parts[:-1],
        message_list=args.message_list, retry_count=args.retry_count)


async def _call(fn: Any, ctx: StreamStepContext, what: str) -> Any:
    try:
        out = fn(ctx)
        if inspect.isawaitable(out):
            out = await out
    except ProcessorError:
        raise
    except Exception as exc:
        raise ProcessorError(f"processor workflow '{ctx.workflow_id}': {what} raised "
                             f"{type(exc).__name__}: {exc}", processor_id=ctx.workflow_id,
                             hook="process_output_stream") from exc
    return out


def _part_of(out: Any, workflow_id: str, map_id: str) -> Chunk | None:
    from procflow.processors.step import ProcessorStepSchema

    if not isinstance(out, ProcessorStepSchema):
        raise ProcessorError(
            f"processor workflow '{workflow_id}': map '{map_id}' returned "
            f"{type(out).__name__}; it must return the ProcessorStepSchema envelope (did a "
            ".map() forget to pick a branch? merge_processor_results joins them all)",
            processor_id=workflow_id)
    return out.part


class CompositeStage(Processor):
    """A stage made of other stages (or of none): not a processor of its own, so it
    has no span; its processors' stages have theirs."""

    def stages(self) -> list[Stage]:
        """The processor stages inside, depth first."""
        return []

    def holds(self) -> bool:
        """Whether text given to it has not come out yet."""
        return False


class MapStage(CompositeStage):
    """``.map(fn)`` on the stream: ``fn`` of the chunk's envelope; its ``part`` goes on."""

    def __init__(self, node: MapNode, pipe: StreamPipeline) -> None:
        self.id = node.workflow_id
        self._node = node
        self._rc = pipe.context.request_context
        self.process_data_parts = True

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        node = self._node
        ctx = StreamStepContext(_envelope(args.part, args), self._rc, args.retry_count,
                                node.map_id, node.workflow_id)
        out = await _call(node.fn, ctx, f"map '{node.map_id}'")
        return _part_of(out, node.workflow_id, node.map_id)


class ForkStage(CompositeStage):
    """``.parallel``/``.branch`` then ``.map`` on the stream (rules: ``ForkNode``)."""

    def __init__(self, node: ForkNode, pipe: StreamPipeline) -> None:
        self.id = node.workflow_id
        self._node = node
        self._pipe = pipe
        self._rc = pipe.context.request_context
        self._lanes = [pipe.stages_of(lane.nodes) for lane in node.lanes]
        self._conditions = [lane.condition for lane in node.lanes]
        self.process_data_parts = node.merge is not None or node.kind == "branch" or any(
            data_parts for lane in self._lanes for _, _, _, data_parts, _, _, _ in lane)
        self._base = ""
        """Original text given to the lanes and not emitted yet."""
        self._outs = ["" for _ in node.lanes]
        """Each lane's text out, not emitted yet."""
        self._consumed = [0 for _ in node.lanes]
        """How much of ``_base`` each lane's ``_outs`` stands for."""
        self._windows = [lane[0][6] if len(lane) == 1 else None  # a lone stage's window
                         for lane in self._lanes]

    def stages(self) -> list[Stage]:
        return [s for lane in self._lanes for s in flat(lane)]

    def holds(self) -> bool:
        return bool(self._base)

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        part = args.part
        pipe = self._pipe
        outs: list[list[Chunk] | None] = []
        identity = not self._base
        ran = False
        for k, stages in enumerate(self._lanes):
            cond = self._conditions[k]
            if cond is not None and not await self._holds(k, cond, args):
                outs.append(None)
                continue
            ran = True
            out = await pipe.process(part, stages)
            if pipe.tripwire is not None:
                return out[-1:]  # the tripwire chunk; the other lanes' text is not shown
            if identity and (len(out) != 1 or out[0] is not part):
                identity = False
            outs.append(out)
        if self._node.merge is not None:
            return await self._map(outs, args)
        if not ran:
            raise ProcessorError(
                f"processor workflow '{self.id}': no branch() condition held for a "
                f"{part.type!r} chunk, so merge_processor_results has nothing to merge; add "
                "(lambda ctx: True, step) as the last pair", processor_id=self.id)
        if identity:
            return part
        return self._merge(part, outs)

    async def _holds(self, k: int, cond: Any, args: ProcessOutputStreamArgs) -> bool:
        lane_id = self._node.lanes[k].id
        ctx = StreamStepContext(_envelope(args.part, args), self._rc, args.retry_count,
                                lane_id, self.id)
        return bool(await _call(cond, ctx, f"the branch condition of '{lane_id}'"))

    def _merge(self, part: Chunk, outs: list[list[Chunk] | None]) -> list[Chunk]:
        """Text the lanes have all answered for is merged and emitted; the rest waits.

        Each lane's text out stands for a prefix of the original text (``_consumed``):
        all of it once the lane answered and holds nothing, and for a lane of one
        windowed processor, all but what its window holds. The fork emits up to the
        shortest such prefix, cut where no lane's edit straddles the cut.
        """
        is_text = part.type == "text-delta"
        if is_text:
            self._base += part.text
        total = len(self._base)
        others: list[list[Chunk]] = []
        for k, out in enumerate(outs):
            window = self._windows[k]
            if out is None:  # skipped or unchanged: the chunk passes the lane as it is
                out = [part]
            rest = []
            for c in out:
                if c.type == "text-delta":
                    self._outs[k] += c.text
                else:
                    rest.append(c)
            others.append(rest)
            if window is not None:
                self._consumed[k] = total - len(window.held)
            elif out and not self._lane_holds(k):
                self._consumed[k] = total
        tail = _other_chunks(part, others, is_text)
        cut = min(self._consumed) if is_text else total
        text = self._emit(cut, force=not is_text)
        if not text:
            return tail
        single = is_text and text == part.text
        return [part if single else Chunk.text_delta(text), *tail]

    def _lane_holds(self, k: int) -> bool:
        return any(p.holds() if isinstance(p, CompositeStage)
                   else window is not None and bool(window.held)
                   for p, _, _, _, _, _, window in self._lanes[k])

    def _emit(self, cut: int, *, force: bool) -> str:
        """Merge and drop the first ``cut`` characters of the original text (moved back
        to a point no lane's edit straddles), or all of it with ``force``."""
        from procflow.processors.reducer import merge_text_edits

        base, outs, consumed = self._base, self._outs, self._consumed
        if force:
            ends = [len(o) for o in outs]
        else:
            ends = []
            k = 0
            while k < len(outs) and cut > 0:
                done = consumed[k]
                if done == cut:
                    at, end = cut, len(outs[k])
                else:
                    at, end = _align(base[:done], outs[k], cut)
                if at < cut:
                    cut, ends, k = at, [], 0  # moved back: every lane again
                    continue
                ends.append(end)
                k += 1
            if cut <= 0:
                return ""
        original = base if force else base[:cut]
        variants = [o[:e] for o, e in zip(outs, ends, strict=True)]
        if force:
            self._base, self._outs, self._consumed = "", ["" for _ in outs], [0 for _ in outs]
        else:
            self._base = base[cut:]
            self._outs = [o[e:] for o, e in zip(outs, ends, strict=True)]
            self._consumed = [c - cut for c in consumed]
        edited = list(dict.fromkeys(v for v in variants if v != original))
        if not edited:
            return original
        return edited[0] if len(edited) == 1 else merge_text_edits(original, edited)

    async def _map(self, outs: list[list[Chunk] | None],
                   args: ProcessOutputStreamArgs) -> Any:
        """The map over the lanes' chunks for one incoming chunk.

        A lane usually gives back one chunk, and the map runs once. A lane whose
        processor holds text back (a ``stream_window``: ``PIIDetector``) gives none
        while it holds and, when it lets go, the held text before the chunk that made
        it: the lanes' chunks are then lined up from the last (the incoming chunk's
        place), a lane short of chunks has ``part=None`` in the earlier places, and the
        map runs once per place; what it picks goes on in order.
        """
        node = self._node
        lanes = [(lane.id, out) for lane, out in zip(node.lanes, outs, strict=True)
                 if out is not None]
        places = max((len(out) for _, out in lanes), default=0)
        if not lanes:
            places = 1  # every branch skipped: the map still says what goes on
        picked: list[Chunk] = []
        for i in range(places):
            data: dict[str, Any] = {}
            for lane_id, out in lanes:
                at = i - (places - len(out))
                data[lane_id] = _envelope(out[at] if at >= 0 else None, args)
            ctx = StreamStepContext(data, self._rc, args.retry_count, "map", self.id)
            part = _part_of(await _call(node.merge, ctx, "the map after the fork"), self.id,
                            "map")
            if part is not None:
                picked.append(part)
        if len(picked) == 1:
            return picked[0]
        return picked or None


def _other_chunks(part: Chunk, others: list[list[Chunk]], is_text: bool) -> list[Chunk]:
    """The non-text chunks a fork emits: for a non-text chunk, the reducer's rule (any
    lane drops it: dropped; else the first lane's change, else the chunk); for text,
    non-text chunks some lane released with it (the first such lane's)."""
    if is_text:
        return next((rest for rest in others if rest), [])
    if any(not rest for rest in others):
        return []
    return next((rest for rest in others if len(rest) != 1 or rest[0] is not part), [part])


def _align(original: str, out: str, cut: int) -> tuple[int, int]:
    """Where ``cut`` (a position in ``original``) falls in ``out``, a rewrite of it:
    ``(cut, position)``, or ``(earlier cut, position)`` when ``cut`` is inside an edit."""
    if out == original:
        return cut, cut
    matcher = difflib.SequenceMatcher(None, original, out, autojunk=False)
    for tag, i1, i2, j1, _ in matcher.get_opcodes():
        if tag == "equal" and i1 <= cut <= i2:
            return cut, j1 + cut - i1
        if tag != "equal" and i1 < cut < i2:
            return i1, j1
    return 0, 0


def flat(stages: list[Stage]) -> list[Stage]:
    """The processor stages of ``stages``, a fork's lanes' in place of the fork's."""
    out: list[Stage] = []
    for s in stages:
        p = s[0]
        if isinstance(p, CompositeStage):
            out += p.stages()
        else:
            out.append(s)
    return out
