"""``DramatiqExecutor``: submit runs to ``procflow worker`` processes sharing Redis."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, final

import anyio
from pydantic_core import to_jsonable_python

from procflow._backends import AsyncResource
from procflow._backends.deadline import shielded
from procflow._backends.redis import RedisConnection
from procflow.errors import RunStateError
from procflow.runtime.executors import SETTLED
from procflow.storage.redis import RedisStorage
from procflow.workers.broker import (
    cancel_key,
    enqueue,
    make_broker,
    run_message,
    settled_channel,
)
from procflow.workers.channels import Subscriptions
from procflow.workers.settings import WorkerSettings

if TYPE_CHECKING:
    from procflow.runtime.results import WorkflowResult
    from procflow.runtime.run import Run

__all__ = ["DramatiqExecutor"]

_RECHECK: Final = 1.0
"""Seconds between checks of the stored run while waiting (a safety net under the
settled notification, which is what normally ends the wait)."""
_CANCEL_TTL: Final = 7 * 24 * 3600


@final
class DramatiqExecutor(AsyncResource):
    """An ``Executor`` whose runs execute on Dramatiq workers (``procflow worker``).

    Runs are stored in ``executor.storage`` (a ``RedisStorage``), where workers, and
    ``wf.get_run(run_id, storage=executor.storage)`` in any process, find them.

    Args:
        redis_url: The Redis server the workers use.
        settings: Everything else (prefix, queue...; ``redis_url`` wins over theirs).

    Example:
        ```python
        executor = DramatiqExecutor("redis://127.0.0.1:6379/0")
        run = wf.create_run(storage=executor.storage)
        run_id = await run.submit({"value": 2}, executor=executor)
        result = await run.result(timeout=30)
        ```
    """

    def __init__(self, redis_url: str | None = None, *,
                 settings: WorkerSettings | None = None) -> None:
        base = settings or WorkerSettings()
        if redis_url is not None:
            from dataclasses import replace

            base = replace(base, redis_url=redis_url)
        self.settings = base
        self.broker = make_broker(base)
        self.storage = RedisStorage(base.redis_url, prefix=base.prefix)
        self._redis = RedisConnection(base.redis_url, name="procflow executor")
        self._subscriptions = Subscriptions(self._redis)

    def __repr__(self) -> str:
        return f"DramatiqExecutor({self._redis.display!r}, queue={self.settings.queue!r})"


    async def aclose(self) -> None:
        """Close the Redis connections (the storage's too)."""
        await self.storage.aclose()
        await self._subscriptions.aclose()
        await self._redis.aclose()
        await anyio.to_thread.run_sync(self.broker.close)

    async def submit(self, run: Run, input_data: Any, *,
                     request_context: Mapping[str, Any] | None = None,
                     initial_state: Mapping[str, Any] | None = None) -> str:
        """Store the run as "pending" in ``self.storage`` and send it to the workers.

        Raises:
            StepValidationError: The input does not match the workflow's input schema.
        """
        run.storage = self.storage
        run.durability = "sync"
        await run.prepare(input_data, request_context=request_context,
                          initial_state=initial_state)
        await enqueue(self.broker, [run_message(self.settings, run.workflow.id, run.run_id)])
        return run.run_id

    async def resume(self, run: Run, step: str, resume_data: Any) -> str:
        """Claim the suspended run ("running") and send its resume to the workers.

        Raises:
            RunStateError: The stored run is no longer suspended (resumed elsewhere).
        """
        run.storage = self.storage
        run.durability = "sync"
        wf_id = run.workflow.id
        if not await self.storage.claim_run(wf_id, run.run_id, expected="suspended",
                                            new="running"):
            raise RunStateError(
                f"run '{run.run_id}' is no longer suspended in storage; another process "
                "may have resumed it", workflow_id=wf_id, run_id=run.run_id)
        try:
            data = to_jsonable_python(resume_data, fallback=repr)
            await enqueue(self.broker, [run_message(self.settings, wf_id, run.run_id,
                                                    (step, data))])
        except BaseException:  # not sent: the run stays suspended
            with shielded(f"putting run {run.run_id!r} back to suspended"):
                await self.storage.claim_run(wf_id, run.run_id, expected="running",
                                             new="suspended")
            raise
        run.status = "running"
        return run.run_id

    async def wait(self, run: Run, *, timeout: float | None = None,  # noqa: ASYNC109
                   ) -> WorkflowResult:
        """Wait for the run's settled notification (checking the stored run first and
        about once a second as a safety net), then return its stored result.

        Raises:
            TimeoutError: The run did not settle within ``timeout`` seconds.
        """
        if run.storage is not self.storage:
            run.storage = self.storage
        channel = settled_channel(self.settings.prefix, run.run_id)
        async with self._subscriptions.subscribe(channel) as next_message:
            with anyio.fail_after(timeout):
                while True:
                    await run.refresh()
                    if run.status in SETTLED and run.last_result is not None:
                        return run.last_result
                    with self._redis.translate("waiting for a run's outcome"):
                        await next_message(_RECHECK)

    async def cancel(self, run: Run) -> bool:
        """Ask the worker running the run to cancel it (a flag and a message).

        Returns:
            ``False`` when the stored run is suspended or settled-but-cancelable here
            (no worker holds it), so the caller marks it canceled itself.
        """
        key = cancel_key(self.settings.prefix, run.run_id)
        with self._redis.translate("requesting a run's cancellation"):
            await self._redis.client.set(key, "1", ex=_CANCEL_TTL)
            await self._redis.client.publish(key, "cancel")
        await run.refresh()
        return run.status not in ("suspended",)
