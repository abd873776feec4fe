"""``procflow eval``: run an experiment from the terminal, or compare two.

``procflow eval FILE:dataset --target FILE:agent`` runs ``dataset.evaluate(target)`` as a
stored run (a live progress line on a terminal), prints a table of scores per case and
the averages, and exits 1 when an average is below its ``--fail-under`` threshold.
``procflow eval --compare RUN_A RUN_B`` lists per-case score changes, regressions first.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from procflow.evals import Dataset, EvaluationReport, compare, load_report
from procflow.storage.locate import get_default_storage, set_default_storage
from procflow.studio.commands import UsageError
from procflow.studio.output import dump, output_mode
from procflow.studio.store import NoStoreError, Store, find_store, resolve_run_id
from procflow.studio.targets import TargetError, is_agent, load_attribute, module_name_for
from procflow.workflows.workflow import Workflow

if TYPE_CHECKING:
    from procflow.evals import CaseResult, ScoreChange

__all__ = ["add_eval_parser", "eval_command", "parse_threshold"]

_EPILOG = """examples:
  procflow eval ev.py:capitals --target ev.py:agent --fail-under 0.9
  procflow eval ev.py:capitals --target ev.py:agent --fail-under Contains=1 --json
  procflow eval ev.py:capitals --target ev.py:agent --run-id ID   (continue a stopped one)
  procflow eval --compare RUN_A RUN_B
