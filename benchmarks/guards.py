"""Guards at line speed: throughput, worst case and quality of the offline guards.

``python benchmarks/guards.py``. For ``PromptInjectionDetector``, ``ModerationProcessor``
and ``PIIDetector`` (rules only, one core) it prints:

(``PromptInjectionDetector`` by default stops reading a text at the first rule match
that flags it whatever else the text holds; the row under it, ``exhaustive=True``,
reads every text in full, for exact scores and every piece of evidence.)

- throughput (MB/s, the median of three passes after a warm-up pass) over a mixed set
  built from the project's own text: short chat
  turns (the three corpora in ``tests/processors/data``), long pasted documents (the
  README and the docs, cut into 2-20 KB pieces), code (procflow's own modules) and the
  attack texts of the injection corpus;
- throughput on text the guard has not read before ("unseen"): one half of the set
  (every other input) read once after the other half. RE2 builds a DFA state the first
  time a text leads to it, so text met again (the passes above read the same inputs
  each time) is cheaper than new text, which is what a guard mostly reads in service;
- the slowest single 10 KB input among 10 KB windows of that set and adversarial
  10 KB inputs (runs of one character, digits, separators, near-matches), each timed
  as its best of three runs, and how long checking it holds the event loop (another
  task's longest wait: the whole check when it runs inline in one go, less when it
  yields between steps or runs in a worker thread);
- precision / recall / F1 on the labelled corpora (injection: attack vs benign;
  moderation: flagged vs allowed; PII: per type over the labelled spans), and for
  the "name" and "address" types on the held-out file ``pii_names_heldout.jsonl``
  (written after those rules were frozen), with its hard-negative rate.

``--by-kind`` prints, instead of all that, each guard's throughput per kind of input
(chat turns, attack texts, documents, code) over the set's odd half, read the first time
(after the even half) and again: where text new to the RE2 sets costs more.

With ``google-re2`` installed (a core dependency on CPython) the rule tables of the
injection and moderation guards use an RE2 prefilter; ``--no-re2`` measures them
without it (the results are the same).

Exit code always 0: a report, never a gate.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from itertools import pairwise
from pathlib import Path
from time import perf_counter, process_time
from typing import Any

import anyio
import anyio.lowlevel

from procflow.processors.builtin.injection import PromptInjectionDetector
from procflow.processors.builtin.moderation import ModerationProcessor
from procflow.processors.builtin.pii import ALL_PII_TYPES, PIIDetector
from procflow.textscan._prefilter import Engine, load_re2

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "processors" / "data"
WINDOW = 10_000


def load(name: str) -> list[dict[str, Any]]:
    path = DATA / name
    if not path.exists():
        return []
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def mixed_parts() -> list[tuple[str, str]]:
    """``(kind, text)`` of the mixed set, in a fixed order: chat turns (``"chat"``),
    attack texts (``"attack"``), pasted documents (``"docs"``) and code (``"code"``)."""
    chat = [r["text"] for name in ("pii_corpus.jsonl", "moderation_corpus.jsonl")
            for r in load(name)]
    attacks = [r["text"] for r in load("injection_corpus.jsonl")]
    docs: list[str] = []
    for path in sorted([ROOT / "README.md", *(ROOT / "docs").glob("**/*.md")]):
        text = path.read_text(encoding="utf-8")
        size = 2_000
        for start in range(0, len(text), size):
            docs.append(text[start:start + size])
            size = 2_000 + (size * 7) % 18_000
    code: list[str] = []
    for path in sorted((ROOT / "procflow").glob("**/*.py"))[:60]:
        code.append(path.read_text(encoding="utf-8")[:12_000])
    return [(kind, text) for kind, texts in (("chat", chat), ("attack", attacks),
                                             ("docs", docs), ("code", code))
            for text in texts]


def mixed_inputs() -> list[str]:
    """Chat turns, pasted documents, code and attack texts, in a fixed order."""
    return [text for _, text in mixed_parts()]


def adversarial(size: int) -> dict[str, str]:
    """Inputs that make backtracking patterns explode, ``size`` characters each."""
    def rep(unit: str) -> str:
        return (unit * (size // len(unit) + 1))[:size]
    return {
        "one char": rep("a"), "digits": rep("0"), "dashes": rep("-"), "dots": rep("."),
        "spaces": rep(" "), "digit groups": rep("1234 "), "near email": rep("a."),
        "short emails": rep("a@b.c "), "near url": rep("http://a"), "words": rep("ignore "),
        "capitals": rep("Ab "), "near card": rep("4111 1111 "), "base64ish": rep("QUFB"),
        "mixed seps": rep("-_ ./"), "near address": rep("12 Main "),
    }


Detect = Callable[[str], Awaitable[Any]]


async def throughput(detect: Detect, inputs: list[str]) -> tuple[float, float]:
    """MB/s by the process's CPU time (robust on a shared machine) and by wall time."""
    total = sum(len(t.encode()) for t in inputs)
    start, cpu = perf_counter(), process_time()
    for text in inputs:
        await detect(text)
    return total / (process_time() - cpu) / 1e6, total / (perf_counter() - start) / 1e6


