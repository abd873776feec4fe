"""The executor seam: where a submitted run executes.

``await run.submit(...)`` hands a run to an ``Executor`` and returns its id; ``await
run.result(timeout=...)`` waits for its stored outcome; ``await run.cancel()`` reaches it
wherever it runs. ``LocalExecutor`` (the default) runs it in this process;
``procflow.workers.DramatiqExecutor`` (extra ``procflow[dramatiq]``) sends it to
Dramatiq workers sharing a Redis server (``procflow worker``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self, final

import anyio

from procflow.errors import RunStateError

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from procflow.runtime.results import WorkflowResult
    from procflow.runtime.run import Run

__all__ = ["Executor", "LocalExecutor", "default_executor", "set_default_executor"]

SETTLED: frozenset[str] = frozenset({"success", "failed", "tripwire", "canceled", "suspended"})
"""Statuses a waiter returns on: final, or suspended (waiting for ``resume``)."""


class Executor(Protocol):
    """Runs submitted runs somewhere and reports their outcome."""

    async def submit(self, run: Run, input_data: Any, *,
                     request_context: Mapping[str, Any] | None = None,
                     initial_state: Mapping[str, Any] | None = None) -> str:
        """Start ``run`` with ``input_data``; return its id without waiting for it."""
        ...

    async def resume(self, run: Run, step: str, resume_data: Any) -> str:
        """Resume the suspended ``step`` of ``run`` (checked by the caller) with
        ``resume_data``; return the run's id without waiting for it.

        Raises:
            RunStateError: Another process resumed the run first.
        """
        ...

    async def wait(self, run: Run, *, timeout: float | None = None,  # noqa: ASYNC109
                   ) -> WorkflowResult:
        """The run's result once it is settled (final or suspended).

        Raises:
            TimeoutError: Not settled within ``timeout`` seconds.
        """
        ...

    async def cancel(self, run: Run) -> bool:
        """Ask the process running ``run`` to cancel it; ``False`` if this process should
        (the run is not executing anywhere else)."""
        ...


@final
class LocalExecutor:
    """Runs submitted runs in this process.

    Inside ``async with LocalExecutor() as executor`` a submitted run runs in the
    executor's task group and ``submit`` returns at once; outside one, ``submit`` runs
    the run to its end before returning its id (nothing outlives the call).

    Example:
        ```python
        async with LocalExecutor() as executor:
            run = wf.create_run()
            run_id = await run.submit({"value": 2}, executor=executor)
            result = await run.result(timeout=10)
        ```
    """

    def __init__(self) -> None:
        self._group: TaskGroup | None = None
        self._done: dict[str, anyio.Event] = {}

    async def __aenter__(self) -> Self:
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        group, self._group = self._group, None
        if group is not None:
            await group.__aexit__(exc_type, exc, tb)

    async def submit(self, run: Run, input_data: Any, *,
                     request_context: Mapping[str, Any] | None = None,
                     initial_state: Mapping[str, Any] | None = None) -> str:
        """Start the run here (in the background inside ``async with``).

        Raises:
            RunStateError: A run is already stored under the id the caller gave it
                (checked before the run goes to the background).
        """
        if self._group is None:
            await run.start(input_data, request_context=request_context,
                            initial_state=initial_state)
            return run.run_id
        await run._check_new_id("start")
        done = self._done[run.run_id] = anyio.Event()

        async def execute() -> None:
            try:
                await run.start(input_data, request_context=request_context,
                                initial_state=initial_state)
            finally:
                done.set()

        self._group.start_soon(execute)
        return run.run_id

    async def resume(self, run: Run, step: str, resume_data: Any) -> str:
        """Resume the run here (in the background inside ``async with``)."""
        if self._group is None:
            await run.resume(step, resume_data)
            return run.run_id
        done = self._done[run.run_id] = anyio.Event()

        async def execute() -> None:
            try:
                await run.resume(step, resume_data)
            finally:
                done.set()

        self._group.start_soon(execute)
        return run.run_id

    async def wait(self, run: Run, *, timeout: float | None = None,  # noqa: ASYNC109
                   ) -> WorkflowResult:
        """The run's result once its execution here ended (or its stored result).

        Raises:
            TimeoutError: Not settled within ``timeout`` seconds.
            RunStateError: The run is not executing here and has no result.
        """
        done = self._done.get(run.run_id)
        if done is not None:
            with anyio.fail_after(timeout):
                await done.wait()
            self._done.pop(run.run_id, None)
        result = run.last_result
        if result is None or result.status not in SETTLED:
            raise RunStateError(
                f"run '{run.run_id}' has no result in this process (status {run.status!r}); "
                "wait on the executor it was submitted to", workflow_id=run.workflow.id,
                run_id=run.run_id)
        return result

    async def cancel(self, run: Run) -> bool:
        """Nothing to forward: the run object cancels itself in this process."""
        return False


_default: Executor | None = None


def set_default_executor(executor: Executor | None) -> None:
    """Use ``executor`` for ``run.submit()`` calls that name none (``None``: a
    ``LocalExecutor``)."""
    global _default
    _default = executor


def default_executor() -> Executor:
    """The process default executor (a ``LocalExecutor`` unless set)."""
    return _default if _default is not None else LocalExecutor()
