"""Plan nodes: the async callables a workflow's plan entries compile to, once per workflow.

Each builder entry (``procflow.workflows.plan``) reads itself into ``RUNTIME``, whose
methods are the factories here; the runtime only ever sees the resulting ``Node``
callables.
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from types import GeneratorType
from typing import Any, Literal

import anyio

from procflow.errors import StepExecutionError, StepValidationError, TripwireError
from procflow.records import Span, SpanKind, StepResult
from procflow.runtime.distributed import fan_out
from procflow.runtime.execution import Execution, Failed, Node, Scope, Suspended, Unit
from procflow.runtime.step_context import BailSignal, StepContext
from procflow.runtime.step_runner import close_span, run_unit
from procflow.runtime.tracing import Tracer

_now = time.time

__all__ = [
    "RUNTIME",
    "Condition",
    "RuntimeReader",
    "branch_node",
    "foreach_node",
    "loop_node",
    "map_node",
    "parallel_node",
    "sleep_node",
    "sleep_until_node",
    "then_node",
    "when_node",
]

Condition = Callable[[Any], Any]
"""A function of a ``StepContext`` returning a truth value (sync or async)."""


def then_node(unit: Unit) -> Node:
    """``.then(unit)``: run it on the data (the unit's own coroutine is the node's)."""
    def then(ex: Execution, data: Any, scope: Scope) -> Awaitable[Any]:
        return run_unit(ex, unit, data, scope)
    return then


def parallel_node(steps: Sequence[Unit], distribute: bool = False) -> Node:
    """``.parallel(steps)``: all at once on the data; output keyed by step id.
    ``distribute``: each branch a job of the worker pool (see ``runtime.distributed``)."""
    async def parallel(ex: Execution, data: Any, scope: Scope) -> Any:
        if distribute and ex.distributor is not None:
            paths = [scope.prefix + s.id for s in steps]
            outputs = await _contained(
                ex, "parallel", "parallel", scope,
                lambda sub: fan_out(ex, ex.distributor, steps, [data] * len(steps), paths,
                                    paths, scope.prefix + "parallel", sub.span),
                branches=len(steps), distributed=True)
            return {s.id: o for s, o in zip(steps, outputs, strict=True)}
        return await _contained(ex, "parallel", "parallel", scope,
                                lambda sub: _together(ex, steps, data, sub),
                                branches=len(steps))
    return parallel


async def _contained(ex: Execution, kind: SpanKind, name: str, scope: Scope,
                     work: Callable[[Scope], Awaitable[Any]], **attributes: Any) -> Any:
    """Run ``work`` inside a container span (when traced); state flows back to ``scope``."""
    tracer = ex.tracer
    if tracer is None:
        return await work(scope)
    span = tracer.open(name, kind, scope.span, scope.path(name), _now())
    if attributes:
        span.attributes = attributes
    sub = Scope(scope.wf, scope.prefix, scope.init_data, scope.state, None, span)
    try:
        out = await work(sub)
    except BaseException as exc:
        close_span(span, exc)
        raise
    finally:
        scope.state = sub.state
    # A container's output is its children's outputs, already on their spans; keeping
    # it here too would also tie internal objects (the agent loop's state) to the trace.
    Tracer.end(span, "success")
    return out


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


def _plain(value: Any) -> bool:
    """Whether a condition's or map's result is not awaitable (a set lookup for the
    types seen before: most results are booleans or the same data class each time)."""
    kind = type(value)
    if kind in _PLAIN:
        return True
    if inspect.isawaitable(value):
        return False
    if kind is not GeneratorType and len(_PLAIN) < 512:  # a generator's is per object
        _PLAIN.add(kind)
    return True


_PLAIN: set[type] = {bool, dict, list, str, int, float, type(None)}


def _unwrap_group(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The exception that should leave a task group: a control signal first."""
    flat: list[BaseException] = []
    stack: list[BaseException] = [group]
    while stack:
        exc = stack.pop()
        if isinstance(exc, BaseExceptionGroup):
            stack.extend(reversed(exc.exceptions))
        else:
            flat.append(exc)
    for kind in (BailSignal, TripwireError):
        for exc in flat:
            if isinstance(exc, kind):
                return exc
    cancelled = anyio.get_cancelled_exc_class()
    for exc in flat:
        if not isinstance(exc, cancelled):
            return exc
    return flat[0]