async def by_kind(detect: Detect, parts: list[tuple[str, str]],
                  ) -> dict[str, tuple[int, float, float]]:
    """Per kind of input: its bytes in the set's odd half, and MB/s (CPU time) over them
    read the first time (after the even half) and again. Only meaningful for a guard
    that has read nothing yet: what it read before is not new."""
    for _, text in parts[0::2]:
        await detect(text)
    odd = parts[1::2]
    sizes: Counter[str] = Counter()
    for kind, text in odd:
        sizes[kind] += len(text.encode())
    new = await _seconds_by_kind(detect, odd)
    again = await _seconds_by_kind(detect, odd)
    return {kind: (size, _rate(size, new[kind]), _rate(size, again[kind]))
            for kind, size in sizes.items()}


async def _seconds_by_kind(detect: Detect, parts: list[tuple[str, str]]) -> dict[str, float]:
    """CPU seconds ``detect`` took over each kind's texts of ``parts``."""
    spent: dict[str, float] = {}
    for kind, text in parts:
        start = process_time()
        await detect(text)
        spent[kind] = spent.get(kind, 0.0) + process_time() - start
    return spent


def _rate(nbytes: int, seconds: float) -> float:
    """MB/s (``inf`` when the clock saw no time pass)."""
    return nbytes / seconds / 1e6 if seconds > 0 else float("inf")


