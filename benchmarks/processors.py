"""Processor overheads: the output-stream fast path, and TokenLimiter on a long history.

``python benchmarks/processors.py [--quick]``. One process, one ``anyio.run`` (asyncio).

(a) 100,000 chunks through ``ProcessorRunner([...5 no-op stream processors]).output_stream()``
    beside a bare async generator passing the same chunks through; prints the cost per
    chunk per processor (target: <= 2 µs).
(b) ``TokenLimiter.process_input_step`` on a 2,000-message history: the first call
    (every message encoded) and a repeated call on the same messages (counts cached).
(c) A 3-way parallel guard workflow on the output stream (``.parallel([...]).map(
    merge_processor_results)``: PIIDetector, RegexFilterProcessor, ModerationProcessor)
    beside the same three processors listed flat, over a 206-chunk answer; the ratio
    parallel / flat (target: <= 1.5x). Three no-op processors the same way show the
    fork's own overhead.

Each figure is the best of a few repeats. Exit code always 0 (report, never fail).
"""

from __future__ import annotations

import argparse
import gc
import sys
import traceback
from collections.abc import AsyncIterator
from time import perf_counter
from typing import Any

import anyio

from procflow import create_step, create_workflow
from procflow.messages import Chunk, Message, MessageList
from procflow.processors import (
    ModerationProcessor,
    PIIDetector,
    ProcessorStepSchema,
    ProcessOutputStreamArgs,
    RegexFilterProcessor,
    merge_processor_results,
)
from procflow.processors._hooks import StepInfo, StepOverrides
from procflow.processors._runner import ProcessorRunner
from procflow.processors.base import Processor
from procflow.processors.builtin.token_limiter import TokenLimiter, default_encoding

TARGET_US = 2.0
PROCESSORS = 5
TARGET_RATIO = 1.5
ANSWER = ("Thanks for waiting. Your order A-1 shipped today; the courier will call "
          "+1 415 555 0100 before noon, and the receipt goes to bob@example.com. "
          "If anything is wrong, reply here and we will sort it out quickly. ") * 6


class NoOp(Processor):
    def __init__(self, index: int) -> None:
        self.id = f"noop-{index}"

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        return args.part


async def _source(chunks: list[Chunk]) -> AsyncIterator[Chunk]:
    for chunk in chunks:
        yield chunk


async def _bare(chunks: list[Chunk]) -> float:
    async def passthrough(src: AsyncIterator[Chunk]) -> AsyncIterator[Chunk]:
        async for chunk in src:
            yield chunk

    start = perf_counter()
    count = 0
    async for _ in passthrough(_source(chunks)):
        count += 1
    return perf_counter() - start


async def _pipeline(chunks: list[Chunk], processors: int) -> float:
    pipe = ProcessorRunner([NoOp(i) for i in range(processors)]).output_stream()
    start = perf_counter()
    count = 0
    async for chunk in _source(chunks):
        count += len(await pipe.process(chunk))
    elapsed = perf_counter() - start
    assert count == len(chunks)
    return elapsed


async def bench_stream(n: int, repeats: int) -> None:
    chunks = [Chunk.text_delta(f"w{i} ") for i in range(n)]
    gc.collect()
    bare = min([await _bare(chunks) for _ in range(repeats)])
    one = min([await _pipeline(chunks, 1) for _ in range(repeats)])
    five = min([await _pipeline(chunks, PROCESSORS) for _ in range(repeats)])
    per_proc_us = (five - bare) / n / PROCESSORS * 1e6
    verdict = "PASS" if per_proc_us <= TARGET_US else "FAIL"
    print(f"(a) output stream, {n:,} chunks (best of {repeats})")
    print(f"    bare async generator           {bare / n * 1e6:7.3f} µs/chunk")
    print(f"    runner, 1 no-op processor      {one / n * 1e6:7.3f} µs/chunk")
    print(f"    runner, {PROCESSORS} no-op processors     {five / n * 1e6:7.3f} µs/chunk")
    print(f"    => {per_proc_us:.3f} µs per chunk per no-op processor "
          f"(target <= {TARGET_US:.1f}) {verdict}")


def _history(n: int) -> tuple[Message, list[Message]]:
    system = Message.system("You are a helpful assistant. Answer briefly and cite sources.")
    body = ("the quick brown fox jumps over the lazy dog while the committee reviews "
            "quarterly figures and drafts a reply ")
    msgs = [(Message.user if i % 2 == 0 else Message.assistant)(f"{i}: {body * 2}")
            for i in range(n)]
    return system, msgs


