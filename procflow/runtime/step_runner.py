"""The step runner: runs a compiled plan's steps and nested workflows on anyio.

Sequential steps run inline in the caller's task; tasks are made only for real
concurrency (``parallel``, ``branch`` with several true conditions, ``foreach`` with
``concurrency > 1``). Step results are kept in one dict keyed by step path; a result
that is already "success" (from a snapshot) is replayed instead of re-run, which is
how ``resume()`` and ``restart()`` continue a run.
"""

from __future__ import annotations

import inspect
import logging
import sys
import time
import traceback
from collections.abc import Coroutine
from typing import Any

import anyio

from procflow.errors import (
    StepExecutionError,
    StepTimeoutError,
    StepValidationError,
    TripwireError,
    WorkflowRunError,
)
from procflow.records import Span, StepResult, span_id
from procflow.runtime.execution import (
    Execution,
    Failed,
    PlanUnit,
    Scope,
    StepUnit,
    Suspended,
    Unit,
)
from procflow.runtime.step_context import BailSignal, StepContext, SuspendSignal
from procflow.runtime.tracing import ParentSpan, Tracer, current_step_span

_now = time.time
_log = logging.getLogger("procflow.runtime")
"""Step retries, failures and suspensions (resumes and restarts: ``runtime.run``); each
record carries ``run_id``, ``workflow_id`` and ``step_path`` as extra fields. Nothing is
logged on the normal path."""

__all__ = ["close_span", "run_plan", "run_unit"]


# -- running one step (or nested workflow) ---------------------------------------

def run_unit(ex: Execution, unit: Unit, data: Any, scope: Scope, *,
             replay: bool = True, path: str | None = None, keep: bool = True,
             iteration: int = 0) -> Coroutine[Any, Any, Any]:
    """Run a step or nested workflow and return its output (``await run_unit(...)``:
    the step's or workflow's own coroutine, no coroutine of this one in between).

    Args:
        replay: Reuse a stored "success" result instead of running again.
        path: The result path (default: scope prefix + unit id).
        keep: Record a successful result (foreach items record only failures/suspends).
        iteration: The loop iteration, recorded on the result.

    Raises:
        Failed: The unit failed (its result is recorded).
        Suspended: The unit (or a step inside it) suspended.
    """
    if path is None:  # ``Scope.path``, inlined: this runs for every step
        prefix = scope.prefix
        path = sys.intern(prefix + unit.id) if prefix else unit.id
    if unit.is_workflow:
        return _run_nested(ex, unit, data, scope, path, replay, keep, iteration)
    return _run_step(ex, unit, data, scope, path, replay, keep, iteration)


def _stored(ex: Execution, unit: Unit, path: str, replay: bool,
            ) -> tuple[StepResult | None, bool, Any]:
    """Look at a step's stored result: (record, is_resume_target, resume_data)."""
    rec = ex.records.get(path)
    if rec is None:
        return None, False, None
    if rec.status == "suspended":
        targeted, data = ex.resume_for(path)
        if not targeted and replay and not _contains_target(ex, path):
            raise Suspended(_suspended_under(ex, path) if unit.is_workflow else [path])
        return rec, targeted, data
    if rec.status == "running" and path in ex.resume_targets:  # resumed, then lost
        return rec, True, ex.resume_data
    return rec, False, None


def _contains_target(ex: Execution, path: str) -> bool:
    return any(t.startswith(path + ".") or t.startswith(path + "[") for t in ex.resume_targets)


def _suspended_under(ex: Execution, path: str) -> list[str]:
    inner = [p for p, r in ex.records.items() if r.status == "suspended"
             and (p.startswith(path + ".") or p.startswith(path + "["))]
    leaves = [p for p in inner if not any(q.startswith(p + ".") or q.startswith(p + "[")
                                          for q in inner)]
    return leaves or [path]


def _hydrate(unit: Unit, output: Any) -> Any:
    schema = unit.output
    if schema is None or output is None:
        return output
    return schema.validate(output)