async def worst_10k(detect: Detect, inputs: list[str], repeats: int = 3,
                    ) -> tuple[float, str, str]:
    """The slowest window (ms, its label, its text): each window's time is its best of
    ``repeats`` (the cost of the input itself; a slower repeat is the machine's doing),
    the worst over windows."""
    joined = "\n".join(inputs)
    windows = {f"mixed@{i}": joined[i:i + WINDOW]
               for i in range(0, len(joined) - WINDOW, len(joined) // 20)}
    windows.update(adversarial(WINDOW))
    worst, name = 0.0, ""
    for label, text in windows.items():
        took = float("inf")
        for _ in range(repeats):
            start = process_time()
            await detect(text)
            took = min(took, process_time() - start)
        if took > worst:
            worst, name = took, label
    return worst * 1000, name, windows[name]


async def loop_held(detect: Detect, text: str, repeats: int = 3) -> float:
    """How long ``detect(text)`` holds the event loop (ms): the longest wait of another
    task between its turns while the check runs, the best of ``repeats``."""
    return min([await _held_once(detect, text) for _ in range(repeats)]) * 1000


async def _held_once(detect: Detect, text: str) -> float:
    ticks: list[float] = []
    done = False

    async def ticker() -> None:
        while not done:
            ticks.append(perf_counter())
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.lowlevel.checkpoint()
        start = perf_counter()
        await detect(text)
        end = perf_counter()
        done = True
    marks = [start, *(t for t in ticks if start < t < end), end]
    return max(b - a for a, b in pairwise(marks))


def prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    p = tp / (tp + fp) if tp + fp else 1.0
    r = tp / (tp + fn) if tp + fn else 1.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def line(name: str, tp: int, fp: int, fn: int, extra: str = "") -> None:
    p, r, f = prf(tp, fp, fn)
    print(f"    {name:<18} P {p:.3f}  R {r:.3f}  F1 {f:.3f}  (tp {tp}, fp {fp}, fn {fn}){extra}")


async def injection_quality(detector: PromptInjectionDetector) -> None:
    rows = load("injection_corpus.jsonl")
    for split in ("all", "heldout"):
        sel = [r for r in rows if split == "all" or r.get("split") == "heldout"]
        flags = [((await detector.detect(r["text"])).flagged, r["label"] == "attack")
                 for r in sel]
        line(f"injection/{split}", sum(f and a for f, a in flags),
             sum(f and not a for f, a in flags), sum(a and not f for f, a in flags))


async def moderation_quality(detector: ModerationProcessor) -> None:
    rows = load("moderation_corpus.jsonl")
    flags = [((await detector.detect(r["text"])).flagged, r["label"] == "flagged") for r in rows]
    line("moderation", sum(f and a for f, a in flags), sum(f and not a for f, a in flags),
         sum(a and not f for f, a in flags))


async def span_counts(rows: list[dict[str, Any]], detector: PIIDetector,
                      types: tuple[str, ...]) -> dict[str, Counter[str]]:
    counts: dict[str, Counter[str]] = {t: Counter() for t in types}
    for row in rows:
        want = Counter((s["type"], s["value"]) for s in row.get("spans", [])
                       if s["type"] in types)
        got = Counter((d.type, d.value) for d in await detector.detect(row["text"])
                      if d.type in types)
        for (kind, _), n in (want & got).items():
            counts[kind]["tp"] += n
        for (kind, _), n in (got - want).items():
            counts[kind]["fp"] += n
        for (kind, _), n in (want - got).items():
            counts[kind]["fn"] += n
    return counts


async def pii_quality(engine: Engine) -> None:
    rows = load("pii_corpus.jsonl")
    detector = PIIDetector(detection_types=list(ALL_PII_TYPES), threshold=0.0, engine=engine)
    counts = await span_counts(rows, detector, tuple(ALL_PII_TYPES))
    total = Counter[str]()
    for kind, c in counts.items():
        total.update(c)
        if sum(c.values()):
            line(f"pii/{kind}", c["tp"], c["fp"], c["fn"])
    line("pii/all types", total["tp"], total["fp"], total["fn"])
    heldout = load("pii_names_heldout.jsonl")
    if not heldout:
        return
    print(f"  names and addresses, held-out ({len(heldout)} lines, written after the "
          "rules were frozen):")
    named = PIIDetector(detection_types=["name", "address"], threshold=0.0, engine=engine)
    for kind, c in (await span_counts(heldout, named, ("name", "address"))).items():
        line(kind, c["tp"], c["fp"], c["fn"])
    negatives = [r for r in heldout if r.get("hard_negative")]
    hit = sum([bool(await named.detect(r["text"])) for r in negatives])
    print(f"    hard negatives     {hit}/{len(negatives)} flagged "
          f"(rate {hit / max(1, len(negatives)):.3f})")


async def main() -> None:
    re2 = load_re2()
    engine: Engine = "re" if "--no-re2" in sys.argv[1:] or re2 is None else "re2"
    parts = mixed_parts()
    inputs = [text for _, text in parts]
    size = sum(len(t.encode()) for t in inputs)
    print(f"Mixed set: {len(inputs)} inputs, {size / 1e6:.2f} MB "
          f"(chat turns, documents, code, attack texts); Python {sys.version.split()[0]}")
    state = ("off (--no-re2)" if re2 is not None and engine == "re" else
             "on (google-re2)" if re2 is not None else
             "off (google-re2 not installed: pip install google-re2)")
    print(f"RE2 prefilter of the rule tables: {state}")
    injection = PromptInjectionDetector(engine=engine)
    moderation = ModerationProcessor(engine=engine)
    pii = PIIDetector(engine=engine)

    # what a guard does by default: stop reading a text once it is flagged whatever
    # else it holds; and a full read of every text (exact scores, all the evidence)
    exhaustive = PromptInjectionDetector(exhaustive=True, engine=engine)
    guards: list[tuple[str, Detect]] = [
        ("PromptInjectionDetector", injection.detect),
        ("  exhaustive=True", exhaustive.detect),
        ("ModerationProcessor", moderation.detect),
        ("PIIDetector", pii.detect),
    ]
    if "--by-kind" in sys.argv[1:]:
        # a process of its own: the guards below have read nothing yet
        print("\nBy kind of input (MB/s by CPU time over the set's odd half: read the first "
              "time, after the even half, and again):")
        print(f"{'guard':<26}{'kind':<8}{'KB':>7}{'new':>8}{'again':>8}")
        for name, detect in guards:
            if name.startswith(" "):
                continue  # shares the RE2 sets of the row above: nothing is new to it
            for kind, (nbytes, new, again) in (await by_kind(detect, parts)).items():
                print(f"{name:<26}{kind:<8}{nbytes / 1e3:>7.0f}{new:>8.2f}{again:>8.2f}")
        return
    print(f"\n{'guard':<26}{'MB/s cpu':>9}{'MB/s wall':>10}{'unseen':>8}"
          f"{'worst 10 KB (cpu ms)':>22}{'loop held (ms)':>16}  worst input")
    for name, detect in guards:
        # text not met before: one half read after the other (which builds the states
        # every text needs), then the passes over text met again
        await throughput(detect, inputs[0::2])
        unseen, _ = await throughput(detect, inputs[1::2])
        await throughput(detect, inputs)  # warm-up: the RE2 sets build their DFA states
        rates = [await throughput(detect, inputs) for _ in range(3)]
        cpu = statistics.median(r[0] for r in rates)
        wall = statistics.median(r[1] for r in rates)
        worst, label, text = await worst_10k(detect, inputs)
        held = await loop_held(detect, text)
        print(f"{name:<26}{cpu:>9.2f}{wall:>10.2f}{unseen:>8.2f}{worst:>22.2f}{held:>16.2f}"
              f"  {label}")
    print("\nQuality on the project's corpora (rules only):")
    await injection_quality(injection)
    await moderation_quality(moderation)
    await pii_quality(engine)


if __name__ == "__main__":
    anyio.run(main)
