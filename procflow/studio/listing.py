"""``procflow runs``: stored runs (agent runs too), newest first, as a table sized to
its content on a terminal, tab-separated lines in a pipe, or one JSON document."""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, cast

from rich import box
from rich.table import Table
from rich.text import Text

from procflow.records import Usage
from procflow.runtime.leases import owner_is_dead
from procflow.studio.graph import format_duration
from procflow.studio.output import (
    dump,
    format_cost,
    masked,
    plain_duration,
    plain_time,
    run_row_document,
)
from procflow.studio.store import short_ids
from procflow.studio.summary import RUN_SYMBOLS

if TYPE_CHECKING:
    from rich.console import Console

    from procflow.runtime.results import RunStatus
    from procflow.storage.base import Storage
    from procflow.studio.store import Store

__all__ = ["RunRow", "print_runs", "run_rows"]


@dataclass(slots=True)
class RunRow:
    """One listed run."""

    run_id: str
    workflow_id: str
    status: str
    started: float
    duration: float | None
    suspended: list[str] = field(default_factory=list)
    usage: Usage | None = None
    """Tokens and cost of the run's model calls (from its trace), when it made any."""


async def run_rows(storage: Storage, workflow: str | None, status: str | None,
                   limit: int) -> list[RunRow]:
    """Every traced run (agent runs too) merged with the stored run snapshots; a
    "running" run without a live lease is shown as "stalled"."""
    rows: dict[str, RunRow] = {}
    stored_status = "running" if status == "stalled" else status
    for trace in await storage.list_traces(workflow_id=workflow, status=stored_status,
                                           limit=limit):
        duration = None if trace.ended_at is None else trace.ended_at - trace.started_at
        rows[trace.run_id] = RunRow(trace.run_id, trace.workflow_id, trace.status,
                                    trace.started_at, duration)
    snapshots = await storage.list_runs(workflow_id=workflow, limit=limit,
                                        status=cast("RunStatus | None", stored_status))
    for snap in snapshots:
        shown: str = snap.status
        if shown == "running":
            lease = await storage.get_lease(snap.workflow_id, snap.run_id)
            if lease is None or owner_is_dead(lease.owner):
                shown = "stalled"
        row = rows.get(snap.run_id)
        suspended = [".".join(p) for p in snap.suspended] if shown == "suspended" else []
        if row is None:
            final = shown not in ("pending", "running", "stalled")
            rows[snap.run_id] = RunRow(snap.run_id, snap.workflow_id, shown,
                                       snap.created_at,
                                       snap.updated_at - snap.created_at if final else None,
                                       suspended)
        else:
            row.status, row.suspended = shown, suspended
    ordered = sorted((r for r in rows.values() if status is None or r.status == status),
                     key=lambda r: r.started, reverse=True)[:limit]
    for row in ordered:
        row.usage = await _usage_of(storage, row.run_id)
    return ordered


async def _usage_of(storage: Storage, run_id: str) -> Usage | None:
    """What the run's model calls spent: the ``usage`` its run span records."""
    trace = await storage.load_trace(run_id)
    if trace is None:
        return None
    for span in trace.spans:
        if span.get("parent_id") is None and span.get("kind") == "run":
            usage = (span.get("attributes") or {}).get("usage")
            try:
                return Usage.from_dict(usage) if isinstance(usage, dict) else None
            except ValueError:
                return None
    return None



async def print_runs(console: Console, store: Store, *, mode: str, workflow: str | None,
                     status: str | None, limit: int) -> int:
    """Print the runs in ``mode`` ("tty", "plain" or "json"); returns the exit status."""
    rows = await run_rows(store.storage, workflow, status, limit)
    if mode == "json":
        print(dump({"store": store.location, "runs": [
            run_row_document(r.run_id, r.workflow_id, r.status, r.started, r.duration,
                             r.suspended, r.usage) for r in rows]}))
        return 0
    if mode == "plain":
        for r in rows:
            usage = r.usage
            spent = ["-", "-"] if usage is None else [str(usage.total_tokens),
                                                        format_cost(usage.cost)]
            print("\t".join([r.run_id, masked(r.workflow_id), r.status,
                             plain_time(r.started) or "-", plain_duration(r.duration),
                             *spent, ",".join(r.suspended)]).rstrip("\t"))
        if not rows:
            which = " matching" if workflow or status else ""
            print(f"no{which} runs in {store.location}", file=sys.stderr)
        return 0
    if not rows:
        which = " matching" if workflow or status else ""
        console.print(Text(f"no{which} runs in {store.location}"), soft_wrap=True)
        return 0
    ids = await short_ids(store.storage, [r.run_id for r in rows])
    console.print(Text(f"runs in {store.location}, newest first"), soft_wrap=True)
    console.print(_table(rows, ids))
    waiting = [r for r in rows if r.suspended]
    if waiting:
        console.print("resume a suspended run with (TARGET: the file.py:name defining its "
                      "workflow):")
        db = " ".join(shlex.quote(w) for w in store.db_words())
        for row in waiting:
            line = (f"  procflow {db + ' ' if db else ''}run TARGET --resume "
                    f"{shlex.quote(row.suspended[0])} --run {ids[row.run_id]} --data JSON")
            console.print(Text(line), soft_wrap=True)
    return 0


def _table(rows: list[RunRow], ids: dict[str, str]) -> Table:
    """Every column as wide as its content and never wrapped, except the workflow
    names: they wrap when the terminal is too narrow for the rest."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("run id", no_wrap=True)
    table.add_column("workflow", overflow="fold")
    table.add_column("status", no_wrap=True)
    table.add_column("started", no_wrap=True)
    table.add_column("duration", no_wrap=True, justify="right")
    spent = any(row.usage is not None for row in rows)
    if spent:
        table.add_column("tokens", no_wrap=True, justify="right")
        table.add_column("cost", no_wrap=True, justify="right")
    for row in rows:
        symbol, style = RUN_SYMBOLS.get(row.status, ("?", ""))
        state = Text(f"{symbol} {row.status}", style=style)
        if row.suspended:
            state.append(f" at {', '.join(row.suspended)}")
        cells: list[str | Text] = [
            ids[row.run_id], masked(row.workflow_id), state, _when(row.started),
            "—" if row.duration is None else format_duration(row.duration)]
        if spent:
            usage = row.usage
            cells += (["—", "—"] if usage is None else
                      [f"{usage.total_tokens:,}", format_cost(usage.cost)])
        table.add_row(*cells)
    return table


def _when(timestamp: float) -> str:
    """ "11-30 06:52:32" this year, "2023-11-30 06:52" before."""
    moment = datetime.fromtimestamp(timestamp)
    same_year = moment.year == datetime.now().year
    return moment.strftime("%m-%d %H:%M:%S" if same_year else "%Y-%m-%d %H:%M")
