"""The executor: runs a committed workflow's compiled plan on anyio.

Sequential steps run inline in the caller's task; tasks are made only for real
concurrency (``parallel``, ``branch`` with several true conditions, ``foreach`` with
``concurrency > 1``). Step results are kept in one dict keyed by step path; a result
that is already "success" (from a snapshot) is replayed instead of re-run, which is
how ``resume()`` and ``restart()`` continue a run.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from procflow.errors import (
    StepExecutionError,
    StepTimeoutError,
    StepValidationError,
    TripWire,
    WorkflowRunError,
)
from procflow.runtime.events import EventType, WorkflowEvent
from procflow.runtime.results import RunSnapshot, RunStatus, StepResult
from procflow.runtime.tracing import Span, Tracer
from procflow.steps.context import BailSignal, StepContext, SuspendSignal
from procflow.steps.step import Step

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectSendStream

    from procflow.context import RequestContext
    from procflow.storage.base import Storage
    from procflow.workflows.workflow import Workflow

_now = time.time

__all__ = ["Execution", "Failed", "Scope", "Suspended", "run_unit"]


class Failed(Exception):
    """Internal: a step failed; carries its path and the public error."""

    def __init__(self, path: str, error: BaseException) -> None:
        super().__init__(path)
        self.path = path
        self.error = error


class Suspended(Exception):
    """Internal: one or more steps suspended; carries their paths."""

    def __init__(self, paths: list[str]) -> None:
        super().__init__(paths)
        self.paths = paths


class Scope:
    """Where a step runs: its workflow, its path prefix, its view of the state.

    A forked scope (a parallel branch, a foreach item) copies the state lazily, on
    first access, so branches that never touch state cost nothing.
    """

    __slots__ = ("_base", "_state", "init_data", "prefix", "span", "wf")

    def __init__(self, wf: Workflow, prefix: str, init_data: Any,
                 state: dict[str, Any] | None = None,
                 base: dict[str, Any] | None = None, span: Span | None = None) -> None:
        self.wf = wf
        self.prefix = prefix
        self.init_data = init_data
        self._state = state
        self._base = base
        self.span = span  # the span enclosing the steps of this scope

    @property
    def workflow_id(self) -> str:
        return self.wf.id

    @property
    def state(self) -> dict[str, Any]:
        if self._state is None:
            self._state = dict(self._base or {})
        return self._state

    @state.setter
    def state(self, value: dict[str, Any]) -> None:
        self._state = value

    def fork(self, span: Span | None = None) -> Scope:
        return Scope(self.wf, self.prefix, self.init_data, base=self.state,
                     span=span if span is not None else self.span)

    def under(self, span: Span | None) -> Scope:
        """This scope (same state) with ``span`` as the parent of its steps' spans."""
        if span is None:
            return self
        return Scope(self.wf, self.prefix, self.init_data, state=self.state, span=span)

    def join(self, forks: list[Scope]) -> None:
        """Merge the forks' state changes, in fork order (later forks win per key)."""
        base = self.state
        merged: dict[str, Any] | None = None
        for fork in forks:
            changed = fork._state
            if changed is None:
                continue
            if merged is None:
                merged = dict(base)
            for key, value in changed.items():
                if key not in base or base[key] is not value:
                    merged[key] = value
            for key in base:
                if key not in changed:
                    merged.pop(key, None)
        if merged is not None:
            self._state = merged