async def _run_step(ex: Execution, step: StepUnit, data: Any, scope: Scope, path: str,
                    replay: bool, keep: bool, iteration: int) -> Any:
    inline = step.inline
    if (inline is not None and not (ex.replaying or ex.sync or ex.mark_started or ex.encodes)
            and ex.send is None and keep and inline(ex, data)):
        now = _now()  # done inline: the record ``_run_step`` keeps, no span
        ex.keep(path, StepResult("success", data, None, now, now, 1, None, None, iteration))
        return data
    resume_data = None
    lost = 0  # attempts begun in a process that stopped (marked started, never ended)
    if ex.replaying:
        rec, targeted, resume_data = _stored(ex, step, path, replay)
        if rec is not None and rec.status == "success" and replay:
            return _hydrate(step, rec.output)
        if rec is not None and rec.status == "running":
            lost = rec.attempts
        if targeted and step.resume_check is not None:
            resume_data = step.resume_check.check(
                resume_data, what="resume data", workflow_id=scope.wf.id, step_id=path,
                run_id=ex.run_id)
    wf = scope.wf
    if step.input is not None:
        try:
            data = step.input.check(data, what="input", workflow_id=wf.id, step_id=path,
                                    run_id=ex.run_id)
        except StepValidationError as exc:
            await _fail(ex, path, exc, time.time(), 0)
    retries = step.retries if step.retries is not None else wf.retries
    timeout = step.timeout if step.timeout is not None else wf.timeout
    started = _now()
    tracer = ex.tracer
    span = None
    if tracer is not None:  # Tracer.open, inlined (its documented fast path)
        spans = tracer.spans
        parent = scope.span
        span = Span(span_id(len(spans) + 1), None if parent is None else parent.span_id, step.id,
                    step.span_kind, path, started, None, "running",
                    data if step.trace_io else None)
        spans.append(span)
    if lost and span is not None:
        span.set(attempt=lost + 1, note=f"attempt {lost + 1} after worker loss")
    marked = ex.mark_started and keep
    if marked:
        await ex.record(path, StepResult("running", None, None, started, None, lost + 1))
    if ex.send is not None:
        await ex.event("step-start", path, {"input": data})
    attempt = 0
    if marked:
        ex.marked_running += 1
    # The step's own span, for what its code records (one set and reset per traced step).
    here = None if tracer is None or span is None else \
        current_step_span.set(ParentSpan(tracer, span))
    try:
        while True:
            ctx = StepContext(ex, scope, path, data, resume_data, attempt, iteration, span)
            try:
                if timeout is not None:
                    with anyio.fail_after(timeout):
                        out = await _call(step, ctx)
                elif step.is_async:  # the step's own coroutine, no ``_call`` frame around it
                    out = await step.execute(ctx)
                else:
                    out = await _call_sync(step, ctx)
                break
            except SuspendSignal as sig:
                await _suspend(ex, step, path, sig.payload, started, attempt + 1, scope)
            except (BailSignal, TripwireError) as stop:
                if isinstance(stop, TripwireError) and keep:
                    await ex.record(path, StepResult("failed", error=stop, started_at=started,
                                                     ended_at=time.time(),
                                                     attempts=attempt + 1))
                raise
            except Exception as exc:
                if attempt < retries:
                    attempt += 1
                    delay = wf.retry_delay * (2 ** (attempt - 1))
                    _log.info("run %s: step %s failed on attempt %d of %d, retrying in "
                              "%.3gs: %s: %s", ex.run_id, path, attempt, retries + 1, delay,
                              type(exc).__name__, exc, extra=_where(ex, wf.id, path))
                    await anyio.sleep(delay)
                    continue
                await _fail(ex, path, _wrap(exc, wf.id, ex.run_id, path, attempt + 1,
                                            timeout), started, attempt + 1)
        if step.output is not None:
            try:
                out = step.output.check(out, what="output", workflow_id=wf.id, step_id=path,
                                        run_id=ex.run_id)
            except StepValidationError as exc:
                await _fail(ex, path, exc, started, attempt + 1)
        ended = _now()
        if keep:
            result = StepResult("success", out, None, started, ended, lost + attempt + 1,
                                None, resume_data, iteration, lost=lost)
            if ex.encodes:  # refused here, as this step's failure, if unstorable
                try:
                    ex.encode(path, result)
                except StepValidationError as exc:
                    await _fail(ex, path, exc, started, attempt + 1)
    except BaseException as exc:
        if marked:
            ex.marked_running -= 1
        if span is not None:
            close_span(span, exc, attempt)
        raise
    finally:
        if here is not None:
            current_step_span.reset(here)
    if span is not None:  # Tracer.ok, inlined: this runs for every traced step
        span.end = ended
        span.status = "success"
        span.output = out if step.trace_io else None
        if attempt:
            span.set(attempts=attempt + 1)
    if keep:
        # A foreach item ("each[3]") is written at once only where it survives a crash
        # (an encoding storage); in memory it is kept and goes with the next write.
        if marked:
            ex.marked_running -= 1
            if not ex.marked_running:  # nothing else runs: the next write carries it
                ex.keep(path, result)
            else:  # written now, not left waiting for a concurrent step
                await ex.record(path, result)
        elif ex.sync and (ex.encodes or path[-1] != "]"):
            await ex.record(path, result)
        else:
            ex.keep(path, result)
    if ex.send is not None:
        await ex.event("step-result", path, {"output": out})
    return out