async def _together(ex: Execution, steps: Sequence[Unit], data: Any, scope: Scope,
                    ) -> dict[str, Any]:
    """Run steps concurrently on one input; merge state in order; aggregate outcomes."""
    n = len(steps)
    if n == 1:
        return {steps[0].id: await run_unit(ex, steps[0], data, scope)}
    forks = [scope.fork() for _ in range(n)]
    outputs: list[Any] = [None] * n
    failures: list[Failed | None] = [None] * n
    suspended: list[str] = []

    async def one(i: int) -> None:
        try:
            outputs[i] = await run_unit(ex, steps[i], data, forks[i])
        except Failed as failed:
            failures[i] = failed
        except Suspended as sus:
            suspended.extend(sus.paths)

    try:
        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(one, i)
    except BaseExceptionGroup as group:
        raise _unwrap_group(group) from None
    scope.join(forks)
    for failed in failures:
        if failed is not None:
            raise failed
    if suspended:
        raise Suspended(suspended)
    return {steps[i].id: outputs[i] for i in range(n)}


def _holds(ex: Execution, scope: Scope, condition: Condition, unit: Unit, data: Any,
           ) -> bool | Awaitable[bool]:
    """Whether ``unit``'s condition holds on ``data``; when it does not, the unit is
    recorded "skipped". Awaitable only when the condition is async or the record must
    be written now (``ex.sync``) or an event sent: the usual sync case makes no coroutine."""
    path = scope.path(unit.id)
    try:
        holds = condition(StepContext(ex, scope, path, data))
    except Exception as exc:
        return _condition_failed(ex, scope, path, exc)
    if not _plain(holds):
        return _holds_later(ex, scope, path, unit, holds)
    if holds:
        return True
    return _skipped(ex, scope, path, unit)


async def _holds_later(ex: Execution, scope: Scope, path: str, unit: Unit,
                       holds: Awaitable[Any]) -> bool:
    try:
        value = await holds
    except Exception as exc:
        return await _condition_failed(ex, scope, path, exc)
    if value:
        return True
    out = _skipped(ex, scope, path, unit)
    return out if isinstance(out, bool) else await out


async def _condition_failed(ex: Execution, scope: Scope, path: str, exc: Exception) -> bool:
    err = StepExecutionError(
        f"workflow '{scope.wf.id}': the branch condition of step '{path}' raised "
        f"{type(exc).__name__}: {exc}", workflow_id=scope.wf.id,
        run_id=ex.run_id, step_id=path)
    err.__cause__ = exc
    await ex.record(path, StepResult("failed", error=err, started_at=time.time()))
    raise Failed(path, err) from exc


def _skipped(ex: Execution, scope: Scope, path: str, unit: Unit) -> bool | Awaitable[bool]:
    now = _now()
    skipped = StepResult("skipped", started_at=now, ended_at=now, attempts=0)
    if ex.tracer is not None:
        span = ex.tracer.open(unit.id, "step", scope.span, path, now)
        span.end, span.status = now, "skipped"
    if ex.sync or ex.send is not None:
        return _skipped_now(ex, path, skipped)
    ex.keep(path, skipped)
    return False


async def _skipped_now(ex: Execution, path: str, skipped: StepResult) -> bool:
    if ex.sync:
        await ex.record(path, skipped)
    else:
        ex.keep(path, skipped)
    if ex.send is not None:
        await ex.event("step-skipped", path, None)
    return False


def branch_node(branches: Sequence[tuple[Condition, Unit]]) -> Node:
    """``.branch(pairs)``: every step whose condition holds, at once; the rest skipped.

    Traced, a branch is a "branch" span holding the arms that ran (and those skipped);
    a branch of one arm has no span of its own, its arm's span sits where the branch is.
    """

    count = len(branches)

    async def choose(ex: Execution, data: Any, scope: Scope) -> Any:
        chosen = []
        for condition, unit in branches:
            holds = _holds(ex, scope, condition, unit, data)
            if not isinstance(holds, bool):
                holds = await holds
            if holds:
                chosen.append(unit)
        if not chosen:
            return {}
        if len(chosen) == 1:  # the usual case: no task, no forked state
            unit = chosen[0]
            return {unit.id: await run_unit(ex, unit, data, scope)}
        return await _together(ex, chosen, data, scope)

    async def branch(ex: Execution, data: Any, scope: Scope) -> Any:
        if ex.tracer is None or count == 1:
            return await choose(ex, data, scope)
        return await _contained(ex, "branch", "branch", scope,
                                lambda sub: choose(ex, data, sub), branches=count)
    return branch


