"""``RunStream``: a run's events as an async iterator."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import Any

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from procflow.runtime.events import WorkflowEvent
from procflow.runtime.results import WorkflowResult

__all__ = ["RunStream", "close_task_group"]

Starter = Callable[[MemoryObjectSendStream[WorkflowEvent]], Awaitable[WorkflowResult]]


class RunStream:
    """The events of a run as it executes.

    Prefer the context-manager form, which is safe to leave early (the run then
    finishes without anyone listening)::

        async with run.stream(input_data=...) as events:
            async for event in events:
                ...
        print(events.result.status)

    Iterating it directly (``async for event in run.stream(...)``) works when the loop
    runs to the end.

    Attributes:
        result: The run's ``WorkflowResult`` once it has finished, else ``None``.
    """

    def __init__(self, starter: Starter, *, buffer: int = 256) -> None:
        self._starter = starter
        self._buffer = buffer
        self._tg: TaskGroup | None = None
        self._recv: MemoryObjectReceiveStream[WorkflowEvent] | None = None
        self.result: WorkflowResult | None = None
        self._error: BaseException | None = None

    async def __aenter__(self) -> RunStream:
        if self._tg is not None:
            raise RuntimeError("this RunStream is already open")
        send, self._recv = anyio.create_memory_object_stream[WorkflowEvent](self._buffer)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._drive, send)
        return self

    async def _drive(self, send: MemoryObjectSendStream[WorkflowEvent]) -> None:
        async with send:
            try:
                self.result = await self._starter(send)
            except Exception as exc:  # re-raised to the consumer on exit
                self._error = exc

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> bool | None:
        assert self._tg is not None and self._recv is not None
        self._recv.close()  # an early exit stops delivery; the run itself carries on
        await close_task_group(self._tg, exc_type, exc, tb)
        if self._error is not None and exc is None:
            raise self._error
        return None

    def __aiter__(self) -> AsyncIterator[WorkflowEvent]:
        if self._recv is not None:
            return self._recv
        return self._owned()

    async def _owned(self) -> AsyncIterator[WorkflowEvent]:
        async with self:
            assert self._recv is not None
            async for event in self._recv:
                yield event

    async def collect(self) -> list[Any]:
        """Run to the end and return every event."""
        return [event async for event in self]


async def close_task_group(tg: TaskGroup, exc_type: type[BaseException] | None,
                           exc: BaseException | None, tb: TracebackType | None) -> None:
    """Exit ``tg`` (entered by hand in an ``__aenter__``), raising a lone error of its
    tasks as itself rather than inside an exception group."""
    try:
        await tg.__aexit__(exc_type, exc, tb)
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
