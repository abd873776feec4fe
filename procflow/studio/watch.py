"""``procflow watch RUN_ID``: attach to a run started elsewhere (another process, a
worker) and follow it from what storage holds, to its end.

The watcher only reads: it polls the run's stored snapshot (its status and each
step's result as the run records them) and, once the run ends, its trace. In a
terminal the steps are drawn live; piped, each change is one tab-separated line; with
``--json`` one document is printed at the end. The exit status is the run's end:
0 success, 1 failed, tripwire or canceled, 3 suspended (waiting for resume data),
4 stalled (still "running" with no live lease: the process running it stopped).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from rich.console import Group
from rich.live import Live
from rich.text import Text

from procflow.errors import RunNotFoundError
from procflow.runtime.watch import ENDED, RunChange, watch_run
from procflow.studio.graph import _STATUS, format_duration
from procflow.studio.output import dump, masked, output_mode, plain_duration

if TYPE_CHECKING:
    import argparse

    from rich.console import Console

    from procflow.storage.base import Storage
    from procflow.studio.store import Store

__all__ = ["EXIT_STATUS", "RunWatch", "watch_command"]

EXIT_STATUS = {"success": 0, "failed": 1, "tripwire": 1, "canceled": 1, "corrupted": 1,
               "suspended": 3, "stalled": 4}
"""The exit status of ``procflow watch`` for each way a run ends."""



@dataclass
class RunWatch:
    """What the watcher knows of the run: its status and each step's, as stored.

    Attributes:
        run_id: The run.
        workflow_id: Its workflow.
        status: The run's status ("stalled" once it is found so).
        steps: Step path -> (status, seconds or ``None``), in the order first seen.
    """

    run_id: str
    workflow_id: str
    status: str = "pending"
    started: float = field(default_factory=time.time)
    steps: dict[str, tuple[str, float | None]] = field(default_factory=dict)
    error: str | None = None

    def update(self, change: RunChange) -> None:
        """Take in one change of the run (``watch_run``)."""
        self.status = change.status
        if change.step is not None:
            self.steps[change.step] = (change.step_status or "?", change.duration)
        elif change.error is not None:
            self.error = masked(change.error)

    @property
    def ended(self) -> bool:
        return self.status in ENDED

    def document(self) -> dict[str, Any]:
        """``procflow watch --json``: the run's end and its steps."""
        return {"run_id": self.run_id, "workflow_id": self.workflow_id,
                "status": self.status, "error": self.error,
                "steps": [{"path": p, "status": s, "duration_s": d}
                          for p, (s, d) in self.steps.items()]}

    def __rich__(self) -> Group:
        symbol, style = _STATUS.get(self.status, ("◐", "yellow"))
        if self.status == "stalled":
            symbol, style = "◌", "red"
        lines = [Text.assemble(("watching ", "dim"), ("workflow ", "dim"),
                               (self.workflow_id, "bold"), ("  run ", "dim"), self.run_id,
                               "  ", (f"{symbol} {self.status}", style),
                               ("  " + format_duration(max(0.0, time.time() - self.started))
                                if not self.ended else "", "dim"))]
        for path, (status, took) in self.steps.items():
            mark, mark_style = _STATUS.get(status, ("?", ""))
            lines.append(Text.assemble((f"  {mark} ", mark_style), path,
                                       (f"  {format_duration(took)}" if took is not None
                                        else "", "dim")))
        if self.error:
            lines.append(Text(f"  ✖ {self.error}", style="red"))
        return Group(*lines)


async def watch_command(args: argparse.Namespace, console: Console) -> int:
    """``procflow watch``: follow a stored run to its end; returns the exit status."""
    from procflow.studio.store import NoStoreError, find_store

    deadline = time.monotonic() + args.wait
    while True:  # the database may be about to be made by the run watched
        try:
            store = find_store(args.db, create=False)
            break
        except NoStoreError as exc:
            if time.monotonic() >= deadline:
                raise RunNotFoundError(f"{exc}; waited {args.wait:g}s for it",
                                       run_id=args.run_id) from exc
            await anyio.sleep(args.interval)
    try:
        return await _watch(args, console, store)
    finally:
        await store.storage.aclose()


async def _watch(args: argparse.Namespace, console: Console, store: Store) -> int:
    storage = store.storage
    watch = await _attach(storage, args.run_id, store.location,
                          max(0.0, args.wait), args.interval)
    mode = output_mode(args, console)
    if mode == "json":
        async for _ in _follow(storage, watch, args.interval):
            pass
        print(dump(watch.document()))
    elif mode == "plain":
        print(f"# watching workflow {watch.workflow_id}\trun {watch.run_id}")
        async for path, status, took in _follow(storage, watch, args.interval):
            print(f"{plain_duration(time.time() - watch.started)}\t{status}\t"
                  f"{plain_duration(took)}\t{path}", flush=True)
        print(f"# run {watch.run_id}\t{watch.status}"
              + (f"\terror: {watch.error}" if watch.error else ""))
    else:
        with Live(watch, console=console, refresh_per_second=8, transient=False):
            async for _ in _follow(storage, watch, args.interval):
                pass
    return EXIT_STATUS.get(watch.status, 1)


async def _attach(storage: Storage, given: str, where: str, wait: float,
                  interval: float) -> RunWatch:
    """The run ``given`` names (a full id or a unique prefix), waiting up to ``wait``
    seconds for it to be stored (a run just started elsewhere)."""
    from procflow.studio.store import resolve_run_id

    deadline = time.monotonic() + wait
    while True:
        try:
            run_id = await resolve_run_id(storage, given, where)
        except RunNotFoundError:
            run_id = None
        if run_id is not None:
            found = [r for r in await storage.list_runs() if r.run_id == run_id]
            if found:
                return RunWatch(run_id, found[0].workflow_id,
                                started=found[0].created_at or time.time())
        if time.monotonic() >= deadline:
            raise RunNotFoundError(
                f"no run '{given}' in {where} after waiting {wait:g}s (see 'procflow runs'; "
                "--wait SECONDS waits longer for a run about to start)", run_id=given)
        await anyio.sleep(interval)


async def _follow(storage: Storage, watch: RunWatch, interval: float,
                  ) -> AsyncIterator[tuple[str, str, float | None]]:
    """Follow the run to its end, yielding each step change."""
    changes = watch_run(storage, watch.workflow_id, watch.run_id, interval=interval)
    async with aclosing(changes):
        async for change in changes:
            watch.update(change)
            if change.step is not None:
                yield change.step, change.step_status or "?", change.duration