def close_span(span: Span, exc: BaseException, attempt: int = 0) -> None:
    """End a span by the exception that ended its work."""
    if isinstance(exc, Suspended | SuspendSignal):
        Tracer.end(span, "suspended")
    elif isinstance(exc, BailSignal):
        Tracer.end(span, "success", output=exc.result, bailed=True)
    elif isinstance(exc, TripwireError):
        Tracer.end(span, "tripwire", error=exc.reason, tripwire=exc.to_dict())
    elif isinstance(exc, Failed):
        Tracer.end(span, "failed", error=exc.error, attempts=attempt + 1,
                   traceback=_traceback(exc.error))
    elif isinstance(exc, Exception):
        from procflow.runtime.distributed import Parked  # (that module imports this one)

        if isinstance(exc, Parked):  # the work goes on elsewhere: ``settle_parked``
            Tracer.end(span, "running", parked=True)
            return
        Tracer.end(span, "failed", error=exc, attempts=attempt + 1, traceback=_traceback(exc))
    else:
        Tracer.end(span, "canceled")


def _traceback(error: BaseException, limit: int = 8000) -> str:
    """The error's formatted traceback (with its causes), the last ``limit`` characters;
    stored on the failed span (secrets are redacted when the trace is stored)."""
    text = "".join(traceback.format_exception(error))
    return text if len(text) <= limit else "…" + text[-limit:]


async def _call(step: StepUnit, ctx: StepContext) -> Any:
    if step.is_async:
        return await step.execute(ctx)
    return await _call_sync(step, ctx)


async def _call_sync(step: StepUnit, ctx: StepContext) -> Any:
    """Run a step whose ``execute`` is not a coroutine function (in a worker thread if
    it asked for one; an awaitable it returns is awaited)."""
    if step.run_in_thread:
        return await anyio.to_thread.run_sync(step.execute, ctx)
    out = step.execute(ctx)
    if inspect.isawaitable(out):
        out = await out
    return out


def _wrap(exc: Exception, workflow_id: str, run_id: str, path: str, attempts: int,
          timeout: float | None) -> WorkflowRunError:
    if isinstance(exc, WorkflowRunError) and exc.step_id is not None:
        return exc
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    if timeout is not None and isinstance(exc, TimeoutError):
        err: StepExecutionError = StepTimeoutError(
            f"workflow '{workflow_id}', step '{path}' timed out after {timeout}s{tries}",
            workflow_id=workflow_id, run_id=run_id, step_id=path, attempt=attempts)
    else:
        err = StepExecutionError(
            f"workflow '{workflow_id}', step '{path}' failed{tries}: "
            f"{type(exc).__name__}: {exc}",
            workflow_id=workflow_id, run_id=run_id, step_id=path, attempt=attempts)
    err.__cause__ = exc
    return err


def _where(ex: Execution, workflow_id: str, path: str) -> dict[str, str]:
    return {"run_id": ex.run_id, "workflow_id": workflow_id, "step_path": path}


