"""The ``procflow`` command: ``graph``, ``run``, ``runs``, ``trace``, ``prune``,
``worker`` and ``eval``.

Every error ends the command with one line on stderr, "procflow: error: ...", and
exit status 2 (bad usage, target or input) or 1 (a run that failed, a runtime error);
no traceback unless ``PROCFLOW_DEBUG=1``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

import anyio
from rich.console import Console

from procflow.errors import (
    ProcflowError,
    RunNotFoundError,
    RunStateError,
    StepValidationError,
    StorageError,
    WorkflowDefinitionError,
    WorkflowRunError,
)
from procflow.storage.locate import PROJECT_DB
from procflow.studio.commands import UsageError, run_command
from procflow.studio.evals import add_eval_parser, eval_command
from procflow.studio.prune import age_argument
from procflow.studio.targets import TargetError
from procflow.studio.worker import add_worker_parser, worker_main

__all__ = ["DEFAULT_DB", "build_parser", "main"]

DEFAULT_DB = str(PROJECT_DB)
"""The project's database, relative to the project root (found walking up)."""
_PLAIN_WIDTH = 1000

_DEBUG_ENV = "PROCFLOW_DEBUG"
_USAGE_ERRORS = (TargetError, UsageError, ValueError, RunNotFoundError, RunStateError,
                 StepValidationError, WorkflowDefinitionError)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (raised, printed by ``main``)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    """The ``procflow`` argument parser."""
    from procflow._version import __version__

    parser = _Parser(prog="procflow", description="Draw, run and inspect procflow "
                     "workflows and agents.", epilog=_STORAGE_HELP,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"procflow {__version__}")
    _add_common(parser, None, False)
    # given after the subcommand they override; SUPPRESS keeps the top-level value else
    common = _Parser(add_help=False)
    _add_common(common, argparse.SUPPRESS, argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    target_help = "path/to/file.py:name or package.module:name (a Workflow or an Agent)"

    graph = sub.add_parser("graph", parents=[common], help="draw a workflow or an agent",
                           description="Draw a workflow (or an agent's loop).")
    graph.add_argument("target", metavar="TARGET", help=target_help)
    graph.add_argument("--format", choices=("tree", "mermaid", "dot", "svg"), default="tree",
                       help="tree (the terminal view, default), mermaid, dot, or svg (the "
                       "tree as a standalone SVG picture; width: COLUMNS, else 100)")
    graph.add_argument("--depth", type=int, default=None, metavar="N",
                       help="nested-workflow levels to expand")

    run = sub.add_parser("run", parents=[common], help="run a workflow or an agent",
                         description="Run a workflow or an agent with a live view, or "
                         "resume a suspended run, or re-run a stored run from a step.")
    run.add_argument("target", metavar="TARGET", help=target_help)
    run.add_argument("--input", metavar="VALUE|@FILE",
                     help="the run input: JSON when it parses as JSON, else the text itself "
                     "(an agent's prompt); @file reads it from a file")
    run.add_argument("--json-input", action="store_true",
                     help="--input must be JSON (text that is not JSON is an error)")
    run.add_argument("--resume", metavar="STEP|RUN_ID",
                     help="a workflow: resume the suspended STEP of --run; an agent: resume "
                     "its suspended run RUN_ID (with --approve/--deny/--data)")
    run.add_argument("--data", metavar="JSON|@FILE", help="resume data for --resume")
    run.add_argument("--approve", metavar="CALL_ID", action="append",
                     help="an agent's --resume: run this waiting tool call (repeatable)")
    run.add_argument("--deny", metavar="CALL_ID", action="append",
                     help="an agent's --resume: do not run this waiting tool call; the model "
                     "is told it was denied (repeatable)")
    run.add_argument("--from-step", metavar="STEP",
                     help="re-run stored run --run from STEP with its stored inputs (an "
                     "agent: a loop step such as llm-call, with the agent as it is now)")
    run.add_argument("--run", metavar="RUN_ID", help="the stored run (--resume, --from-step)")
    run.add_argument("--run-id", metavar="ID", help="the id of the new run (default: random)")
    run.add_argument("--no-live", action="store_true",
                     help="no live view; print the final view at the end")
    run.add_argument("--depth", type=int, default=None, metavar="N",
                     help="nested-workflow levels to expand (default 1, and every level "
                     "holding a processor or tool you configured)")

    runs = sub.add_parser("runs", parents=[common], help="list stored runs",
                          description="List stored runs, newest first.")
    runs.add_argument("--workflow", metavar="ID", help="only runs of this workflow id")
    runs.add_argument("--status", metavar="S", choices=("pending", "running", "stalled",
                      "success", "failed", "suspended", "tripwire", "canceled",
                      "corrupted"),
                      help="only this status (stalled: running, but its lease expired: the "
                           "process running it stopped; restart it)")
    runs.add_argument("--limit", type=int, default=20, metavar="N",
                      help="at most N runs (default 20)")

    prune = sub.add_parser(
        "prune", parents=[common], help="delete old finished runs",
        description="Delete the finished runs (success, failed, tripwire, canceled) last "
        "updated more than --older-than ago, with their step results and traces. Runs "
        "that can still go on (running, pending, suspended) are never deleted, nor a run "
        "that changed or was taken by a process while the store was being pruned.")
    prune.add_argument("--older-than", metavar="AGE", required=True, type=age_argument,
                       help="how old a run's last update must be: 30d, 12h, 90m, 45s or "
                       "seconds (0: every finished run)")
    prune.add_argument("--workflow", metavar="ID",
                       help="only runs of this workflow id (agent:NAME for an agent's)")
    prune.add_argument("--status", metavar="S", action="append",
                       choices=("success", "failed", "tripwire", "canceled"),
                       help="only runs that ended so (repeatable; default: all four)")
    prune.add_argument("--dry-run", action="store_true",
                       help="list what would be deleted, delete nothing")

    add_worker_parser(sub)
    add_eval_parser(sub, common)

    trace = sub.add_parser("trace", parents=[common], help="show a run's trace",
                           description="Show a run's span tree, or compare two runs.")
    trace.add_argument("run_id", metavar="RUN_ID")
    trace.add_argument("--step", metavar="ID", help="only this step's spans, in detail")
    trace.add_argument("--diff", metavar="OTHER_RUN_ID",
                       help="where this run and another run of the workflow diverged")
    watch = sub.add_parser(
        "watch", parents=[common], help="follow a run started elsewhere to its end",
        description="Attach to a run started by another process (or a worker) and show "
        "it live from what storage holds, to its end. Exit status: 0 success; 1 failed, "
        "tripwire or canceled; 3 suspended; 4 stalled (no live process holds the run).")
    watch.add_argument("run_id", metavar="RUN_ID")
    watch.add_argument("--interval", type=float, default=0.5, metavar="SECONDS",
                       help="how often storage is read (default 0.5)")
    watch.add_argument("--wait", type=float, default=10.0, metavar="SECONDS",
                       help="how long to wait for a run not stored yet (default 10)")
    trace.add_argument("--timeline", action="store_true",
                       help="the spans as bars on one time axis (a Gantt view)")
    trace.add_argument("--format", choices=("tree", "svg"), default="tree",
                       help="tree (the terminal view, default) or svg (a standalone SVG "
                       "picture of the view; width: COLUMNS, else 100)")
    return parser


def _add_common(parser: argparse.ArgumentParser, db: object, no_color: object) -> None:
    parser.add_argument("--db", metavar="PATH|URL", default=db,
                        help="where runs are stored: a SQLite file, a redis:// or a "
                        "postgresql:// URL (?schema=NAME: its tables' schema) "
                        "(default: see 'where runs are stored' below)")
    parser.add_argument("--no-color", action="store_true", default=no_color,
                        help="no colours or styles (also: NO_COLOR=1)")
    parser.add_argument("--plain", action="store_true", default=no_color,
                        help="plain text, one record per line, nothing truncated (the "
                        "default when stdout is not a terminal)")
    parser.add_argument("--json", action="store_true", default=no_color,
                        help="one JSON document (runs, trace, graph, run, prune; schemas in "
                        "procflow/studio/schemas)")


_STORAGE_HELP = f"""where runs and memory are stored (every command, and Python code):
  1. --db PATH|URL (for 'run': else the workflow's own storage=)
  2. PROCFLOW_DB: a SQLite file path, a redis:// or a postgresql:// URL
  3. the project's {DEFAULT_DB}, found in this directory or a parent (like git)
  4. 'run' creates {DEFAULT_DB} here; read-only commands never create a database
     (Python code falls back to an in-memory store, Memory to .procflow/memory.db)"""


def make_console(*, no_color: bool, plain: bool = False) -> Console:
    """The console commands print to: no colours when asked (or ``NO_COLOR``) or when
    output is plain; as wide as the content when stdout is not a terminal (or
    ``plain``), so nothing is cut or wrapped."""
    console = Console(highlight=False)
    plain = plain or not console.is_terminal
    if no_color or plain or os.environ.get("NO_COLOR"):
        console = Console(color_system=None, highlight=False, width=console.width)
    if plain:
        console.width = _PLAIN_WIDTH
    return console


def _quiet_runtime_log() -> None:
    """Keep Python's last-resort handler from echoing on stderr the step failures a
    command reports itself. Logging configured by the user still gets every record."""
    runtime = logging.getLogger("procflow.runtime")
    if not any(isinstance(h, logging.NullHandler) for h in runtime.handlers):
        runtime.addHandler(logging.NullHandler())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``procflow`` command.

    Args:
        argv: The arguments (default ``sys.argv[1:]``).

    Returns:
        The exit status: 0, 1 (the run failed, a runtime error) or 2 (bad usage,
        target or input).
    """
    debug = bool(os.environ.get(_DEBUG_ENV))
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help(sys.stderr)
            return 2
        if args.command == "worker":
            return worker_main(args)
        console = make_console(no_color=args.no_color, plain=args.plain or args.json)
        _quiet_runtime_log()
        if args.command == "eval":
            return anyio.run(eval_command, args, console)
        return anyio.run(run_command, args, console)
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        from procflow.studio.commands import interrupted_lines

        lines = interrupted_lines()
        for line in lines:
            print(line, file=sys.stderr)
        if not lines:
            _error("interrupted")
        return 130
    except BaseException as exc:
        error = _unwrap(exc)
        if isinstance(error, BrokenPipeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return 0
        if debug:
            raise
        if isinstance(error, _USAGE_ERRORS):
            _error(str(error))
            return 2
        if isinstance(error, WorkflowRunError | StorageError):
            _error(str(error) or type(error).__name__)
            return 1
        if isinstance(error, ProcflowError | OSError):
            _error(f"{type(error).__name__}: {error}")
            return 1
        if not isinstance(error, Exception):
            raise
        _error(f"{type(error).__name__}: {error} (set {_DEBUG_ENV}=1 for the traceback)")
        return 1


def _unwrap(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _error(message: str) -> None:
    line = "; ".join(part.strip() for part in message.splitlines() if part.strip())
    print(f"procflow: error: {line}", file=sys.stderr)
