"""Offline detector quality: PromptInjectionDetector and ModerationProcessor on the
hand-written corpora in ``tests/processors/data``.

``python benchmarks/injection.py``. Rules only (no model). Prints recall, precision,
F1 and the false-positive rate on benign lines for prompt injection, recall per attack
family, the benign lines that fired and the attacks that slipped through, then
moderation precision/recall (overall and per category), with PASS/FAIL against the
targets. Exit code always 0 (report, never fail); the pass/fail gate lives in
``tests/processors/test_injection.py``.

Lines marked ``"split": "heldout"`` were written after the rules and never used to
tune them: their figures are the honest estimate for unseen phrasing. The other lines
were written alongside the rules (the rules were widened until they pass), so their
figures are an upper bound. Keep it that way: add new tuning lines rather than
fitting the rules to the held-out ones.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections import Counter
from pathlib import Path
from time import perf_counter
from typing import Any

import anyio

from procflow.processors.builtin.injection import PromptInjectionDetector
from procflow.processors.builtin.moderation import ModerationProcessor

DATA = Path(__file__).resolve().parent.parent / "tests" / "processors" / "data"
RECALL_TARGET = 0.90
FPR_TARGET = 0.03


def load(name: str) -> list[dict[str, Any]]:
    with (DATA / name).open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def ratio(num: int, den: int) -> float:
    return num / den if den else 0.0


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def injection_figures(title: str, flags: list[tuple[dict[str, Any], bool]]) -> None:
    attacks = [(r, f) for r, f in flags if r["label"] == "attack"]
    benign = [(r, f) for r, f in flags if r["label"] == "benign"]
    tp = sum(f for _, f in attacks)
    fp = sum(f for _, f in benign)
    recall, precision = ratio(tp, len(attacks)), ratio(tp, tp + fp)
    fpr = ratio(fp, len(benign))
    print(f"  {title} ({len(attacks)} attacks, {len(benign)} benign):")
    print(f"    recall     {recall:.3f}   target >= {RECALL_TARGET:.2f}  "
          f"{verdict(recall >= RECALL_TARGET)}")
    print(f"    FPR        {fpr:.3f}   target <= {FPR_TARGET:.2f}  "
          f"{verdict(fpr <= FPR_TARGET)}")
    print(f"    precision  {precision:.3f}")
    print(f"    F1         {f1(precision, recall):.3f}")


async def injection_report() -> None:
    rows = load("injection_corpus.jsonl")
    detector = PromptInjectionDetector()
    start = perf_counter()
    flags = [(r, (await detector.detect(r["text"])).flagged) for r in rows]
    elapsed = perf_counter() - start
    print(f"Prompt injection (rules only) — {len(rows)} lines; "
          f"{1000 * elapsed / len(rows):.2f} ms/line")
    injection_figures("all lines", flags)
    injection_figures("tuning lines", [(r, f) for r, f in flags if r.get("split") != "heldout"])
    injection_figures("held-out lines", [(r, f) for r, f in flags
                                         if r.get("split") == "heldout"])
    attacks = [(r, f) for r, f in flags if r["label"] == "attack"]
    print("  recall per family (all lines):")
    totals = Counter(r["family"] for r, _ in attacks)
    hits = Counter(r["family"] for r, f in attacks if f)
    for family in sorted(totals):
        print(f"    {family:<28} {hits[family]:>3}/{totals[family]:<3} "
              f"{ratio(hits[family], totals[family]):.3f}")
    benign = [(r, f) for r, f in flags if r["label"] == "benign"]
    for label, items in (("missed attacks", [r for r, f in attacks if not f]),
                         ("benign lines flagged", [r for r, f in benign if f])):
        print(f"  {label}: {len(items)}")
        for r in items:
            where = " (held-out)" if r.get("split") == "heldout" else ""
            print(f"    - [{r['family']}]{where} {r['text'][:80]!r}")


def moderation_figures(title: str, results: list[tuple[dict[str, Any], Any]]) -> None:
    positives = [v for r, v in results if r["label"] == "flagged"]
    tp = sum(v.flagged for v in positives)
    fp = sum(v.flagged for r, v in results if r["label"] == "benign")
    benign = len(results) - len(positives)
    print(f"  {title} ({len(positives)} flagged, {benign} benign):")
    print(f"    recall     {ratio(tp, len(positives)):.3f}")
    print(f"    precision  {ratio(tp, tp + fp):.3f}")
    print(f"    FPR        {ratio(fp, benign):.3f}")


async def moderation_report() -> None:
    rows = load("moderation_corpus.jsonl")
    moderation = ModerationProcessor()
    results = [(r, await moderation.detect(r["text"])) for r in rows]
    print(f"\nModeration (lexicon only) — {len(rows)} lines")
    moderation_figures("all lines", results)
    moderation_figures("tuning lines", [(r, v) for r, v in results if r.get("split") != "heldout"])
    moderation_figures("held-out lines", [(r, v) for r, v in results
                                          if r.get("split") == "heldout"])
    print("  recall per expected category (category scored >= threshold, all lines):")
    totals: Counter[str] = Counter()
    found: Counter[str] = Counter()
    for r, v in results:
        for category in r["categories"]:
            totals[category] += 1
            found[category] += v.categories.get(category, 0.0) >= moderation.threshold
    for category in sorted(totals):
        print(f"    {category:<24} {found[category]:>3}/{totals[category]:<3} "
              f"{ratio(found[category], totals[category]):.3f}")


async def main() -> None:
    await injection_report()
    await moderation_report()


if __name__ == "__main__":
    try:
        anyio.run(main)
    except Exception:
        traceback.print_exc()
    sys.exit(0)
