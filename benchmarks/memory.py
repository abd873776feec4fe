"""Semantic recall at scale: search latency and the event-loop stall other tasks see.

Run: ``python benchmarks/memory.py [--quick] [--store memory|sqlite|postgres]
[--dsn DSN] [--ann]``. For 10k, 100k and 1M stored 256-dimension vectors in one
resource scope (``--quick`` skips 1M), it prints:

- load: the first search of the scope, which reads every vector from the store;
- p50 / p99: later searches (embed the query, check the scope's version in the store,
  exact numpy cosine search in a worker thread, top 4);
- stall: the longest a 1 ms ticker task on the same event loop waited past its
  deadline, while the searches (and, separately, the load) ran.

Targets: p50 <= 5 ms at 100k (exact search); no stall above 10 ms. ``--ann`` adds an
approximate (hnswlib HNSW) row per size; its index is built on the first search.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from procflow.memory import InMemoryMemoryStore, MessageIndex, SQLiteMemoryStore, StoredVector

DIMS = 256
SCOPE = "resource:bench"


class RandomEmbedder:
    """Unit vectors from a seeded generator: embedding costs nothing measurable."""

    name = "bench-random"
    cacheable = False

    def __init__(self) -> None:
        self._rng = np.random.default_rng(7)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        rows = self._rng.standard_normal((len(texts), DIMS)).astype(np.float32)
        return [list(map(float, row)) for row in rows]


async def fill(store: Any, count: int) -> None:
    rng = np.random.default_rng(count)
    space = f"{RandomEmbedder.name}/{DIMS}"
    done = 0
    while done < count:
        size = min(20_000, count - done)
        block = rng.standard_normal((size, DIMS)).astype(np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        await store.save_vectors(space, [
            StoredVector(f"m{done + i}", f"t{(done + i) % 500}", "bench", row.tobytes())
            for i, row in enumerate(block)])
        done += size


async def stalled(work: Callable[[], Awaitable[Any]]) -> tuple[Any, float]:
    """Run ``work`` beside a 1 ms ticker; returns its result and the worst lateness."""
    worst = 0.0
    finished = anyio.Event()

    async def ticker() -> None:
        nonlocal worst
        while not finished.is_set():
            expected = time.perf_counter() + 0.001
            await anyio.sleep(0.001)
            worst = max(worst, time.perf_counter() - expected)

    result: Any = None

    async def run() -> None:
        nonlocal result
        result = await work()
        finished.set()

    async with anyio.create_task_group() as group:
        group.start_soon(ticker)
        group.start_soon(run)
    return result, worst


def open_store(kind: str, directory: Path, dsn: str | None, count: int) -> Any:
    if kind == "sqlite":
        return SQLiteMemoryStore(directory / f"bench-{count}.db")
    if kind == "postgres":
        from procflow.memory import PostgresMemoryStore

        if dsn is None:
            raise SystemExit("--store postgres needs --dsn")
        return PostgresMemoryStore(dsn, schema=f"bench_{count}")
    return InMemoryMemoryStore()


async def measure(store: Any, count: int, *, approximate: bool) -> str:
    index = MessageIndex(store, RandomEmbedder(), approximate=approximate,
                         approximate_above=0)
    started = time.perf_counter()
    _, load_stall = await stalled(lambda: index.search("q", scope=SCOPE, top_k=4))
    load = time.perf_counter() - started
    repeats = 50 if count >= 1_000_000 else 200
    timings: list[float] = []

    async def searches() -> None:
        for _ in range(repeats):
            began = time.perf_counter()
            await index.search("q", scope=SCOPE, top_k=4)
            timings.append(time.perf_counter() - began)

    _, stall = await stalled(searches)
    timings.sort()
    p50 = statistics.median(timings) * 1000
    p99 = timings[min(len(timings) - 1, int(len(timings) * 0.99))] * 1000
    kind = "approx" if approximate else "exact "
    return (f"{count:>9,} {kind}  load {load * 1000:8.0f} ms (stall {load_stall * 1000:5.1f})"
            f"  p50 {p50:7.2f} ms  p99 {p99:7.2f} ms  stall {stall * 1000:5.1f} ms")


async def main(quick: bool, kind: str, dsn: str | None, ann: bool) -> None:
    sizes = [10_000, 100_000] if quick else [10_000, 100_000, 1_000_000]
    print(f"procflow memory benchmark ({'quick' if quick else 'full'}; store {kind}; "
          f"{DIMS} dimensions; one scope)")
    with tempfile.TemporaryDirectory(prefix="procflow-bench-") as directory:
        for count in sizes:
            store = open_store(kind, Path(directory), dsn, count)
            await fill(store, count)
            print(await measure(store, count, approximate=False), flush=True)
            if ann:
                print(await measure(store, count, approximate=True), flush=True)
            await store.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip 1M vectors")
    parser.add_argument("--store", choices=["memory", "sqlite", "postgres"], default="memory")
    parser.add_argument("--dsn", help="PostgreSQL DSN for --store postgres")
    parser.add_argument("--ann", action="store_true", help="also time hnswlib HNSW search")
    options = parser.parse_args()
    anyio.run(main, options.quick, options.store, options.dsn, options.ann)