experiments are runs of the workflow eval:<dataset>: procflow runs --workflow eval:capitals"""


def add_eval_parser(sub: Any, common: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``eval`` subcommand to the ``procflow`` parser (``sub``: its subparsers;
    ``common``: the options every subcommand takes)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "eval", parents=[common], help="run an experiment on a dataset, or compare two",
        description="Run every case of a dataset through a target, score it, and print "
        "the scores per case and their averages. The experiment is a stored run: one "
        "that stopped is continued with --run-id, running only its unfinished cases.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", metavar="DATASET", nargs="?",
                        help="path/to/file.py:name or package.module:name (a Dataset)")
    parser.add_argument("--target", metavar="TARGET",
                        help="the Agent, Workflow or function the cases run through")
    parser.add_argument("--concurrency", type=int, default=8, metavar="N",
                        help="cases run at once (default 8)")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="runs of each case (default 1)")
    parser.add_argument("--fail-under", metavar="X|NAME=X", action="append",
                        type=parse_threshold, default=[],
                        help="exit 1 when an average (or scorer NAME's) is below X "
                        "(repeatable)")
    parser.add_argument("--run-id", metavar="ID",
                        help="the experiment's run id; a stored unfinished one is continued")
    parser.add_argument("--compare", metavar="RUN_ID", nargs=2,
                        help="list the per-case score changes from one experiment to another")
    parser.add_argument("--no-live", action="store_true", help="no live progress line")
    return parser


def parse_threshold(value: str) -> tuple[str | None, float]:
    """``--fail-under``: ``X`` (every scorer) or ``NAME=X``, X in [0, 1]."""
    name, _, number = value.rpartition("=")
    try:
        limit = float(number)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected X or NAME=X with X a number, got "
                                         f"{value!r}") from None
    if not 0.0 <= limit <= 1.0:
        raise argparse.ArgumentTypeError(f"a threshold is between 0 and 1, got {value!r}")
    return (name or None), limit


async def eval_command(args: argparse.Namespace, console: Console) -> int:
    """Run ``procflow eval``; returns the exit status."""
    if args.compare is not None:
        if args.dataset is not None or args.target is not None:
            raise UsageError("--compare takes two run ids, not a dataset or --target")
        return await _compare(args, console)
    if args.dataset is None or args.target is None:
        raise UsageError("give a DATASET and a --target (or --compare RUN_A RUN_B)")
    target = _load_target(args.target)
    dataset = _load_dataset(args.dataset, args.target)
    thresholds: dict[str | None, float] = dict(args.fail_under)
    unknown = [n for n in thresholds if n is not None and n not in
               {s.name for s in dataset.scorers}]
    if unknown:
        raise UsageError(f"--fail-under names no scorer of dataset {dataset.id!r}: "
                         f"{', '.join(unknown)}; its scorers are "
                         f"{', '.join(s.name for s in dataset.scorers) or 'none'}")
    own = target.storage if isinstance(target, Workflow) or is_agent(target) else None
    store = find_store(args.db, create=True, own=own)
    previous = get_default_storage()
    set_default_storage(store.storage)  # where agent and workflow case runs go
    run_id = args.run_id or uuid.uuid4().hex
    done = False
    try:
        report = await _evaluate(args, console, dataset, target, store, run_id)
        done = True
    finally:
        set_default_storage(previous)
        if store.owned:
            await store.storage.aclose()
        if not done:
            print(f"procflow: experiment {run_id} stopped; continue it with: procflow eval "
                  f"{args.dataset} --target {args.target} --run-id {run_id}", file=sys.stderr)
    below = report.below(thresholds)
    _print_report(args, console, report, thresholds, below)
    return 1 if below else 0


async def _evaluate(args: argparse.Namespace, console: Console, dataset: Dataset[Any, Any],
                    target: Any, store: Store, run_id: str) -> EvaluationReport:
    total = len(dataset.cases) * max(1, args.repeat)
    if output_mode(args, console) != "tty" or args.no_live:
        return await dataset.evaluate(target, concurrency=args.concurrency,
                                      repeat=args.repeat, run_id=run_id,
                                      storage=store.storage)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                  MofNCompleteColumn(), TextColumn("{task.fields[last]}"), console=console,
                  transient=True) as progress:
        task = progress.add_task(f"eval:{dataset.id}", total=total, last="")

        def advance(case: CaseResult) -> None:
            shown = " ".join(f"{k}={_number(v)}" for k, v in case.scores.items())
            progress.update(task, advance=1, last=f"{case.label}: {shown}")

        return await dataset.evaluate(target, concurrency=args.concurrency,
                                      repeat=args.repeat, run_id=run_id,
                                      storage=store.storage, on_case=advance)


def _load_target(spec: str) -> Any:
    target = load_attribute(spec)
    if isinstance(target, Workflow) and not target.committed:
        raise TargetError(f"--target {spec}: the Workflow is not committed; call .commit()")
    if not (callable(target) or isinstance(target, Workflow) or is_agent(target)):
        raise TargetError(f"--target {spec} is {_a(type(target).__name__)}, not an Agent, "
                          "a Workflow or a function")
    return target


def _load_dataset(spec: str, target_spec: str) -> Dataset[Any, Any]:
    source, _, name = spec.rpartition(":")
    if source and source == target_spec.rpartition(":")[0] and source.endswith(".py"):
        # the target's file is already imported: take the dataset from the same module
        module = sys.modules.get(module_name_for(Path(source).resolve()))
        found = getattr(module, name, None) if module is not None else None
        if isinstance(found, Dataset):
            return found
    dataset = load_attribute(spec, defines=_datasets)
    if not isinstance(dataset, Dataset):
        raise TargetError(f"{spec} is {_a(type(dataset).__name__)}, not a "
                          "procflow.evals.Dataset")
    return dataset


def _a(kind: str) -> str:
    return f"{'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind}"


def _datasets(module: Any) -> str:
    found = [k for k, v in vars(module).items() if isinstance(v, Dataset)]
    return f"it defines: {', '.join(found)}" if found else "it defines no Dataset"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _print_report(args: argparse.Namespace, console: Console, report: EvaluationReport,
                  thresholds: dict[str | None, float], below: list[str]) -> None:
    if args.json:
        document = report.to_dict()
        document["thresholds"] = {k or "*": v for k, v in thresholds.items()}
        document["below_threshold"] = below
        print(dump(document))
        return
    header = (f"experiment {report.run_id} on dataset {report.dataset}: "
              f"{len(report.cases)} case run(s), {report.status}")
    if output_mode(args, console) == "tty":
        console.print(Text(header, style="bold"), soft_wrap=True)
        console.print(_table(report))
    else:
        print(header)
        print(report.table())
    for failure in report.failures:
        where = f"scorer {failure.scorer}" if failure.scorer else "target"
        print(f"failed: {failure.case}: {where}: {failure.error}")
    for line in below:
        print(f"below threshold: {line}")


def _table(report: EvaluationReport) -> Table:
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("case")
    for name in report.scorers:
        table.add_column(name, justify="right")
    table.add_column("time", justify="right")
    for case in report.cases:
        cells = [Text("error", style="red") if n in case.errors
                 else _cell(case.scores.get(n)) for n in report.scorers]
        table.add_row(case.label, *cells, f"{case.duration:.2f}s")
    table.add_section()
    table.add_row("average", *(_cell(a) for a in report.averages.values()), "",
                  style="bold")
    return table


def _cell(value: float | None) -> Text:
    if value is None:
        return Text("-", style="dim")
    style = "green" if value >= 1.0 else "red" if value <= 0.0 else "yellow"
    return Text(_number(value), style=style)


async def _compare(args: argparse.Namespace, console: Console) -> int:
    try:
        store = find_store(args.db, create=False)
    except NoStoreError as exc:
        raise UsageError(str(exc)) from exc
    try:
        first, second = [await load_report(await resolve_run_id(store.storage, given,
                                                                store.location),
                                           storage=store.storage)
                         for given in args.compare]
    finally:
        if store.owned:
            await store.storage.aclose()
    changes = compare(first, second)
    if args.json:
        print(dump({"before": first.run_id, "after": second.run_id,
                    "averages": {"before": first.averages, "after": second.averages},
                    "changes": [{"case": c.case, "scorer": c.scorer, "before": c.before,
                                 "after": c.after, "delta": c.delta,
                                 "regression": c.regression} for c in changes]}))
        return 0
    print(f"{first.run_id} -> {second.run_id} (dataset {second.dataset})")
    for name, after in second.averages.items():
        before = first.averages.get(name)
        print(f"average {name}: {_number(before)} -> {_number(after)}")
    regressions = sum(1 for c in changes if c.regression)
    print(f"{regressions} regression(s), {len(changes) - regressions} improvement(s)")
    for change in changes:
        print(_change_line(change))
    return 0


def _change_line(change: ScoreChange) -> str:
    mark = "regressed" if change.regression else "improved"
    return (f"{mark}: {change.case} {change.scorer} {_number(change.before)} -> "
            f"{_number(change.after)} ({change.delta:+.2f})")
