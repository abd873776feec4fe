"""``BatchPartsProcessor``: merge small text deltas into fewer, larger ones.

Useful before per-chunk checks (a regex or PII filter sees whole phrases, a model
judge is asked less often) and to cut the number of chunks a client receives.
There is no background timer: ``max_wait_time`` is checked when a chunk arrives,
and the "finish" chunk that ends every stream flushes whatever is held.
"""

from __future__ import annotations

import time
from typing import Any

from procflow.messages import Chunk, TextDelta
from procflow.processors.args import ProcessOutputStreamArgs
from procflow.processors.base import Processor

__all__ = ["BatchPartsProcessor"]

_TERMINAL = frozenset({"finish", "error", "tripwire"})


def _clock() -> float:
    # Module level so tests can swap the clock.
    return time.monotonic()


def _merge(chunks: list[Chunk]) -> list[Chunk]:
    """Runs of consecutive text deltas become one delta each; other chunks stay put."""
    out: list[Chunk] = []
    run: list[Chunk] = []

    def close() -> None:
        if len(run) == 1:
            out.append(run[0])
        elif run:
            first = run[0]
            out.append(TextDelta("".join(c.text for c in run), first.metadata))
        run.clear()

    for chunk in chunks:
        if isinstance(chunk, TextDelta):
            run.append(chunk)
        else:
            close()
            out.append(chunk)
    close()
    return out


class BatchPartsProcessor(Processor):
    """Buffers streamed text deltas and releases them merged.

    Args:
        batch_size: Release once this many chunks are held (an int >= 1).
        max_wait_time: Also release, on the next arriving chunk, once this many
            seconds passed since the first held one (``None``: no time limit).
        emit_on_non_text: A non-text chunk releases the held text and then itself
            (default). With ``False`` non-text chunks join the batch in order and
            leave with it; "finish", "error" and "tripwire" always release it.

    Raises:
        ValueError: A setting is invalid.
    """

    id = "batch-parts"

    def __init__(self, *, batch_size: int = 5, max_wait_time: float | None = None,
                 emit_on_non_text: bool = True) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"BatchPartsProcessor: batch_size must be an int >= 1, "
                             f"got {batch_size!r}")
        if max_wait_time is not None and (isinstance(max_wait_time, bool)
                                          or not isinstance(max_wait_time, int | float)
                                          or not max_wait_time > 0):
            raise ValueError(f"BatchPartsProcessor: max_wait_time must be a number of seconds "
                             f"> 0 or None, got {max_wait_time!r}")
        self.batch_size = batch_size
        self.max_wait_time = None if max_wait_time is None else float(max_wait_time)
        self.emit_on_non_text = bool(emit_on_non_text)

    def _due(self, state: dict[str, Any], held: list[Chunk]) -> bool:
        if len(held) >= self.batch_size:
            return True
        wait = self.max_wait_time
        return wait is not None and _clock() - state["batch_started"] >= wait

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        """Hold text deltas; return ``None`` while holding, the merged chunk(s) when a
        batch is due, and ``[merged, part]`` when a non-text chunk forces a flush."""
        part = args.part
        state = args.state
        held: list[Chunk] = state.setdefault("batch", [])
        is_text = part.type == "text-delta"
        if not is_text and (self.emit_on_non_text or part.type in _TERMINAL):
            if not held:
                return part
            out = _merge(held)
            held.clear()
            out.append(part)
            return out
        if not held:
            state["batch_started"] = _clock()
        held.append(part)
        if not self._due(state, held):
            return None
        out = _merge(held)
        held.clear()
        return out[0] if len(out) == 1 else out
