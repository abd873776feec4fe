"""Runtime overhead of procflow's executor against plain anyio doing the same work.

``python benchmarks/runtime.py [--quick]``. One process, one ``anyio.run`` (asyncio),
``InMemoryStorage``, nobody streaming events. Each figure is the best of several timed
repeats after a warm-up, beside the plain-anyio version of the same work measured in the
same run, with the ratio and a PASS/FAIL target. Exit code always 0 (report, never fail).
"""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from time import perf_counter
from typing import Any

import anyio

from procflow import StepContext, Workflow, create_step, create_workflow
from procflow.storage import InMemoryStorage

# Measured on this machine for peer libraries, for scale only (not re-measured here).
PEERS = [("LangGraph", 195.0, 2000.0), ("pydantic-graph", 75.0, 840.0)]


@dataclass(frozen=True)
class Sizes:  # timed repeats; runs per timed call of each workflow; foreach list length
    repeats: int
    chain_runs: int
    small_runs: int
    fanout_runs: int
    items: int


FULL = Sizes(repeats=5, chain_runs=20, small_runs=500, fanout_runs=50, items=10_000)
QUICK = Sizes(repeats=2, chain_runs=2, small_runs=50, fanout_runs=5, items=1_000)


@dataclass(frozen=True)
class Row:
    name: str
    unit: str
    ours: float  # seconds per unit
    plain: float  # seconds per unit, plain anyio
    max_ratio: float | None = None
    max_abs_us: float | None = None

    @property
    def ratio(self) -> float:
        return self.ours / self.plain if self.plain > 0 else float("inf")

    @property
    def verdict(self) -> str:
        if self.max_ratio is None and self.max_abs_us is None:
            return "-"
        ok = (self.max_ratio is None or self.ratio <= self.max_ratio) and (
            self.max_abs_us is None or self.ours * 1e6 <= self.max_abs_us)
        return "PASS" if ok else "FAIL"

    @property
    def target(self) -> str:
        parts = [f"<= {self.max_ratio:g}x"] if self.max_ratio is not None else []
        parts += [f"<= {self.max_abs_us:g} µs"] if self.max_abs_us is not None else []
        return ", ".join(parts) or "(info)"


async def best_of(fn: Callable[[], Awaitable[None]], repeats: int) -> float:
    """Warm up once, then return the fastest of ``repeats`` timed calls, in seconds."""
    await fn()
    times: list[float] = []
    for _ in range(repeats):
        gc.collect()
        t0 = perf_counter()
        await fn()
        times.append(perf_counter() - t0)
    return min(times)


async def bump(ctx: StepContext) -> Any:
    return ctx.input_data + 1


def make_plain(n: int) -> list[Callable[[int], Awaitable[int]]]:
    """``n`` distinct trivial coroutine functions (the plain counterpart of ``bump``)."""
    def factory() -> Callable[[int], Awaitable[int]]:
        async def f(x: int) -> int:
            return x + 1
        return f
    return [factory() for _ in range(n)]


def chain(wf_id: str, n: int) -> Workflow:
    wf = create_workflow(id=wf_id)
    for i in range(n):
        wf = wf.then(create_step(id=f"s{i}", execute=bump))
    return wf.commit()


async def run_wf(wf: Workflow, data: Any, storage: InMemoryStorage) -> Any:
    result = await wf.create_run(storage=storage).start(input_data=data)
    if result.status != "success":
        raise RuntimeError(f"{wf.id}: run ended {result.status}: {result.error!r}")
    return result.result


async def bench_chain(sz: Sizes, steps: int, runs: int, name: str, unit_steps: bool,
                      max_ratio: float, max_abs_us: float | None) -> Row:
    wf, fns = chain(f"chain-{steps}", steps), make_plain(steps)

    async def ours() -> None:
        storage = InMemoryStorage()  # fresh per timed call: the heap does not grow
        for _ in range(runs):
            assert await run_wf(wf, 0, storage) == steps

    async def plain() -> None:
        for _ in range(runs):
            x = 0
            for f in fns:
                x = await f(x)
            assert x == steps

    per = runs * (steps if unit_steps else 1)
    t_ours = await best_of(ours, sz.repeats) / per
    t_plain = await best_of(plain, sz.repeats) / per
    return Row(name, "step" if unit_steps else "run", t_ours, t_plain, max_ratio, max_abs_us)


