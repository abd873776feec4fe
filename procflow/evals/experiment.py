"""Experiments are runs: ``Dataset.evaluate`` builds the workflow ``eval:<dataset>`` — a
``foreach`` over the case runs, each item running the target and its scorers — and runs
it in the usual storage, so an experiment is listed, traced and continued like any run.

The run's input is ``{"dataset", "scorers", "cases_digest", "items": [{"index",
"repeat", "name"}]}``;
each item's result is a ``CaseResult``, recorded as it finishes. ``load_report`` reads
a stored experiment back, finished or not.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import anyio
from pydantic_core import to_jsonable_python

from procflow.errors import RunNotFoundError, RunStateError
from procflow.evals.report import CaseResult, EvaluationReport
from procflow.evals.scoring import Score, ScoreContext, run_scorer
from procflow.records import ToolCallRecord, Usage
from procflow.steps.step import create_step
from procflow.workflows.workflow import Workflow, create_workflow

if TYPE_CHECKING:
    from procflow.evals.dataset import Case, Dataset
    from procflow.runtime.results import StepResult
    from procflow.steps.context import StepContext
    from procflow.storage.base import Storage

__all__ = ["CASE_STEP", "WORKFLOW_PREFIX", "Outcome", "StoredOutcomes", "load_report",
           "run_experiment"]

WORKFLOW_PREFIX: Final = "eval:"
"""An experiment is a run of the workflow ``eval:<dataset id>``."""
CASE_STEP: Final = "case"
"""The step each case run is an item of (stored as ``case[<item>]``)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a target gave for one case, as the scorers see it."""

    output: Any
    text: str
    usage: Usage | None = None
    tool_calls: tuple[ToolCallRecord, ...] = field(default_factory=tuple)
    run_id: str | None = None


Caller = Callable[["Case[Any, Any]", str], Awaitable[Outcome]]


@dataclass(frozen=True, slots=True)
class StoredOutcomes:
    """A target that "runs" a case by reading what a stored run gave (``score_runs``):
    case name -> the stored run's outcome."""

    outcomes: dict[str, Outcome]


class _TargetFailedError(Exception):
    """The target's own run did not succeed (its status and error in the message)."""


def _caller(target: Any, storage: Storage | None) -> Caller:
    from procflow.agent.agent import Agent

    if isinstance(target, StoredOutcomes):
        stored = target.outcomes

        async def read_stored(case: Case[Any, Any], run_id: str) -> Outcome:
            return stored[case.name or ""]

        return read_stored
    if isinstance(target, Workflow):
        wf = target

        async def run_workflow(case: Case[Any, Any], run_id: str) -> Outcome:
            result = await wf.create_run(run_id, storage=storage).start(input_data=case.input)
            if result.status != "success":
                raise _TargetFailedError(f"workflow run {run_id} ended {result.status}: "
                                         f"{result.error or result.tripwire}")
            return Outcome(result.result, _text(result.result), result.usage, run_id=run_id)

        return run_workflow
    if isinstance(target, Agent):
        agent = target

        async def run_agent(case: Case[Any, Any], run_id: str) -> Outcome:
            out = await agent.generate(case.input, run_id=run_id)
            output = out.output if out.output is not None else out.text
            return Outcome(output, out.text, out.usage, tuple(out.tool_calls), out.run_id)

        return run_agent
    if callable(target):
        fn = target

        async def run_function(case: Case[Any, Any], run_id: str) -> Outcome:
            value = case.input
            if inspect.iscoroutinefunction(fn):
                output = await fn(value)
            else:
                output = await anyio.to_thread.run_sync(fn, value)
                if inspect.isawaitable(output):
                    output = await output
            return Outcome(output, _text(output))

        return run_function
    raise TypeError(f"evaluate() takes an Agent, a committed Workflow or a function of the "
                    f"case input; got {type(target).__name__}")


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(to_jsonable_python(value, fallback=repr), ensure_ascii=False)


def _digest(dataset: Dataset[Any, Any]) -> str:
    """A fingerprint of the cases, so a continued experiment runs the cases it began."""
    cases = [c.model_dump(mode="json", fallback=repr) for c in dataset.cases]
    return hashlib.sha256(json.dumps(cases, sort_keys=True).encode()).hexdigest()[:16]


def _items(dataset: Dataset[Any, Any], repeat: int) -> list[dict[str, Any]]:
    return [{"index": i, "repeat": r, "name": case.name}
            for i, case in enumerate(dataset.cases) for r in range(repeat)]


async def run_experiment(dataset: Dataset[Any, Any], target: Any, *, concurrency: int,
                         repeat: int, run_id: str | None, storage: Storage | None,
                         on_case: Callable[[CaseResult], Any] | None) -> EvaluationReport:
    """``Dataset.evaluate`` (its docstring says what the arguments mean)."""
    for option, value in (("concurrency", concurrency), ("repeat", repeat)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"evaluate(): {option} must be an integer of at least 1, "
                             f"got {value!r}")
    names = [s.name for s in dataset.scorers]
    data: dict[str, Any] = {"dataset": dataset.id, "scorers": names,
                            "cases_digest": _digest(dataset),
                            "items": _items(dataset, repeat)}
    restarted = False
    wf = _experiment_workflow(dataset, _caller(target, storage), concurrency=concurrency,
                              storage=storage, restarted=lambda: restarted,
                              on_case=on_case)
    if run_id is None:
        run = wf.create_run(storage=storage)
        result = await run.start(input_data=data)
    else:
        try:
            run = await wf.get_run(run_id, storage=storage)
        except RunNotFoundError:
            run = wf.create_run(run_id, storage=storage)
            result = await run.start(input_data=data)
        else:
            stored = await run.storage.load_snapshot(wf.id, run_id)
            if stored is not None and stored[0].input != data:
                raise RunStateError(
                    f"experiment '{run_id}' was run with other cases, scorers or repeat "
                    f"than dataset '{dataset.id}' has now; choose another run_id",
                    workflow_id=wf.id, run_id=run_id)
            restarted = True
            result = await run.restart()
    return _report(dataset.id, names, run.run_id, result.status, result.steps)


