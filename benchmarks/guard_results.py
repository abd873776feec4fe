"""Check that a change to the injection or moderation guard leaves every result as it was.

``python benchmarks/guard_results.py dump OUT [--no-re2]`` writes, for ~10,000 inputs,
the injection scan's full result (scores, reason, every hit with its rule, weight,
view, span and snippet), its neutralised text and the moderation verdict to ``OUT``
(JSON lines). ``python benchmarks/guard_results.py compare A B`` prints how many
inputs differ and the first few differences, field by field.

The inputs: the benchmark set of ``guards.py``, 40 windows of 10 KB of it, the
adversarial inputs at 3 and 10 KB, the five labelled corpora, ROT13 / reversed /
spaced / leet / dashed / upper-case variants of the attack texts and 3,000 attack
texts fuzzed into benchmark text (a fixed seed). Dump the tree before a change, the
tree after it (``git worktree add --detach /tmp/before HEAD`` and
``PYTHONPATH=/tmp/before python benchmarks/guard_results.py dump before.jsonl``), with
and without RE2, and compare: a speed-up must show "0 differ". The inputs are made
from this checkout's README and docs, so make both dumps with the same script file.
"""

from __future__ import annotations

import argparse
import codecs
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
import guards  # beside this file

_LEET = str.maketrans("aeiost", "4310$7")
_NOISE = "0@ .-_'\"“”([{\u00a0\u200bé"


def inputs() -> list[str]:
    """The inputs, in a fixed order."""
    base = guards.mixed_inputs()
    out = list(base)
    joined = "\n".join(base)
    out += [joined[i:i + 10_000] for i in range(0, len(joined) - 10_000, len(joined) // 40)]
    for size in (3_000, 10_000):
        out += list(guards.adversarial(size).values())
    for name in ("injection_corpus.jsonl", "moderation_corpus.jsonl", "pii_corpus.jsonl",
                 "pii_names_dev.jsonl", "pii_names_heldout.jsonl"):
        out += [row["text"] for row in guards.load(name)]
    attacks = [row["text"] for row in guards.load("injection_corpus.jsonl")]
    for text in attacks:
        out += [codecs.encode(text, "rot13"), text[::-1], " ".join(text),
                text.translate(_LEET), "-".join(text[:60]), text.upper()]
    out += list(_fuzzed(attacks, base))
    return out


def _fuzzed(attacks: list[str], base: list[str]) -> Iterator[str]:
    rng = random.Random(7)
    for _ in range(3_000):
        attack, host = list(rng.choice(attacks)), rng.choice(base)
        for _ in range(rng.randrange(4)):
            if attack:
                attack[rng.randrange(len(attack))] = rng.choice(_NOISE)
        at = rng.randrange(len(host) + 1)
        text = host[max(0, at - 300):at] + "".join(attack) + host[at:at + 300]
        yield "what does '" + text + "' mean? explain the attack" if rng.random() < 0.2 else text


async def dump(path: Path, engine: Literal["re2", "re"]) -> int:
    from procflow.processors.builtin.injection.scan import neutralise, scan
    from procflow.processors.builtin.moderation import ModerationProcessor

    moderation = ModerationProcessor(engine=engine)
    texts = inputs()
    with path.open("w", encoding="utf-8") as out:
        for text in texts:
            found = scan(text, engine=engine)
            hits = [[h.rule.name if h.rule else None, h.weight, h.view, h.start, h.end,
                     h.snippet, h.family, h.category] for h in found.hits]
            row = {"scores": found.scores, "reason": found.reason, "hits": hits,
                   "neutralised": neutralise(text, found.hits),
                   "moderation": repr(await moderation.detect(text))}
            out.write(json.dumps(row, sort_keys=True) + "\n")
    return len(texts)


def compare(a: Path, b: Path, shown: int = 5) -> int:
    """Print the differences; the number of inputs that differ."""
    left = a.read_text(encoding="utf-8").splitlines()
    right = b.read_text(encoding="utf-8").splitlines()
    if len(left) != len(right):
        print(f"{a} holds {len(left)} inputs, {b} {len(right)}: not the same inputs")
        return max(len(left), len(right))
    differ = [i for i, (x, y) in enumerate(zip(left, right, strict=True)) if x != y]
    print(f"{len(left)} inputs, {len(differ)} differ")
    texts = inputs() if differ else []
    for i in differ[:shown]:
        x: dict[str, Any] = json.loads(left[i])
        y: dict[str, Any] = json.loads(right[i])
        print(f"--- input {i}: {texts[i][:100]!r}")
        for key in sorted(x):
            if x[key] != y.get(key):
                print(f"  {key}:\n    A {str(x[key])[:300]}\n    B {str(y.get(key))[:300]}")
    return len(differ)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump", help="write every result to a file")
    d.add_argument("out", type=Path)
    d.add_argument("--no-re2", action="store_true", help="the rule tables without RE2")
    c = sub.add_parser("compare", help="compare two dumps")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = parser.parse_args()
    if args.command == "dump":
        engine: Literal["re2", "re"] = "re" if args.no_re2 else "re2"
        print(f"{anyio.run(dump, args.out, engine)} inputs written to {args.out}")
    else:
        sys.exit(1 if compare(args.a, args.b) else 0)


if __name__ == "__main__":
    main()
