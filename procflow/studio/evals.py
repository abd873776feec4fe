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
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from procflow.errors import RunNotFoundError
from procflow.evals import (
    Dataset,
    EvaluationReport,
    Scorer,
    compare,
    load_report,
    score_runs,
)
from procflow.storage.locate import get_default_storage, set_default_storage
from procflow.studio.commands import UsageError
from procflow.studio.output import dump, output_mode
from procflow.studio.prune import age_argument
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
  procflow eval --runs --agent support --since 1d --sample 0.1 --scorers checks.py:scorers
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
    runs = parser.add_argument_group("scoring stored agent runs (instead of a DATASET)")
    runs.add_argument("--runs", action="store_true",
                      help="score stored agent runs (success or tripwire) with --scorers, as "
                      "an experiment eval:runs-<agent> whose cases are the runs")
    runs.add_argument("--scorers", metavar="FILE:name",
                      help="a Scorer, or a list of them, in a Python file or module")
    runs.add_argument("--agent", metavar="ID", help="only runs of this agent")
    runs.add_argument("--since", metavar="AGE", type=age_argument,
                      help="only runs updated in the last AGE (30d, 12h, 90m, 45s)")
    runs.add_argument("--sample", metavar="X", type=_share, default=1.0,
                      help="score this share of the runs, 0..1 (stable per run id)")
    runs.add_argument("--limit", metavar="N", type=int, help="at most N runs, newest first")
    return parser


def _share(value: str) -> float:
    try:
        share = float(value)
    except ValueError:
        share = -1.0
    if not 0.0 <= share <= 1.0:
        raise argparse.ArgumentTypeError(f"a share between 0 and 1, got {value!r}")
    return share


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
    if args.runs:
        if args.dataset is not None or args.target is not None:
            raise UsageError("--runs scores stored runs: give --scorers, not a dataset or "
                             "--target")
        if args.scorers is None:
            raise UsageError("--runs needs --scorers FILE:name")
        return await _run_and_print(args, console, _load_scorers(args.scorers), None, None)
    dataset_spec: str | None = args.dataset
    target_spec: str | None = args.target
    if dataset_spec is None or target_spec is None:
        raise UsageError("give a DATASET and a --target (or --compare RUN_A RUN_B, or --runs)")
    target = _load_target(target_spec)
    dataset = _load_dataset(dataset_spec, target_spec)
    return await _run_and_print(args, console, dataset.scorers, dataset, target)


async def _run_and_print(args: argparse.Namespace, console: Console,
                         scorers: Sequence[Scorer], dataset: Dataset[Any, Any] | None,
                         target: Any) -> int:
    thresholds: dict[str | None, float] = dict(args.fail_under)
    unknown = [n for n in thresholds if n is not None and n not in {s.name for s in scorers}]
    if unknown:
        where = f"dataset {dataset.id!r}" if dataset is not None else "--scorers"
        raise UsageError(f"--fail-under names no scorer of {where}: "
                         f"{', '.join(unknown)}; its scorers are "
                         f"{', '.join(s.name for s in scorers) or 'none'}")
    own = target.storage if isinstance(target, Workflow) or is_agent(target) else None
    try:  # scoring stored runs needs a store that has them
        store = find_store(args.db, create=dataset is not None, own=own)
    except NoStoreError as exc:
        raise UsageError(str(exc)) from exc
    previous = get_default_storage()
    set_default_storage(store.storage)  # where agent and workflow case runs go
    run_id = args.run_id or uuid.uuid4().hex
    try:
        report = await _evaluate(args, console, dataset, target, store, run_id, scorers)
    except BaseException as exc:
        if not isinstance(exc, Exception):  # Ctrl-C, a cancellation: say how to go on
            again = (f"{args.dataset} --target {args.target}" if dataset is not None
                     else f"--runs --scorers {args.scorers} ...")
            print(f"procflow: experiment {run_id} stopped; continue it with: procflow eval "
                  f"{again} --run-id {run_id}", file=sys.stderr)
        raise
    finally:
        set_default_storage(previous)
        if store.owned:
            await store.storage.aclose()
    below = report.below(thresholds)
    _print_report(args, console, report, thresholds, below)
    return 1 if below else 0


async def _evaluate(args: argparse.Namespace, console: Console,
                    dataset: Dataset[Any, Any] | None, target: Any, store: Store,
                    run_id: str, scorers: Sequence[Scorer]) -> EvaluationReport:
    def run(on_case: Callable[[CaseResult], Any] | None) -> Awaitable[EvaluationReport]:
        if dataset is None:
            return score_runs(scorers, agent=args.agent, since=args.since,
                              sample=args.sample, limit=args.limit, storage=store.storage,
                              concurrency=args.concurrency, run_id=run_id, on_case=on_case)
        return dataset.evaluate(target, concurrency=args.concurrency, repeat=args.repeat,
                                run_id=run_id, storage=store.storage, on_case=on_case)

    if output_mode(args, console) != "tty" or args.no_live:
        return await run(None)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    total = len(dataset.cases) * max(1, args.repeat) if dataset is not None else None
    name = f"eval:{dataset.id}" if dataset is not None else "eval: stored runs"
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                  MofNCompleteColumn(), TextColumn("{task.fields[last]}"), console=console,
                  transient=True) as progress:
        task = progress.add_task(name, total=total, completed=await _finished(args, store),
                                 last="")

        def advance(case: CaseResult) -> None:
            shown = " ".join(f"{k}={_number(v)}" for k, v in case.scores.items())
            progress.update(task, advance=1, last=f"{case.label}: {shown}")

        return await run(advance)


async def _finished(args: argparse.Namespace, store: Store) -> int:
    """The cases a continued experiment (``--run-id``) had already finished."""
    if args.run_id is None:
        return 0
    try:
        return len((await load_report(args.run_id, storage=store.storage)).cases)
    except RunNotFoundError:
        return 0


def _load_scorers(spec: str) -> list[Scorer]:
    found = load_attribute(spec, defines=_scorer_names)
    scorers = [found] if isinstance(found, Scorer) else found
    if not isinstance(scorers, list | tuple) or not scorers \
            or not all(isinstance(s, Scorer) for s in scorers):
        raise TargetError(f"--scorers {spec} is {_a(type(found).__name__)}; name a Scorer or "
                          "a non-empty list of them")
    return list(scorers)


def _scorer_names(module: Any) -> str:
    found = [k for k, v in vars(module).items() if not k.startswith("_") and (
        isinstance(v, Scorer) or (isinstance(v, list | tuple) and v
                                  and all(isinstance(s, Scorer) for s in v)))]
    return f"it defines: {', '.join(found)}" if found else "it defines no Scorer"


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