def _list(system: Message, msgs: list[Message]) -> MessageList:
    ml = MessageList()
    ml.add_system(system)
    ml.add(msgs, source="memory")
    return ml


async def bench_token_limiter(n: int, repeats: int) -> None:
    start = perf_counter()
    default_encoding()
    load_ms = (perf_counter() - start) * 1e3
    system, msgs = _history(n)
    firsts: list[float] = []
    repeated: list[float] = []
    kept = 0
    for _ in range(repeats):
        runner = ProcessorRunner([TokenLimiter(32_000)])  # fresh state: nothing cached
        for target in (firsts, repeated):
            ml = _list(system, msgs)
            start = perf_counter()
            await runner.run_input_step(ml, StepInfo(0, []), StepOverrides())
            target.append(perf_counter() - start)
            kept = len(ml)
    print(f"(b) TokenLimiter(32_000).process_input_step, {n:,}-message history "
          f"(best of {repeats})")
    print(f"    default encoding load (once per process) {load_ms:8.1f} ms")
    print(f"    first call (every message encoded)       {min(firsts) * 1e3:8.1f} ms")
    print(f"    repeated call (counts cached)            {min(repeated) * 1e3:8.1f} ms")
    print(f"    kept {kept:,} of {n:,} messages")


def _guards() -> list[Processor]:
    return [PIIDetector(strategy="redact"), RegexFilterProcessor(presets=["secrets"],
                                                                 strategy="redact"),
            ModerationProcessor(strategy="block")]


def _parallel(processors: list[Processor]) -> Any:
    return (create_workflow(id="guards", input_schema=ProcessorStepSchema,
                            output_schema=ProcessorStepSchema)
            .parallel([create_step(p) for p in processors])
            .map(merge_processor_results).commit())


async def _streams(items: list[Any], chunks: list[Chunk], streams: int) -> tuple[float, str]:
    runner = ProcessorRunner(items)
    text = ""
    start = perf_counter()
    for _ in range(streams):
        runner.context.states.clear()
        pipe = runner.output_stream()
        out: list[Chunk] = []
        for chunk in chunks:
            out += await pipe.process(chunk)
        out += await pipe.finish()
        text = "".join(c.text for c in out if c.type == "text-delta")
    return perf_counter() - start, text


async def bench_workflow_stream(streams: int, repeats: int) -> None:
    words = ANSWER.split(" ")
    chunks = [Chunk.text_delta(w + " ") for w in words]
    print(f"(c) 3-way parallel workflow vs flat on the stream, {len(chunks)} chunks x "
          f"{streams} streams (best of {repeats})")
    for label, make in (("guards", _guards),
                        ("no-ops", lambda: [NoOp(i) for i in range(3)])):
        flat = min([(await _streams(make(), chunks, streams))[0] for _ in range(repeats)])
        par = min([(await _streams([_parallel(make())], chunks, streams))[0]
                   for _ in range(repeats)])
        same = (await _streams(make(), chunks, 1))[1] == (
            await _streams([_parallel(make())], chunks, 1))[1]
        ratio = par / flat
        verdict = (("PASS" if ratio <= TARGET_RATIO else "FAIL") + f" (target <= {TARGET_RATIO})"
                   if label == "guards" else "(the fork's own cost; no target)")
        print(f"    {label}: flat {flat / streams * 1e3:7.3f} ms/stream, parallel workflow "
              f"{par / streams * 1e3:7.3f} ms/stream => {ratio:.2f}x {verdict}; "
              f"same text: {same}")


async def main(quick: bool) -> None:
    repeats = 2 if quick else 5
    try:
        await bench_stream(10_000 if quick else 100_000, repeats)
    except Exception:
        traceback.print_exc()
    print()
    try:
        await bench_token_limiter(2_000, 2 if quick else 3)
    except Exception:
        traceback.print_exc()
    print()
    try:
        await bench_workflow_stream(5 if quick else 30, repeats)
    except Exception:
        traceback.print_exc()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer chunks and repeats")
    ns = parser.parse_args()
    try:
        anyio.run(main, ns.quick)
    except Exception:
        traceback.print_exc()
    sys.exit(0)