def when_node(condition: Condition, unit: Unit) -> Node:
    """``.when(condition, unit)``: the unit's output when the condition holds; else the
    unit is "skipped" and the data passes on unchanged. No span of its own (traced, the
    unit's span, or its "skipped" one, sits where the ``when`` is)."""

    async def when(ex: Execution, data: Any, scope: Scope) -> Any:
        holds = _holds(ex, scope, condition, unit, data)
        if not isinstance(holds, bool):
            holds = await holds
        if holds:
            return await run_unit(ex, unit, data, scope)
        return data
    return when


def map_node(map_id: str, fn: Callable[[Any], Any]) -> Node:
    """``.map(fn)``: reshape the data with ``fn(ctx)``."""

    async def map_(ex: Execution, data: Any, scope: Scope) -> Any:
        path = scope.prefix + map_id
        try:
            out = fn(StepContext(ex, scope, path, data))
            return out if _plain(out) else await out
        except (BailSignal, TripwireError):
            raise
        except Exception as exc:
            err = StepExecutionError(
                f"workflow '{scope.wf.id}', map '{path}' failed: {type(exc).__name__}: {exc}",
                workflow_id=scope.wf.id, run_id=ex.run_id, step_id=path)
            err.__cause__ = exc
            await ex.event("step-error", path, {"error": err})
            raise Failed(path, err) from exc
    return map_


def foreach_node(unit: Unit, concurrency: int, distribute: bool = False) -> Node:
    """``.foreach(unit, concurrency=n)``: the unit over each item of a list.
    ``distribute``: each item a job of the worker pool (see ``runtime.distributed``)."""

    async def foreach(ex: Execution, data: Any, scope: Scope) -> Any:
        path = scope.prefix + unit.id
        rec = ex.records.get(path) if ex.replaying else None
        if rec is not None and rec.status == "success":
            return [_hydrate_item(unit, o) for o in rec.output]
        started = time.time()
        if not isinstance(data, list | tuple):
            err = StepValidationError(
                f"workflow '{scope.wf.id}': foreach step '{path}' needs a list as input, got "
                f"{type(data).__name__}; add a .map() that returns the list",
                workflow_id=scope.wf.id, run_id=ex.run_id, step_id=path, field="<root>")
            await ex.record(path, StepResult("failed", error=err, started_at=started,
                                             ended_at=time.time()))
            raise Failed(path, err)
        done: dict[int, Any] = dict(rec.partial or {}) if rec is not None else {}
        if ex.send is not None:
            await ex.event("step-start", path, {"input": data, "items": len(data)})
        if distribute and ex.distributor is not None:
            paths = [f"{path}[{i}]" for i in range(len(data))]
            try:
                result = await _contained(
                    ex, "foreach", unit.id, scope,
                    lambda sub: fan_out(ex, ex.distributor, [unit] * len(data), data,
                                        [path] * len(data), paths, path, sub.span),
                    items=len(data), distributed=True)
            except Failed as item_failed:
                await ex.record(path, StepResult("failed", error=item_failed.error,
                                                 started_at=started, ended_at=time.time()))
                raise
            await ex.record(path, StepResult("success", result, None, started, time.time()))
            return result
        outputs, failed, suspended = await _contained(
            ex, "foreach", unit.id, scope,
            lambda sub: _run_items(ex, unit, data, sub, path, done, concurrency),
            items=len(data), concurrency=concurrency)
        if failed is not None:
            await ex.record(path, StepResult("failed", error=failed.error, started_at=started,
                                             ended_at=time.time(), partial=outputs))
            raise failed
        if suspended:
            await ex.record(path, StepResult("suspended", started_at=started, partial=outputs))
            raise Suspended(suspended)
        result = [outputs[i] for i in range(len(data))]
        await ex.record(path, StepResult("success", result, None, started, time.time()))
        if ex.send is not None:
            await ex.event("step-result", path, {"output": result})
        return result
    return foreach


