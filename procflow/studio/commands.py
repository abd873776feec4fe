"""The ``procflow`` subcommands, as async functions of the parsed arguments."""

from __future__ import annotations

import argparse
import json
import shlex
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from procflow.errors import RunNotFoundError
from procflow.runtime.defaults import get_default_storage, set_default_storage
from procflow.storage.sqlite import SQLiteStorage
from procflow.studio.export import to_dot, to_mermaid
from procflow.studio.graph import GraphView, format_duration
from procflow.studio.live import LiveRun
from procflow.studio.states import states_from_steps
from procflow.studio.summary import (
    RUN_SYMBOLS,
    print_agent_failure,
    print_agent_summary,
    print_workflow_summary,
)
from procflow.studio.targets import is_agent, load_target
from procflow.workflows.workflow import Workflow

if TYPE_CHECKING:
    from procflow.agent.agent import Agent
    from procflow.runtime.results import RunStatus, WorkflowResult
    from procflow.runtime.run import Run
    from procflow.storage.base import Storage

__all__ = ["UsageError", "parse_json", "run_command"]

_DEFAULT_DB = ".procflow/procflow.db"


class UsageError(Exception):
    """The command line asks for something that cannot be done; one line for the user."""


def parse_json(value: str, option: str) -> Any:
    """An option's JSON value; ``@path`` reads the JSON from a file.

    Raises:
        UsageError: The file is missing or the text is not JSON.
    """
    where = ""
    if value.startswith("@"):
        path = Path(value[1:])
        if not path.is_file():
            raise UsageError(f"no such file: {path} (from {option} {value})")
        value, where = path.read_text(encoding="utf-8"), f" in {path}"
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise UsageError(f"invalid {option} JSON{where}: {exc}") from exc


async def run_command(args: argparse.Namespace, console: Console) -> int:
    """Run the parsed subcommand; returns the exit status."""
    if args.command == "graph":
        return _graph(args, console)
    db = Path(args.db)
    db.parent.mkdir(parents=True, exist_ok=True)
    storage = SQLiteStorage(db)
    previous = get_default_storage()
    set_default_storage(storage)  # agent runs store their traces through the default
    try:
        handler: Callable[[argparse.Namespace, Console, Storage], Awaitable[int]] = {
            "run": _run, "runs": _runs, "trace": _trace}[args.command]
        return await handler(args, console, storage)
    finally:
        set_default_storage(previous)
        await storage.aclose()


def _graph(args: argparse.Namespace, console: Console) -> int:
    target = load_target(args.target)
    if args.depth is not None and args.depth < 0:
        raise UsageError(f"--depth must be 0 or more, got {args.depth}")
    if args.format == "mermaid":
        print(to_mermaid(target, depth=args.depth), end="")
    elif args.format == "dot":
        print(to_dot(target), end="")
    else:
        console.print(GraphView(target, depth=1 if args.depth is None else args.depth))
    return 0


# -- run -------------------------------------------------------------------------


async def _run(args: argparse.Namespace, console: Console, storage: Storage) -> int:
    target = load_target(args.target)
    _check_run_options(args, is_agent(target))
    live = LiveRun(console, live=console.is_terminal and not args.no_live,
                   depth=max(0, args.depth))
    if not isinstance(target, Workflow):
        return await _run_agent(args, console, storage, target, live)
    wf = target
    if args.run_id is not None and await storage.load_snapshot(wf.id, args.run_id):
        raise UsageError(f"run '{args.run_id}' already exists in {args.db}; choose another "
                         "--run-id")
    if args.from_step is not None:
        stored = await _load_run(wf, args.run, storage, args.db)
        started = time.time()
        replayed = await stored.replay_from(args.from_step, run_id=args.run_id)
        result = replayed.result
        if result is None:  # pragma: no cover - replay_from returns a finished run
            raise UsageError(f"replaying run '{args.run}' from '{args.from_step}' gave no result")
        live.print_final(wf, states_from_steps(result.steps, kept_before=started,
                                               kept_note="kept, not re-run"))
        console.print(Text(f"replayed run {args.run} from step {args.from_step} as a new run"),
                      soft_wrap=True)
    elif args.resume is not None:
        stored = await _load_run(wf, args.run, storage, args.db)
        data = parse_json(args.data, "--data") if args.data is not None else None
        before = states_from_steps(stored.result.steps) if stored.result else {}
        result = await live.workflow(wf, stored.resume_stream(args.resume, data),
                                     initial=before)
    else:
        data = parse_json(args.input, "--input") if args.input is not None else None
        run = wf.create_run(args.run_id, storage=storage)
        result = await live.workflow(wf, run.stream(input_data=data))
    print_workflow_summary(console, result, resume_command=lambda step: _resume_line(
        args, step, result))
    return 0 if result.status in ("success", "suspended") else 1