async def bench_fanout(sz: Sizes, branches: int = 100) -> Row:
    wf = create_workflow(id="fanout").parallel(
        [create_step(id=f"p{i}", execute=bump) for i in range(branches)]).commit()
    fns = make_plain(branches)

    async def ours() -> None:
        storage = InMemoryStorage()
        for _ in range(sz.fanout_runs):
            out = await run_wf(wf, 0, storage)
            assert len(out) == branches

    async def fan_out() -> dict[str, int]:
        out: dict[str, int] = {}

        async def one(i: int) -> None:
            out[f"p{i}"] = await fns[i](0)

        async with anyio.create_task_group() as tg:
            for i in range(branches):
                tg.start_soon(one, i)
        return out

    async def plain() -> None:
        for _ in range(sz.fanout_runs):
            assert len(await fan_out()) == branches

    per = sz.fanout_runs * branches
    t_ours = await best_of(ours, sz.repeats) / per
    t_plain = await best_of(plain, sz.repeats) / per
    return Row("parallel fan-out", "branch", t_ours, t_plain, max_ratio=2)


async def bench_foreach(sz: Sizes, concurrency: int) -> Row:
    wf = create_workflow(id=f"foreach-{concurrency}").foreach(
        create_step(id="item", execute=bump), concurrency=concurrency).commit()
    items = list(range(sz.items))
    expected = [i + 1 for i in items]
    (f,) = make_plain(1)

    async def ours() -> None:
        assert await run_wf(wf, items, InMemoryStorage()) == expected

    async def plain_limited() -> None:
        out: list[int] = [0] * len(items)
        limiter = anyio.CapacityLimiter(concurrency)

        async def one(i: int) -> None:
            async with limiter:
                out[i] = await f(items[i])

        async with anyio.create_task_group() as tg:
            for i in range(len(items)):
                tg.start_soon(one, i)
        assert out == expected

    async def plain_loop() -> None:
        out = [await f(x) for x in items]
        assert out == expected

    t_ours = await best_of(ours, sz.repeats) / sz.items
    if concurrency == 1:
        t_plain = await best_of(plain_loop, sz.repeats) / sz.items
        return Row("foreach c=1 (vs await loop)", "item", t_ours, t_plain)
    t_plain = await best_of(plain_limited, sz.repeats) / sz.items
    return Row(f"foreach c={concurrency}", "item", t_ours, t_plain, max_ratio=2)


def import_time(repeats: int) -> float:
    code = "import time; t=time.perf_counter(); import procflow; print(time.perf_counter()-t)"
    return min(float(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                    text=True, check=True).stdout) for _ in range(repeats))


def print_report(rows: list[Row], imp: float, sz: Sizes, quick: bool) -> None:
    print(f"procflow runtime benchmark ({'quick' if quick else 'full'}; best of "
          f"{sz.repeats}; asyncio backend; InMemoryStorage; no event stream)")
    print(f"{'benchmark':<36}{'procflow µs':>13}{'plain µs':>11}{'ratio':>9}  "
          f"{'target':<20}{'result':>6}")
    print("-" * 97)
    for r in rows:
        name = f"{r.name} /{r.unit}"
        print(f"{name:<36}{r.ours * 1e6:>13.2f}{r.plain * 1e6:>11.3f}{r.ratio:>8.1f}x  "
              f"{r.target:<20}{r.verdict:>6}")
    print(f"{'import procflow':<36}{imp:>12.3f}s{'':>11}{'':>9}  {'<= 0.25 s':<20}"
          f"{'PASS' if imp <= 0.25 else 'FAIL':>6}")
    print()
    print("reference, peers measured on this machine (constants, not re-measured):")
    for name, step_us, run_us in PEERS:
        print(f"  {name:<16} ~{step_us:g} µs per chain step, ~{run_us:g} µs per 10-step run")


async def main(quick: bool) -> None:
    sz = QUICK if quick else FULL
    rows = [
        await bench_chain(sz, 200, sz.chain_runs, "chain (200 steps)", True, 100, 10),
        await bench_chain(sz, 10, sz.small_runs, "10-step run", False, 100, None),
        await bench_fanout(sz),
        await bench_foreach(sz, 8),
        await bench_foreach(sz, 1),
    ]
    print_report(rows, import_time(5 if not quick else 2), sz, quick)


def cli() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    args = parser.parse_args()
    try:
        anyio.run(main, args.quick, backend="asyncio")
    except Exception:
        traceback.print_exc()
        print("benchmark aborted (exit code stays 0)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(cli())