def _hydrate_item(unit: Unit, output: Any) -> Any:
    return unit.output.validate(output) if unit.output is not None and output is not None \
        else output


async def _run_items(ex: Execution, unit: Unit, items: Sequence[Any], scope: Scope,
                     path: str, done: dict[int, Any], concurrency: int,
                     ) -> tuple[dict[int, Any], Failed | None, list[str]]:
    """Run the not-yet-done items, at most ``concurrency`` at once, stopping on trouble."""
    outputs = {i: _hydrate_item(unit, o) for i, o in done.items()}
    todo = iter([i for i in range(len(items)) if i not in done])
    failures: dict[int, Failed] = {}
    suspended: list[str] = []
    forks: dict[int, Scope] = {}

    async def item(i: int) -> bool:
        fork = forks[i] = scope.fork()
        item_path = f"{path}[{i}]"
        try:
            # Each finished item is recorded as it finishes (``step[i]``), so a run
            # restarted after a crash replays it instead of running it again. A storage
            # that cannot outlive the process needs no such record: a failed or suspended
            # foreach keeps its finished items' outputs (``partial``) either way.
            outputs[i] = await run_unit(ex, unit, items[i], fork, path=item_path,
                                        replay=True, keep=ex.encodes)
        except Failed as failed:
            failures[i] = failed
            return False
        except Suspended as sus:
            suspended.extend(sus.paths)
            return False
        return True

    if concurrency == 1:
        for i in todo:
            if not await item(i):
                break
    else:
        stop = False

        async def worker() -> None:
            nonlocal stop
            for i in todo:
                if stop or not await item(i):
                    stop = True
                    return

        try:
            async with anyio.create_task_group() as tg:
                for _ in range(min(concurrency, len(items))):
                    tg.start_soon(worker)
        except BaseExceptionGroup as group:
            raise _unwrap_group(group) from None
    scope.join([forks[i] for i in sorted(forks)])
    first = failures[min(failures)] if failures else None
    return outputs, first, suspended


def loop_node(unit: Unit, condition: Condition, mode: Literal["dowhile", "dountil"],
              limit: int | None) -> Node:
    """``.dowhile``/``.dountil``: the unit, then again on its output while (until) the
    condition holds, at most ``limit`` times."""

    # The loop span's attributes, one dict per iteration count for every run (the trace
    # is stored, and these are the same in each): never changed once on a span.
    finished: dict[int, dict[str, Any]] = {}

    async def loop(ex: Execution, data: Any, scope: Scope) -> Any:
        return await _contained(ex, "loop", unit.id, scope, lambda sub: body(ex, data, sub),
                                mode=mode)

    def ended(span: Span, iterations: int) -> None:
        """Note the iterations on the loop's span (a shared dict when the span holds only
        its mode so far, as it always does today; else added to what it holds)."""
        if span.attributes is not None and len(span.attributes) != 1:
            span.set(iterations=iterations)
            return
        attributes = finished.get(iterations)
        if attributes is None:
            attributes = {"mode": mode, "iterations": iterations}
            if len(finished) < 64:
                finished[iterations] = attributes
        span.attributes = attributes

    async def body(ex: Execution, data: Any, scope: Scope) -> Any:
        path = scope.prefix + unit.id
        rec = ex.records.get(path) if ex.replaying else None
        if rec is not None and rec.status == "success":
            iteration, out = rec.iterations, await run_unit(ex, unit, data, scope)
        elif rec is not None and rec.status == "failed" and rec.partial:
            # an earlier execution failed mid-loop: continue from its last good iteration
            iteration, out = next(iter(rec.partial.items()))
            out = _hydrate_item(unit, out)
        else:
            iteration = 1
            out = await run_unit(ex, unit, data, scope, replay=True, iteration=1)
        while True:
            ctx = StepContext(ex, scope, path, out, iteration_count=iteration)
            try:
                holds = condition(ctx)
                holds = bool(holds if _plain(holds) else await holds)
            except (BailSignal, TripwireError):
                raise
            except Exception as exc:
                err = StepExecutionError(
                    f"workflow '{scope.wf.id}': the {mode} condition of step '{path}' raised "
                    f"{type(exc).__name__}: {exc}", workflow_id=scope.wf.id,
                    run_id=ex.run_id, step_id=path)
                err.__cause__ = exc
                raise Failed(path, err) from exc
            if holds != (mode == "dowhile"):
                if scope.span is not None:
                    ended(scope.span, iteration)
                return out
            if limit is not None and iteration >= limit:
                err = StepExecutionError(
                    f"workflow '{scope.wf.id}': {mode} step '{path}' reached max_iterations="
                    f"{limit} without its condition ending the loop",
                    workflow_id=scope.wf.id, run_id=ex.run_id, step_id=path)
                raise Failed(path, err)
            iteration += 1
            if ex.replaying:  # a resumed loop: later iterations run anew, not from the
                inner = (path + ".", path + "[")  # stored steps of the previous one
                for stale in [p for p in ex.records if p.startswith(inner)]:
                    del ex.records[stale]
            try:
                out = await run_unit(ex, unit, out, scope, replay=False, iteration=iteration)
            except Failed:
                failed = ex.records.get(path)
                if failed is not None and failed.status == "failed":
                    await ex.record(path, replace(failed, iterations=iteration - 1,
                                                  partial={iteration - 1: out}))
                raise
    return loop