class Execution:
    """One execution of a run: results, state, storage and event plumbing."""

    __slots__ = (
        "context_json",
        "created_at",
        "dirty",
        "input",
        "persistent",
        "records",
        "replaying",
        "request_context",
        "resume_data",
        "resume_targets",
        "run_id",
        "send",
        "status",
        "storage",
        "sync",
        "top",
        "tracer",
        "wf",
    )

    def __init__(self, *, wf: Workflow, run_id: str, input: Any,
                 records: dict[str, StepResult], state: dict[str, Any],
                 request_context: RequestContext, storage: Storage, sync: bool,
                 send: MemoryObjectSendStream[WorkflowEvent] | None, created_at: float,
                 resume_targets: frozenset[str] = frozenset(),
                 resume_data: Any = None, tracer: Tracer | None = None) -> None:
        self.wf = wf
        self.run_id = run_id
        self.input = input
        self.records = records
        self.replaying = bool(records)  # stored results exist: resume or restart
        self.dirty: dict[str, StepResult] = {}
        self.request_context = request_context
        self.storage = storage
        self.persistent: bool = getattr(storage, "persistent", True)
        self.context_json = request_context.json_safe() if self.persistent else {}
        self.sync = sync and self.persistent
        self.send = send
        self.created_at = created_at
        self.resume_targets = resume_targets
        self.resume_data = resume_data
        self.tracer = tracer
        self.top = Scope(wf, "", input, state=state)
        self.status: RunStatus = "running"

    # -- results, snapshots, events ----------------------------------------------

    def keep(self, path: str, result: StepResult) -> None:
        """Keep a step's result for the next flush (the hot path: no await)."""
        self.records[path] = result
        if self.persistent:
            self.dirty[path] = result

    async def record(self, path: str, result: StepResult) -> None:
        """Keep a step's result, and write a snapshot now under "sync" durability."""
        self.keep(path, result)
        if self.sync:
            await self.flush("running")

    async def flush(self, status: RunStatus, *, result: Any = None,
                    error: BaseException | None = None, suspended: list[list[str]] | None = None,
                    tripwire: dict[str, Any] | None = None) -> None:
        """Write the run header and the step results changed since the last flush."""
        dirty, self.dirty = self.dirty, {}
        if not self.persistent:
            return
        if status != "running":
            self.context_json = self.request_context.json_safe()
        snapshot = RunSnapshot(
            workflow_id=self.wf.id, run_id=self.run_id, status=status, input=self.input,
            state=self.top.state, result=result, error=error, suspended=suspended or [],
            tripwire=tripwire, request_context=self.context_json,
            created_at=self.created_at, updated_at=time.time())
        await self.storage.save_snapshot(snapshot, dirty)

    async def event(self, type: EventType, step_id: str | None, payload: Any) -> None:
        if self.send is not None:
            try:
                await self.send.send(WorkflowEvent(type, self.run_id, step_id, payload,
                                                   time.time()))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self.send = None  # nobody listens any more; the run carries on

    async def emit_custom(self, step_id: str, event_type: str, payload: Any) -> None:
        if self.send is not None:
            await self.event("custom", step_id, {"type": event_type, "data": payload})

    def resume_for(self, path: str) -> tuple[bool, Any]:
        """Whether ``path`` is the step being resumed, and the data to resume it with."""
        if path in self.resume_targets:
            return True, self.resume_data
        return False, None


# -- running one step (or nested workflow) ---------------------------------------

async def run_unit(ex: Execution, unit: Step | Workflow, data: Any, scope: Scope, *,
                   replay: bool = True, path: str | None = None, keep: bool = True,
                   iteration: int = 0) -> Any:
    """Run a step or nested workflow and return its output.

    Args:
        replay: Reuse a stored "success" result instead of running again.
        path: The result path (default: scope prefix + unit id).
        keep: Record a successful result (foreach items record only failures/suspends).
        iteration: The loop iteration, recorded on the result.

    Raises:
        Failed: The unit failed (its result is recorded).
        Suspended: The unit (or a step inside it) suspended.
    """
    if path is None:
        path = scope.prefix + unit.id
    if isinstance(unit, Step):
        return await _run_step(ex, unit, data, scope, path, replay, keep, iteration)
    return await _run_nested(ex, unit, data, scope, path, replay, keep, iteration)


def _stored(ex: Execution, unit: Step | Workflow, path: str, replay: bool,
            ) -> tuple[StepResult | None, bool, Any]:
    """Look at a step's stored result: (record, is_resume_target, resume_data)."""
    rec = ex.records.get(path)
    if rec is None:
        return None, False, None
    if rec.status == "suspended":
        targeted, data = ex.resume_for(path)
        if not targeted and replay and not _contains_target(ex, path):
            raise Suspended([path] if isinstance(unit, Step) else _suspended_under(ex, path))
        return rec, targeted, data
    return rec, False, None


def _contains_target(ex: Execution, path: str) -> bool:
    return any(t.startswith(path + ".") or t.startswith(path + "[") for t in ex.resume_targets)


def _suspended_under(ex: Execution, path: str) -> list[str]:
    inner = [p for p, r in ex.records.items() if r.status == "suspended"
             and (p.startswith(path + ".") or p.startswith(path + "["))]
    leaves = [p for p in inner if not any(q.startswith(p + ".") or q.startswith(p + "[")
                                          for q in inner)]
    return leaves or [path]


def _hydrate(unit: Step | Workflow, output: Any) -> Any:
    schema = unit.output
    if schema is None or output is None:
        return output
    return schema.validate(output)


