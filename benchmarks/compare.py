"""Compare the agent's cost per call in two checkouts on a busy machine, by interleaving.

Run: ``python benchmarks/compare.py PATH_A PATH_B [--case five|bare] [--untraced]
[--pairs 3] [--rounds 20] [--calls 200]``. Each path is a checkout of procflow (``git worktree add
--detach /tmp/ref c9218cc`` makes one of an older commit). One long-lived process per
checkout warms up, then the two take turns running blocks of ``--calls`` ``generate()``
calls (the same agent as ``benchmarks/agent.py``: ScriptedModel, 18 streamed words, no
or 5 processors of 5 hooks), A first in even rounds and B first in odd ones. It prints
the best and median CPU µs per call of each and the median of the per-round ratios
A/B: a slow spell of the machine hits both sides of a round alike, so the ratio holds
where the figures of ``benchmarks/agent.py`` run minutes apart do not. Check the
harness with the same path twice (an A/A run): its ratio should be within a few
percent of 1.00. One process can land on a slow or fast memory layout for its whole life
(once 1.03 where other pairs gave 1.13-1.21), so ``--pairs`` (default 3) starts fresh
processes that many times and prints each pair's ratio beside the overall one.
``COMPARE_GC=off`` (or ``freeze``) disables (or freezes) the garbage collector in both
processes after the warm-up, to tell its share apart.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

WORKER = "--worker"


def worker(processors: int, traced: bool) -> None:
    """Read a block size per line from stdin, answer CPU µs per call (blank line: exit)."""
    import anyio

    # beside this file (the worker runs this script, so its folder is on sys.path); it
    # imports procflow from PYTHONPATH, the checkout under test
    from agent import Noop, Repeating, no_project_database

    from procflow.agent import Agent

    no_project_database()

    async def main() -> None:
        procs = [Noop(f"noop-{i}") for i in range(processors)]
        agent = Agent(id="bench", model=Repeating(), input_processors=procs,
                      output_processors=procs)
        agent.workflow.tracing = traced
        for _ in range(300):
            await agent.generate("hi")
        if os.environ.get("COMPARE_GC") == "freeze":
            import gc
            gc.freeze()
        elif os.environ.get("COMPARE_GC") == "off":
            import gc
            gc.disable()
        while line := sys.stdin.readline().strip():
            calls = int(line)
            cpu = time.process_time()
            for _ in range(calls):
                await agent.generate("hi")
            print(f"{(time.process_time() - cpu) / calls * 1e6:.3f}", flush=True)

    anyio.run(main)


def spawn(path: str, processors: int, traced: bool) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.path.abspath(path)}
    return subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), WORKER, str(processors), str(int(traced))],
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", help="checkout A (its procflow is imported)")
    parser.add_argument("b", help="checkout B")
    parser.add_argument("--case", choices=["five", "bare"], default="five",
                        help="5 processors of 5 hooks, or none")
    parser.add_argument("--untraced", action="store_true", help="tracing off")
    parser.add_argument("--pairs", type=int, default=3,
                        help="fresh pairs of processes (a process's memory layout moves "
                             "its speed by a few percent)")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    for path in (args.a, args.b):
        if not os.path.isdir(os.path.join(path, "procflow")):
            parser.error(f"{path!r} is not a procflow checkout (no procflow/ directory)")
    processors = 5 if args.case == "five" else 0
    times: list[list[float]] = [[], []]
    pair_ratios = []
    for _ in range(args.pairs):
        a, b = pair_of_runs(args, processors)
        times[0] += a
        times[1] += b
        pair_ratios.append(statistics.median(x / y for x, y in zip(a, b, strict=True)))
    a, b = times
    ratios = [x / y for x, y in zip(a, b, strict=True)]
    label = f"{args.case} processors" if args.case == "five" else "no processors"
    print(f"agent.generate, {label}, {'untraced' if args.untraced else 'traced'}; "
          f"{args.pairs} pairs of processes x {args.rounds} rounds of {args.calls} calls; "
          "CPU µs per call")
    for name, path, side in (("A", args.a, a), ("B", args.b, b)):
        print(f"  {name} {path:<40} best {min(side):8.1f}   median {statistics.median(side):8.1f}")
    print(f"  A/B: median of the per-round ratios {statistics.median(ratios):.3f} "
          f"(per pair of processes: {', '.join(f'{r:.3f}' for r in pair_ratios)})")


def pair_of_runs(args: argparse.Namespace, processors: int) -> tuple[list[float], list[float]]:
    """One fresh process per checkout, taking turns: CPU µs per call of each round."""
    procs = [spawn(path, processors, not args.untraced) for path in (args.a, args.b)]
    times: list[list[float]] = [[], []]
    try:
        for round_ in range(args.rounds):
            for side in ((0, 1) if round_ % 2 == 0 else (1, 0)):
                proc = procs[side]
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(f"{args.calls}\n")
                proc.stdin.flush()
                reply = proc.stdout.readline()
                if not reply:
                    raise SystemExit(f"the worker of {(args.a, args.b)[side]!r} died "
                                     "(run it alone to see its error)")
                times[side].append(float(reply))
    finally:
        for proc in procs:
            if proc.stdin is not None and proc.poll() is None:
                proc.stdin.write("\n")
                proc.stdin.flush()
            proc.wait()
    return times[0], times[1]


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == WORKER:
        worker(int(sys.argv[2]), sys.argv[3] == "1")
    else:
        main()
