"""A fixed guard workload for instruction counts: text met again, and new text.

``valgrind --tool=callgrind python benchmarks/guard_counts.py GUARD STAGE`` with GUARD
``injection`` or ``moderation`` (the rule scans read in full, no worker threads), or
``settled`` (the injection scan as ``PromptInjectionDetector`` runs it by default: it
stops once a text is flagged at 0.7), and STAGE:

- ``half``: the guard reads one half of ``benchmarks/guards.py``'s mixed set (every
  other input) once;
- ``new``: then reads the other half once (text RE2 has not met: its DFAs build states);
- ``again``: then reads that half a second time.

The count of ``new`` minus ``half`` is the cost of new text, ``again`` minus ``new`` of
text met again. Wall-clock figures on a shared machine moved 2x between runs of the
same tree; these counts repeat (run with ``PYTHONHASHSEED=0``). Objects made before the
measured part are frozen out of the garbage collector, and the script ends with
``os._exit`` so the interpreter's exit is counted on no side.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable
from typing import Any

from guards import mixed_inputs


def main() -> None:
    usage = "usage: guard_counts.py injection|settled|moderation half|new|again"
    if len(sys.argv) != 3 or sys.argv[2] not in ("half", "new", "again"):
        sys.exit(usage)
    scan: Callable[[str], Any]
    if sys.argv[1] == "injection":
        from procflow.processors.builtin.injection.scan import scan
    elif sys.argv[1] == "settled":
        from functools import partial

        from procflow.processors.builtin.injection.scan import scan as full
        scan = partial(full, stop_at=0.7)
    elif sys.argv[1] == "moderation":
        from procflow.processors.builtin.moderation.lexicon import score_text as scan
    else:
        sys.exit(usage)
    inputs = mixed_inputs()
    for text in inputs[0::2]:
        scan(text)
    gc.freeze()
    reads = {"half": 0, "new": 1, "again": 2}[sys.argv[2]]
    for _ in range(reads):
        for text in inputs[1::2]:
            scan(text)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