async def _run_step(ex: Execution, step: Step, data: Any, scope: Scope, path: str,
                    replay: bool, keep: bool, iteration: int) -> Any:
    resume_data = None
    if ex.replaying:
        rec, targeted, resume_data = _stored(ex, step, path, replay)
        if rec is not None and rec.status == "success" and replay:
            return _hydrate(step, rec.output)
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
    if tracer is not None:
        span = tracer.open(step.id, step.span_kind, scope.span, path, started,
                           data if step.trace_io else None)
    if ex.send is not None:
        await ex.event("step-start", path, {"input": data})
    attempt = 0
    try:
        while True:
            ctx = StepContext(ex, scope, path, data, resume_data, attempt, iteration, span)
            try:
                if timeout is None:
                    out = await _call(step, ctx)
                else:
                    with anyio.fail_after(timeout):
                        out = await _call(step, ctx)
                break
            except SuspendSignal as sig:
                await _suspend(ex, step, path, sig.payload, started, attempt + 1, scope)
            except (BailSignal, TripWire) as stop:
                if isinstance(stop, TripWire) and keep:
                    await ex.record(path, StepResult("failed", error=stop, started_at=started,
                                                     ended_at=time.time(),
                                                     attempts=attempt + 1))
                raise
            except Exception as exc:
                if attempt < retries:
                    attempt += 1
                    await anyio.sleep(wf.retry_delay * (2 ** (attempt - 1)))
                    continue
                await _fail(ex, path, _wrap(exc, wf.id, ex.run_id, path, attempt + 1,
                                            timeout), started, attempt + 1)
        if step.output is not None:
            try:
                out = step.output.check(out, what="output", workflow_id=wf.id, step_id=path,
                                        run_id=ex.run_id)
            except StepValidationError as exc:
                await _fail(ex, path, exc, started, attempt + 1)
    except BaseException as exc:
        if span is not None:
            close_span(span, exc, attempt)
        raise
    ended = _now()
    if span is not None:  # Tracer.ok, inlined: this runs for every traced step
        span.end = ended
        span.status = "success"
        span.output = out if step.trace_io else None
        if attempt:
            span.set(attempts=attempt + 1)
    if keep:
        result = StepResult("success", out, None, started, ended, attempt + 1, None,
                            resume_data, iteration)
        if ex.sync:
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
    elif isinstance(exc, TripWire):
        Tracer.end(span, "tripwire", error=exc.reason, tripwire={
            "reason": exc.reason, "processor_id": exc.processor_id, "retry": exc.retry,
            "metadata": exc.metadata})
    elif isinstance(exc, Failed):
        Tracer.end(span, "failed", error=exc.error, attempts=attempt + 1)
    elif isinstance(exc, Exception):
        Tracer.end(span, "failed", error=exc, attempts=attempt + 1)
    else:
        Tracer.end(span, "canceled")


async def _call(step: Step, ctx: StepContext) -> Any:
    if step.is_async:
        return await step.execute(ctx)
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


async def _fail(ex: Execution, path: str, error: BaseException, started: float,
                attempts: int) -> Any:
    await ex.record(path, StepResult("failed", error=error, started_at=started,
                                     ended_at=time.time(), attempts=attempts))
    await ex.event("step-error", path, {"error": error})
    raise Failed(path, error)


async def _suspend(ex: Execution, unit: Step, path: str, payload: Any, started: float,
                   attempts: int, scope: Scope) -> Any:
    if unit.suspend_check is not None:
        try:
            payload = unit.suspend_check.check(payload, what="suspend payload",
                                               workflow_id=scope.wf.id, step_id=path,
                                               run_id=ex.run_id)
        except StepValidationError as exc:
            await _fail(ex, path, exc, started, attempts)
    await ex.record(path, StepResult("suspended", None, None, started, None, attempts,
                                     payload))
    await ex.event("step-suspended", path, {"payload": payload})
    raise Suspended([path])


async def _run_nested(ex: Execution, wf: Workflow, data: Any, scope: Scope, path: str,
                      replay: bool, keep: bool, iteration: int) -> Any:
    if ex.replaying:
        rec, _, _ = _stored(ex, wf, path, replay)
        if rec is not None and rec.status == "success" and replay:
            return _hydrate(wf, rec.output)
    started = time.time()
    if wf.input is not None:
        try:
            data = wf.input.check(data, what="input", workflow_id=scope.wf.id, step_id=path,
                                  run_id=ex.run_id)
        except StepValidationError as exc:
            await _fail(ex, path, exc, started, 1)
    if ex.send is not None:
        await ex.event("step-start", path, {"input": data})
    span = None if ex.tracer is None else ex.tracer.start(
        wf.id, "workflow", scope.span, path, data if wf.trace_io else None)
    inner = Scope(wf, path + ".", data, state=scope.state, span=span)
    try:
        out = await run_plan(ex, wf, data, inner)
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
    if span is not None:
        Tracer.end(span, "success", output=out if wf.trace_io else None)
    if wf.output is not None:
        try:
            out = wf.output.check(out, what="output", workflow_id=scope.wf.id, step_id=path,
                                  run_id=ex.run_id)
        except StepValidationError as exc:
            await _fail(ex, path, exc, started, 1)
    if keep:
        await ex.record(path, StepResult("success", out, None, started, time.time(),
                                         1, None, None, iteration))
    if ex.send is not None:
        await ex.event("step-result", path, {"output": out})
    return out


async def run_plan(ex: Execution, wf: Workflow, data: Any, scope: Scope) -> Any:
    """Run a workflow's compiled plan, node by node, in this task."""
    plan: list[Callable[[Execution, Any, Scope], Any]] | None = wf.compiled
    if plan is None:
        from procflow.runtime.nodes import compile_plan

        plan = wf.compiled = compile_plan(wf)
    for node in plan:
        data = await node(ex, data, scope)
    return data