def sleep_node(entry_id: str, seconds: float | Callable[[Any], Any]) -> Node:
    """``.sleep(seconds)``: wait, passing the data through."""
    async def delay(ctx: StepContext) -> float:
        value = await _maybe_await(seconds(ctx)) if callable(seconds) else seconds
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value):
            raise Failed(ctx.step_id, StepExecutionError(
                f"workflow '{ctx.workflow_id}': sleep '{ctx.step_id}' needs a finite number "
                f"of seconds, got {value!r}", workflow_id=ctx.workflow_id,
                step_id=ctx.step_id))
        return float(value)
    return _sleep(entry_id, delay)


def sleep_until_node(entry_id: str, until: datetime | Callable[[Any], Any]) -> Node:
    """``.sleep_until(when)``: wait until a moment, passing the data through."""
    async def delay(ctx: StepContext) -> float:
        moment = await _maybe_await(until(ctx)) if callable(until) else until
        if not isinstance(moment, datetime):
            raise Failed(ctx.step_id, StepExecutionError(
                f"workflow '{ctx.workflow_id}': sleep_until '{ctx.step_id}' needs a datetime, "
                f"got {type(moment).__name__}", workflow_id=ctx.workflow_id,
                step_id=ctx.step_id))
        now = datetime.now(UTC) if moment.tzinfo else datetime.now()
        return (moment - now).total_seconds()
    return _sleep(entry_id, delay)


def _sleep(entry_id: str, delay: Callable[[StepContext], Awaitable[float]]) -> Node:
    async def sleep(ex: Execution, data: Any, scope: Scope) -> Any:
        if ex.tracer is None:
            return await wait(ex, data, scope)
        span = ex.tracer.start(entry_id, "sleep", scope.span, path=scope.prefix + entry_id)
        try:
            out = await wait(ex, data, scope)
        except BaseException as exc:
            close_span(span, exc)
            raise
        Tracer.end(span, "success")
        return out

    async def wait(ex: Execution, data: Any, scope: Scope) -> Any:
        path = scope.prefix + entry_id
        if ex.send is not None:
            await ex.event("step-start", path, {"input": data})
        seconds = await delay(StepContext(ex, scope, path, data))
        if seconds > 0:
            if ex.mark_started and ex.dirty:  # results owed to storage don't wait
                await ex.flush("running")
            await anyio.sleep(seconds)
        if ex.send is not None:
            await ex.event("step-result", path, {"output": data})
        return data
    return sleep


class RuntimeReader:
    """The plan as the runtime reads it (``procflow.workflows.plan.Reader``): each
    builder call as the ``Node`` that runs it."""

    then = staticmethod(then_node)
    parallel = staticmethod(parallel_node)
    branch = staticmethod(branch_node)
    when = staticmethod(when_node)
    map = staticmethod(map_node)
    foreach = staticmethod(foreach_node)
    loop = staticmethod(loop_node)
    sleep = staticmethod(sleep_node)
    sleep_until = staticmethod(sleep_until_node)


RUNTIME = RuntimeReader()
"""The runtime's reader of plans: ``entry.compile()`` is ``entry.read(RUNTIME)``."""