def _check_run_options(args: argparse.Namespace, agent: bool) -> None:
    if args.resume is not None and args.from_step is not None:
        raise UsageError("--resume and --from-step cannot be used together")
    stored = args.resume is not None or args.from_step is not None
    option = "--resume" if args.resume is not None else "--from-step"
    if agent and (stored or args.run is not None):
        raise UsageError(f"{option if stored else '--run'} works on a Workflow target, and "
                         f"{args.target} is an Agent")
    if stored and args.run is None:
        raise UsageError(f"{option} needs --run RUN_ID (the stored run; see 'procflow runs')")
    if not stored and args.run is not None:
        raise UsageError("--run needs --resume STEP or --from-step STEP")
    if stored and args.input is not None:
        raise UsageError(f"--input cannot be used with {option}: the run's stored input "
                         "is used")
    if args.resume is not None and args.run_id is not None:
        raise UsageError("--run-id cannot be used with --resume: the run keeps its id")
    if args.data is not None and args.resume is None:
        raise UsageError("--data goes with --resume STEP")


async def _load_run(wf: Workflow, run_id: str, storage: Storage, db: str) -> Run:
    try:
        return await wf.get_run(run_id, storage=storage)
    except RunNotFoundError as exc:
        trace = await storage.load_trace(run_id)
        also = f" (it is a run of workflow '{trace.workflow_id}')" if trace else ""
        raise RunNotFoundError(f"no run '{run_id}' of workflow '{wf.id}' in {db}{also}",
                               workflow_id=wf.id, run_id=run_id) from exc


def _resume_line(args: argparse.Namespace, step: str, result: WorkflowResult) -> str:
    words = ["procflow"]
    if args.db != _DEFAULT_DB:
        words += ["--db", args.db]
    words += ["run", args.target, "--resume", step, "--run", result.run_id, "--data"]
    return " ".join(shlex.quote(w) for w in words) + " JSON"


async def _run_agent(args: argparse.Namespace, console: Console, storage: Storage,
                     agent: Agent, live: LiveRun) -> int:
    if args.input is None:
        raise UsageError('an Agent needs --input: a JSON string prompt or {"prompt": "..."}')
    messages = _agent_messages(parse_json(args.input, "--input"))
    try:
        output = await live.agent(agent, messages, storage)
    except Exception as exc:
        print_agent_failure(console, exc, live.run_id)
        raise
    print_agent_summary(console, output)
    return 0 if output.tripwire is None and output.finish_reason != "error" else 1


def _agent_messages(data: Any) -> Any:
    if isinstance(data, str):
        return data
    if isinstance(data, dict) and "prompt" in data:
        if not isinstance(data["prompt"], str):
            raise UsageError(f'"prompt" must be a string, got {type(data["prompt"]).__name__}')
        return data["prompt"]
    if (isinstance(data, dict) and "role" in data) or (isinstance(data, list) and data):
        return data
    raise UsageError('an Agent\'s --input is a JSON string prompt or {"prompt": "..."} '
                     f"(or messages), got {json.dumps(data)[:60]}")


# -- runs and trace ----------------------------------------------------------------