async def _fail(ex: Execution, path: str, error: BaseException, started: float,
                attempts: int) -> Any:
    if isinstance(error, WorkflowRunError) and error.step_id is not None:
        # its message already names the workflow, the step and the attempts
        _log.warning("run %s: %s", ex.run_id, error, extra=_where(ex, ex.wf.id, path))
    else:
        _log.warning("run %s: workflow '%s', step '%s' failed%s: %s", ex.run_id, ex.wf.id,
                     path, f" after {attempts} attempts" if attempts > 1 else "", error,
                     extra=_where(ex, ex.wf.id, path))
    await ex.record(path, StepResult("failed", error=error, started_at=started,
                                     ended_at=time.time(), attempts=attempts))
    await ex.event("step-error", path, {"error": error})
    raise Failed(path, error)


async def _suspend(ex: Execution, unit: StepUnit, path: str, payload: Any, started: float,
                   attempts: int, scope: Scope) -> Any:
    if unit.suspend_check is not None:
        try:
            payload = unit.suspend_check.check(payload, what="suspend payload",
                                               workflow_id=scope.wf.id, step_id=path,
                                               run_id=ex.run_id)
        except StepValidationError as exc:
            await _fail(ex, path, exc, started, attempts)
    _log.info("run %s: step %s suspended", ex.run_id, path,
              extra=_where(ex, scope.wf.id, path))
    await ex.record(path, StepResult("suspended", None, None, started, None, attempts,
                                     payload))
    await ex.event("step-suspended", path, {"payload": payload})
    raise Suspended([path])


async def _run_nested(ex: Execution, wf: PlanUnit, data: Any, scope: Scope, path: str,
                      replay: bool, keep: bool, iteration: int) -> Any:
    if ex.replaying:
        rec, _, _ = _stored(ex, wf, path, replay)
        if rec is not None and rec.status == "success" and replay:
            return _hydrate(wf, rec.output)
    started = _now()
    if wf.input is not None:
        try:
            data = wf.input.check(data, what="input", workflow_id=scope.wf.id, step_id=path,
                                  run_id=ex.run_id)
        except StepValidationError as exc:
            await _fail(ex, path, exc, started, 1)
    if ex.send is not None:
        await ex.event("step-start", path, {"input": data})
    span = None if ex.tracer is None else ex.tracer.open(
        wf.id, "workflow", scope.span, path, started, data if wf.trace_io else None)
    inner = Scope(wf, path + ".", data, scope.state, None, span)
    plan = wf.compiled
    try:  # a one-node plan (an agent loop's stage, say) runs without run_plan between
        out = await (plan[0](ex, data, inner) if plan is not None and len(plan) == 1
                     else run_plan(ex, wf, data, inner))
    except BaseException as exc:
        scope.state = inner.state
        if span is not None:
            close_span(span, exc)
        if isinstance(exc, Suspended):
            await ex.record(path, StepResult("suspended", started_at=started))
        elif isinstance(exc, Failed):
            await ex.record(path, StepResult("failed", error=exc.error, started_at=started,
                                             ended_at=time.time()))
        raise
    scope.state = inner.state
    ended = _now()
    if span is not None:
        span.end = ended
        span.status = "success"
        if wf.trace_io and out is not None:
            span.output = out
    if wf.output is not None:
        try:
            out = wf.output.check(out, what="output", workflow_id=scope.wf.id, step_id=path,
                                  run_id=ex.run_id)
        except StepValidationError as exc:
            await _fail(ex, path, exc, started, 1)
    if keep:
        result = StepResult("success", out, None, started, ended, 1, None, None, iteration)
        if ex.sync and (ex.marked_running or not ex.mark_started):
            await ex.record(path, result)
        else:
            ex.keep(path, result)
    if ex.send is not None:
        await ex.event("step-result", path, {"output": out})
    return out


async def run_plan(ex: Execution, wf: PlanUnit, data: Any, scope: Scope) -> Any:
    """Run a workflow's compiled plan, node by node, in this task."""
    plan = wf.compiled
    if plan is None:
        plan = wf.compile()
    for node in plan:
        data = await node(ex, data, scope)
    return data
