"""``procflow prune``: delete the finished runs older than an age (``prune_runs``)."""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

from rich.console import Console
from rich.text import Text

from procflow._durations import parse_duration
from procflow.storage.retention import PrunedRun, prune_runs
from procflow.studio.output import dump, masked, output_mode, plain_time
from procflow.studio.store import Store

__all__ = ["age_argument", "parse_age", "prune_command"]

def parse_age(text: str) -> float:
    """Seconds in an age such as "30d", "12h", "90m", "45s", "2w" or "3600".

    Raises:
        ValueError: ``text`` is not one (the command's one-line usage error).
    """
    seconds = parse_duration(text)
    if seconds is None:
        raise ValueError(f"must be an age such as 30d, 12h, 90m, 45s or a number of seconds, "
                         f"got {text!r}")
    return seconds


def age_argument(text: str) -> float:
    """``parse_age`` as an argparse ``type``: a bad age is a usage error before any store
    is looked for."""
    try:
        return parse_age(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


async def prune_command(args: argparse.Namespace, console: Console, store: Store) -> int:
    """Prune ``store`` as the arguments say; print what was (or would be) deleted."""
    seconds: float = args.older_than  # an age_argument
    before = time.time() - seconds
    runs = await prune_runs(store.storage, older_than=seconds, workflow_id=args.workflow,
                            status=args.status, dry_run=args.dry_run)
    mode = output_mode(args, console)
    if mode == "json":
        print(dump({"store": store.location, "dry_run": bool(args.dry_run),
                    "before": plain_time(before), "runs": [
                        {"run_id": r.run_id, "workflow_id": r.workflow_id, "status": r.status,
                         "updated_at": plain_time(r.updated_at), "trace_only": r.trace_only}
                        for r in runs]}))
        return 0
    summary = _summary(runs, store.location, before, dry_run=bool(args.dry_run))
    if mode == "plain":
        for r in runs:
            print("\t".join([r.run_id, masked(r.workflow_id), r.status,
                             plain_time(r.updated_at) or "-",
                             "trace only" if r.trace_only else "run"]))
        print(summary, file=sys.stderr)
        return 0
    console.print(Text(summary), soft_wrap=True)
    return 0


def _summary(found: list[PrunedRun], where: str, before: float, *, dry_run: bool) -> str:
    cutoff = plain_time(before)
    runs = [r for r in found if not r.trace_only]
    lone = len(found) - len(runs)
    if not found:
        return f"no finished runs last updated before {cutoff} in {where}"
    verb = "would delete" if dry_run else "deleted"
    # traces stored without a run (ephemeral runs'): named apart, they are not runs
    traces = f"{lone} trace{'' if lone == 1 else 's'} stored without a run"
    if not runs:
        return f"{verb} {traces} (ended before {cutoff}) from {where}; no finished runs"
    counts = Counter(r.status for r in runs)
    by_status = ", ".join(f"{status} {n}" for status, n in sorted(counts.items()))
    noun = "run" if len(runs) == 1 else "runs"
    return (f"{verb} {len(runs)} finished {noun} last updated before {cutoff} "
            f"from {where} ({by_status}){f'; and {traces}' if lone else ''}")