async def _runs(args: argparse.Namespace, console: Console, storage: Storage) -> int:
    if args.limit < 1:
        raise UsageError(f"--limit must be 1 or more, got {args.limit}")
    rows = await _run_rows(storage, args.workflow, args.status, args.limit)
    if not rows:
        which = " matching" if args.workflow or args.status else ""
        console.print(f"no{which} runs in {args.db}")
        return 0
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("run id", no_wrap=True, min_width=max(len(r.run_id) for r in rows))
    for header in ("workflow", "status", "started"):
        table.add_column(header)
    table.add_column("duration", no_wrap=True, justify="right")
    for row in rows:
        symbol, style = RUN_SYMBOLS.get(row.status, ("?", ""))
        status = Text(f"{symbol} {row.status}", style=style)
        if row.suspended:
            status.append(f" at {', '.join(row.suspended)}")
        table.add_row(row.run_id, row.workflow_id, status,
                      _when(row.started),
                      "—" if row.duration is None else format_duration(row.duration))
    console.print(f"runs in {args.db}, newest first")
    console.print(table)
    waiting = [r for r in rows if r.suspended]
    if waiting:
        console.print("resume a suspended run with:")
        for row in waiting:
            line = (f"  procflow run TARGET --resume {shlex.quote(row.suspended[0])} "
                    f"--run {row.run_id} --data JSON")
            console.print(Text(line), soft_wrap=True)
    return 0


def _when(timestamp: float) -> str:
    """ "11-30 06:52:32" this year, "2023-11-30 06:52" before."""
    moment = datetime.fromtimestamp(timestamp)
    same_year = moment.year == datetime.now().year
    return moment.strftime("%m-%d %H:%M:%S" if same_year else "%Y-%m-%d %H:%M")


class _Row:
    __slots__ = ("duration", "run_id", "started", "status", "suspended", "workflow_id")

    def __init__(self, run_id: str, workflow_id: str, status: str, started: float,
                 duration: float | None, suspended: list[str]) -> None:
        self.run_id, self.workflow_id, self.status = run_id, workflow_id, status
        self.started, self.duration, self.suspended = started, duration, suspended


async def _run_rows(storage: Storage, workflow: str | None, status: str | None,
                    limit: int) -> list[_Row]:
    """Every traced run (agent runs too) merged with the stored run snapshots."""
    rows: dict[str, _Row] = {}
    for trace in await storage.list_traces(workflow_id=workflow, status=status, limit=limit):
        duration = None if trace.ended_at is None else trace.ended_at - trace.started_at
        rows[trace.run_id] = _Row(trace.run_id, trace.workflow_id, trace.status,
                                  trace.started_at, duration, [])
    snapshots = await storage.list_runs(workflow_id=workflow, limit=limit,
                                        status=cast("RunStatus | None", status))
    for snap in snapshots:
        row = rows.get(snap.run_id)
        suspended = [".".join(p) for p in snap.suspended] if snap.status == "suspended" else []
        if row is None:
            final = snap.status not in ("pending", "running")
            rows[snap.run_id] = _Row(snap.run_id, snap.workflow_id, snap.status,
                                     snap.created_at,
                                     snap.updated_at - snap.created_at if final else None,
                                     suspended)
        else:
            row.status, row.suspended = snap.status, suspended
    ordered = sorted((r for r in rows.values() if status is None or r.status == status),
                     key=lambda r: r.started, reverse=True)
    return ordered[:limit]


async def _trace(args: argparse.Namespace, console: Console, storage: Storage) -> int:
    from procflow.studio.diff import TraceDiff
    from procflow.studio.trace import TraceView

    trace = await storage.load_trace(args.run_id)
    if trace is None:
        raise RunNotFoundError(f"no run '{args.run_id}' in {args.db}", run_id=args.run_id)
    if args.diff is not None:
        if args.step is not None:
            raise UsageError("--step and --diff cannot be used together")
        other = await storage.load_trace(args.diff)
        if other is None:
            raise RunNotFoundError(f"no run '{args.diff}' in {args.db}", run_id=args.diff)
        console.print(TraceDiff(trace, other))
    else:
        console.print(TraceView(trace, step=args.step))
    return 0