def _experiment_workflow(dataset: Dataset[Any, Any], call: Caller, *, concurrency: int,
                         storage: Storage | None, restarted: Callable[[], bool],
                         on_case: Callable[[CaseResult], Any] | None) -> Workflow[Any, Any]:
    scorers = list(dataset.scorers)

    async def run_case(ctx: StepContext[Any]) -> CaseResult:
        item = ctx.input_data
        case = dataset.cases[item["index"]]
        # a case run restarted after a crash gets a new id: its first try may be stored
        case_run = f"{ctx.run_id}.{item['index']}.{item['repeat']}"
        if restarted():
            case_run += f"~{uuid.uuid4().hex[:6]}"
        result = await _score_case(case, item, call, case_run, scorers)
        if on_case is not None:
            on_case(result)
        return result

    step = create_step(id=CASE_STEP, execute=run_case, output_schema=CaseResult,
                       description="run the target on one case and score its output")
    return (create_workflow(id=f"{WORKFLOW_PREFIX}{dataset.id}", storage=storage,
                            description=f"experiment on dataset {dataset.id!r}")
            .map(lambda ctx: ctx.input_data["items"], id="items")
            .foreach(step, concurrency=concurrency)
            .commit())


async def _score_case(case: Case[Any, Any], item: dict[str, Any], call: Caller,
                      case_run: str, scorers: list[Any]) -> CaseResult:
    base = {"name": case.name or "", "index": item["index"], "repeat": item["repeat"],
            "input": to_jsonable_python(case.input, fallback=repr),
            "expected": to_jsonable_python(case.expected, fallback=repr)}
    started = time.perf_counter()
    try:
        outcome = await call(case, case_run)
    except Exception as exc:
        message = " ".join(str(exc).split()) or "(no message)"
        return CaseResult(**base, error=f"{type(exc).__name__}: {message}",
                          duration=time.perf_counter() - started,
                          scores={s.name: 0.0 for s in scorers},
                          reasons={s.name: "the target failed" for s in scorers})
    duration = time.perf_counter() - started
    ctx = ScoreContext(case=case, output=outcome.output, text=outcome.text,
                       duration=duration, usage=outcome.usage,
                       tool_calls=outcome.tool_calls, run_id=outcome.run_id)
    verdicts: list[tuple[Score | None, str | None]] = [(None, None)] * len(scorers)

    async def one(i: int) -> None:
        verdicts[i] = await run_scorer(scorers[i], ctx)

    async with anyio.create_task_group() as tg:
        for i in range(len(scorers)):
            tg.start_soon(one, i)
    scores: dict[str, float | None] = {}
    reasons: dict[str, str] = {}
    errors: dict[str, str] = {}
    for scorer, (score, error) in zip(scorers, verdicts, strict=True):
        scores[scorer.name] = score.value if score is not None else None
        if score is not None and score.reason:
            reasons[scorer.name] = score.reason
        if error is not None:
            errors[scorer.name] = error
    return CaseResult(**base, output=to_jsonable_python(outcome.output, fallback=repr),
                      scores=scores, reasons=reasons, errors=errors, duration=duration,
                      usage=outcome.usage.to_dict() if outcome.usage else None,
                      run_id=outcome.run_id)


def _report(dataset: str, scorers: list[str], run_id: str, status: str,
            steps: dict[str, StepResult]) -> EvaluationReport:
    whole = steps.get(CASE_STEP)
    if whole is not None and whole.status == "success" and isinstance(whole.output, list):
        cases = [_case_result(output) for output in whole.output]
    else:  # the foreach did not finish: the items that did
        prefix = f"{CASE_STEP}["
        cases = [_case_result(r.output) for path, r in steps.items()
                 if path.startswith(prefix) and r.status == "success"]
    cases.sort(key=lambda c: (c.index, c.repeat))
    return EvaluationReport(dataset=dataset, scorers=scorers, run_id=run_id, status=status,
                            cases=cases)


def _case_result(output: Any) -> CaseResult:
    return output if isinstance(output, CaseResult) else CaseResult.model_validate(output)


async def load_report(run_id: str, *, storage: Storage | None = None) -> EvaluationReport:
    """The report of a stored experiment, finished or not (only its finished cases).

    Args:
        run_id: The experiment's run id.
        storage: Where it is stored (default: the usual resolution).

    Raises:
        RunNotFoundError: No experiment with that id is stored.
    """
    from procflow.runtime.defaults import current_storage

    store = storage if storage is not None else current_storage()
    for header in await store.list_runs():
        if header.run_id == run_id and header.workflow_id.startswith(WORKFLOW_PREFIX):
            loaded = await store.load_snapshot(header.workflow_id, run_id)
            if loaded is None:  # pragma: no cover - deleted between the two reads
                break
            snapshot, steps = loaded
            given = snapshot.input if isinstance(snapshot.input, dict) else {}
            return _report(header.workflow_id.removeprefix(WORKFLOW_PREFIX),
                           list(given.get("scorers", [])), run_id, snapshot.status, steps)
    raise RunNotFoundError(f"no experiment '{run_id}' is stored (see 'procflow runs "
                           f"--workflow {WORKFLOW_PREFIX}<dataset>')", run_id=run_id)

