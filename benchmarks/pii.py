"""Precision and recall of ``PIIDetector``'s offline rules on the labelled corpus.

``python benchmarks/pii.py [--verbose]``. Loads ``tests/processors/data/pii_corpus.jsonl``
(one ``{"text": ..., "spans": [{"type": ..., "value": ...}]}`` per line; lines without
spans are hard negatives), runs ``detect()`` with every type enabled (so the opt-in
name/address rules are measured too) and prints precision, recall and F1 per type,
with the targets for the structured types, and the share of hard-negative lines with
any detection. A detection is a true positive when its type matches a labelled span's
and the values are equal after trimming or one contains the other. ``--verbose`` lists
every false positive and false negative.

Then, for the opt-in "name" and "address" types only, it scores the tuning file
``pii_names_dev.jsonl`` and the held-out file ``pii_names_heldout.jsonl`` (written after
the rules were frozen; same format plus ``"hard_negative": true`` on lines that must
stay clean: product names, place names, capitalised words at sentence starts): P/R/F1
per type with exact values (a detection counts only if its value equals the label),
and the hard-negative rate (hard-negative lines with any name or address detection).
Exit code always 0 (report, never fail).
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter

import anyio

from procflow.processors.builtin._detection import PIIDetection
from procflow.processors.builtin.pii import ALL_PII_TYPES, PIIDetector

DATA = Path(__file__).resolve().parent.parent / "tests/processors/data"
CORPUS = DATA / "pii_corpus.jsonl"
NAME_FILES = (("dev (tuning)", DATA / "pii_names_dev.jsonl"),
              ("held-out", DATA / "pii_names_heldout.jsonl"))
STRUCTURED = ("email", "phone", "credit-card", "ssn", "ip-address", "url", "uuid", "iban",
              "api-key")
TARGET = 0.95


@dataclass(frozen=True)
class Example:
    text: str
    spans: tuple[tuple[str, str], ...]  # (type, value)


@dataclass
class TypeScore:
    labels: int = 0
    found: int = 0
    true_pos: int = 0  # detections that match a label
    matched: int = 0  # labels matched by a detection

    @property
    def precision(self) -> float:
        return self.true_pos / self.found if self.found else 1.0

    @property
    def recall(self) -> float:
        return self.matched / self.labels if self.labels else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


@dataclass
class Report:
    scores: dict[str, TypeScore] = field(default_factory=dict)
    negatives: int = 0
    flagged_negatives: int = 0
    lines: int = 0
    seconds: float = 0.0
    misses: list[str] = field(default_factory=list)

    def score(self, pii_type: str) -> TypeScore:
        return self.scores.setdefault(pii_type, TypeScore())


def load_corpus(path: Path = CORPUS) -> list[Example]:
    """The labelled lines of the corpus."""
    out: list[Example] = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                out.append(Example(row["text"], tuple((s["type"], s["value"])
                                                      for s in row["spans"])))
    return out


def same_value(found: str, label: str) -> bool:
    """Trimmed equality, or containment either way."""
    a, b = found.strip(), label.strip()
    return bool(a and b) and (a == b or a in b or b in a)


def _score_line(report: Report, ex: Example, found: Sequence[PIIDetection]) -> None:
    for pii_type, value in ex.spans:
        report.score(pii_type).labels += 1
        if any(d.type == pii_type and same_value(d.value, value) for d in found):
            report.score(pii_type).matched += 1
        else:
            report.misses.append(f"FN {pii_type:13} {value!r:50.50} in {ex.text!r:.80}")
    for d in found:
        report.score(d.type).found += 1
        if any(t == d.type and same_value(d.value, v) for t, v in ex.spans):
            report.score(d.type).true_pos += 1
        else:
            report.misses.append(f"FP {d.type:13} {d.value!r:50.50} in {ex.text!r:.80}")
    if not ex.spans:
        report.negatives += 1
        report.flagged_negatives += bool(found)


async def evaluate(examples: Sequence[Example], detector: PIIDetector | None = None) -> Report:
    """Run ``detector`` (default: offline rules, every type) over ``examples``."""
    detector = detector or PIIDetector(detection_types=ALL_PII_TYPES)
    report = Report(lines=len(examples))
    started = perf_counter()
    for ex in examples:
        _score_line(report, ex, await detector.detect(ex.text))
    report.seconds = perf_counter() - started
    return report


def render(report: Report) -> str:
    """The report as a text table."""
    rows = [f"PII detector benchmark: {report.lines} lines ({report.negatives} hard "
            f"negatives), offline rules, all {len(ALL_PII_TYPES)} types, "
            f"{report.seconds * 1000:.0f} ms",
            f"{'type':14} {'labels':>6} {'found':>6} {'TP':>5} {'FP':>4} {'FN':>4} "
            f"{'precision':>9} {'recall':>7} {'F1':>6}  target"]
    for pii_type in ALL_PII_TYPES:
        s = report.score(pii_type)
        if pii_type in STRUCTURED:
            ok = s.precision >= TARGET and s.recall >= TARGET
            target = f"P>={TARGET} R>={TARGET} {'PASS' if ok else 'FAIL'}"
        else:
            target = "(none)"
        rows.append(f"{pii_type:14} {s.labels:6} {s.found:6} {s.true_pos:5} "
                    f"{s.found - s.true_pos:4} {s.labels - s.matched:4} {s.precision:9.3f} "
                    f"{s.recall:7.3f} {s.f1:6.3f}  {target}")
    share = report.flagged_negatives / report.negatives if report.negatives else 0.0
    rows.append(f"hard-negative lines with any detection: {report.flagged_negatives}/"
                f"{report.negatives} = {share:.1%}")
    return "\n".join(rows)


async def names_report(path: Path, verbose: bool = False) -> str:
    """Exact-value P/R/F1 for "name" and "address" on one file, and its hard-negative
    rate."""
    detector = PIIDetector(detection_types=["name", "address"])
    counts = {t: {"tp": 0, "fp": 0, "fn": 0} for t in ("name", "address")}
    negatives = flagged = 0
    lines: list[str] = []
    with path.open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    for row in rows:
        want = [(s["type"], s["value"]) for s in row["spans"]]
        got = [(d.type, d.value) for d in await detector.detect(row["text"])]
        for item in got:
            hit = item in want
            counts[item[0]]["tp" if hit else "fp"] += 1
            if hit:
                want.remove(item)
            else:
                lines.append(f"  FP {item[0]:8} {item[1]!r} in {row['text']!r:.90}")
        for kind, value in want:
            counts[kind]["fn"] += 1
            lines.append(f"  FN {kind:8} {value!r} in {row['text']!r:.90}")
        if row.get("hard_negative"):
            negatives += 1
            flagged += bool(got)
    out = [f"{path.name}: {len(rows)} lines"]
    for kind, c in counts.items():
        p = c["tp"] / (c["tp"] + c["fp"]) if c["tp"] + c["fp"] else 1.0
        r = c["tp"] / (c["tp"] + c["fn"]) if c["tp"] + c["fn"] else 1.0
        f = 2 * p * r / (p + r) if p + r else 0.0
        out.append(f"  {kind:8} P {p:.3f}  R {r:.3f}  F1 {f:.3f}  "
                   f"(tp {c['tp']}, fp {c['fp']}, fn {c['fn']})")
    out.append(f"  hard negatives flagged: {flagged}/{negatives} = "
               f"{flagged / negatives if negatives else 0.0:.1%}")
    return "\n".join(out + (lines if verbose else []))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true", help="list every FP and FN")
    args = parser.parse_args(argv)
    try:
        report = anyio.run(evaluate, load_corpus())
        print(render(report))
        if args.verbose:
            print("\n".join(report.misses))
        print("\nNames and addresses (opt-in types, exact values):")
        for label, path in NAME_FILES:
            if path.exists():
                print(f"[{label}] " + anyio.run(names_report, path, args.verbose))
    except Exception:
        traceback.print_exc()
    return 0


if __name__ == "__main__":
    sys.exit(main())
