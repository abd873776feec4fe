"""Run leases: who executes a run, renewed by a heartbeat while it runs.

A run being executed holds a lease in its storage (``Storage.acquire_lease``): an owner
id and an expiry. ``start()``, ``restart()`` and ``resume()`` take it atomically, so of
two processes continuing one run exactly one runs its pending step; a heartbeat renews
it every third of its ttl. A "running" run whose lease expired is *stalled* and anyone
may restart it. An owner id names its host and process, so a lease held by a process of
this host that no longer exists (killed) is taken over at once instead of after expiry.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Final, final

import anyio

from procflow._backends.deadline import shielded
from procflow.errors import RunStateError
from procflow.messages import new_id

if TYPE_CHECKING:
    import asyncio  # noqa: TID251 - (imported where used: it costs ~20 ms at import)

    from procflow.records import Lease
    from procflow.storage.base import Storage

__all__ = [
    "DEFAULT_LEASE_TTL",
    "Heartbeat",
    "RunLease",
    "Start",
    "lease_owner_id",
    "owner_is_dead",
    "parked_owner",
]

DEFAULT_LEASE_TTL: Final = 30.0
"""Seconds a run's lease lasts unless renewed; the heartbeat renews it every third."""

_log = logging.getLogger("procflow")

Start = Callable[[str, float], Awaitable["Lease | None"]]
"""Takes a run's lease for an owner and a ttl and stores the run's start with it
(``RunLease.take``)."""

_LOCAL_TTL: Final = 10 * 365 * 86400.0
"""The lease duration in a process-local storage: it never expires while the holder runs."""


_owner_prefix: tuple[int, str] = (-1, "")


def lease_owner_id() -> str:
    """A new lease owner id: ``host:pid:random`` (the host name is read once per process)."""
    global _owner_prefix
    pid = os.getpid()
    if _owner_prefix[0] != pid:
        _owner_prefix = (pid, f"{socket.gethostname()}:{pid}:")
    return _owner_prefix[1] + new_id()[:12]


_PARKED: Final = "parked:"


def parked_owner(join: str) -> str:
    """The lease owner of a run parked at distributed fan-out ``join``: its jobs renew
    the lease while they run (the run is "running", not stalled), and the execution that
    continues the run takes it over (``RunLease.take(parked=True)``)."""
    return _PARKED + join


def owner_is_dead(owner: str) -> bool:
    """Whether ``owner`` (a ``lease_owner_id``) names a process of this host that no longer
    runs (gone or a zombie). Unknown hosts and unreadable ids count as alive."""
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid() or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # e.g. PermissionError: it exists
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return False


@final
class RunLease:
    """The lease of one run as one run object holds it.

    Args:
        storage: Where the lease is kept (the run's storage).
        workflow_id: The run's workflow.
        run_id: The run.
        owner: This holder's id.
        ttl: Seconds the lease lasts unless renewed.
    """

    __slots__ = ("held", "lost", "owner", "renews", "run_id", "storage", "ttl", "workflow_id")

    def __init__(self, storage: Storage, workflow_id: str, run_id: str, *, owner: str,
                 ttl: float) -> None:
        self.storage = storage
        self.workflow_id = workflow_id
        self.run_id = run_id
        self.owner = owner
        self.renews = not storage.process_local
        """Whether the lease expires and needs a heartbeat: not in a storage that lives
        only in this process (``InMemoryStorage``), where no other process can take over
        and the holder's ``drop()`` in a ``finally`` always runs."""
        self.ttl = ttl if self.renews else _LOCAL_TTL
        self.held: Lease | None = None
        self.lost = False

    async def take(self, *, parked: bool = False, start: Start | None = None) -> bool:
        """Hold the lease (no-op if held), taking over one of a dead local process.

        Args:
            parked: Also take over the lease of a parked fan-out (``parked_owner``).
            start: Called with the owner and ttl instead of the first
                ``acquire_lease``: takes the lease and stores the run's start in one
                write (``Storage.acquire_and_save``); ``None`` if another holds it.

        Returns:
            Whether ``start`` took the lease (and so stored the run's start).

        Raises:
            RunStateError: Another live owner holds it.
        """
        if self.held is not None:
            return False
        store, wf, run = self.storage, self.workflow_id, self.run_id
        if start is not None:
            try:
                lease = await start(self.owner, self.ttl)
            except Exception:
                # A backend may have taken the lease before its save failed: let it go
                # (the owner id is this object's alone; a lease not taken is no error).
                await self._release_quietly()
                raise
            if lease is not None:
                self.held = lease
                self.lost = False
                return True
        else:
            lease = await store.acquire_lease(wf, run, owner=self.owner, ttl=self.ttl)
        if lease is None:
            holder = await store.get_lease(wf, run)
            if holder is not None and (owner_is_dead(holder.owner) or (
                    parked and holder.owner.startswith(_PARKED))):
                lease = await store.acquire_lease(wf, run, owner=self.owner, ttl=self.ttl,
                                                  steal_from=holder.owner)
            if lease is None:
                who = "another process"
                if holder is not None:
                    until = time.strftime("%H:%M:%S", time.localtime(holder.expires_at))
                    who = f"'{holder.owner}' until {until}"
                raise RunStateError(
                    f"run '{run}' of workflow '{wf}' is being executed by {who} (it holds the "
                    "run's lease); only a stalled run, whose lease expired, can be restarted",
                    workflow_id=wf, run_id=run)
        self.held = lease
        self.lost = False
        return False

    async def hand_over(self, owner: str) -> None:
        """Give the held lease to ``owner`` (a parked fan-out's) instead of releasing it
        (a failure is logged: the lease expires anyway)."""
        if self.held is None:
            return
        self.held = None
        try:
            await self.storage.acquire_lease(self.workflow_id, self.run_id, owner=owner,
                                             ttl=self.ttl, steal_from=self.owner)
        except Exception:
            _log.warning("could not hand over the lease of run %s", self.run_id,
                         exc_info=True)

    async def drop(self) -> None:
        """Release the lease if held (a failure is logged: the lease expires anyway)."""
        if self.held is None:
            return
        self.held = None
        await self._release_quietly()

    async def _release_quietly(self) -> None:
        try:
            await self.storage.release_lease(self.workflow_id, self.run_id, owner=self.owner)
        except Exception:
            _log.warning("could not release the lease of run %s", self.run_id, exc_info=True)

    async def keep(self, on_lost: Callable[[], None], *, wait_first: bool = True) -> None:
        """Renew the lease every third of its ttl until cancelled; if another owner took
        it (this process stalled past the ttl), set ``lost`` and call ``on_lost``.
        ``wait_first=False``: renew at once (a heartbeat a timer started late)."""
        wait = wait_first
        while True:
            if wait:
                await anyio.sleep(self.ttl / 3)
            wait = True
            try:
                lease = await self.storage.acquire_lease(
                    self.workflow_id, self.run_id, owner=self.owner, ttl=self.ttl)
            except Exception:  # a storage hiccup: try again while the lease still runs
                _log.warning("could not renew the lease of run %s", self.run_id,
                             exc_info=True)
                continue
            if lease is None:
                self.lost = True
                self.held = None
                on_lost()
                return
            self.held = lease

    def heartbeat(self, on_lost: Callable[[], None]) -> Heartbeat | None:
        """On asyncio: a heartbeat that makes no task until a third of the ttl has passed
        (most runs end sooner), so a short run costs one timer; ``None`` on other event
        loops (run ``keep`` in a task group there). Stop it with ``await hb.stop()``."""
        aio = sys.modules.get("asyncio")  # not imported: not on asyncio
        try:
            loop = aio.get_running_loop() if aio is not None else None
        except RuntimeError:
            loop = None
        if loop is None:
            return None
        return Heartbeat(loop, self.ttl / 3, lambda: self.keep(on_lost, wait_first=False))

    def lost_error(self) -> RunStateError:
        """The error of a run that lost its lease."""
        return RunStateError(
            f"run '{self.run_id}' of workflow '{self.workflow_id}' lost its lease to another "
            "process (this one did not renew it in time); it stopped without writing, and "
            "the new holder continues the run", workflow_id=self.workflow_id,
            run_id=self.run_id)


@final
class Heartbeat:
    """A renewal loop started by a timer of the asyncio loop (see ``RunLease.heartbeat``).

    The one use of asyncio itself in the library: anyio has no timer, and a task beside
    every run (the heartbeat in a task group) costs more than a short run's steps. On
    trio the heartbeat is such a task.

    Args:
        loop: The running asyncio loop.
        delay: Seconds before ``keep`` starts (as a task).
        keep: Makes the renewal loop (it runs until cancelled).
    """

    __slots__ = ("_handle", "_task")

    def __init__(self, loop: asyncio.AbstractEventLoop, delay: float,
                 keep: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self._task: asyncio.Task[None] | None = None
        self._handle: asyncio.TimerHandle | None = loop.call_later(
            delay, self._start, loop, keep)

    def _start(self, loop: asyncio.AbstractEventLoop,
               keep: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self._handle = None
        self._task = loop.create_task(keep())

    async def stop(self) -> None:
        """Stop renewing (the timer, or the task it started, which is awaited)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        task = self._task
        if task is None:
            return
        self._task = None
        task.cancel()
        import asyncio  # noqa: TID251 - loaded: a task of its loop exists

        with shielded("stopping a lease heartbeat"):
            # A cancellation that lands inside a bounded storage call can be absorbed by
            # that call's own cancel scope, and the loop then sleeps on: cancel again
            # until the task has ended.
            while not task.done():
                await asyncio.wait((task,), timeout=0.1)
                task.cancel()
        if task.done() and not task.cancelled() and task.exception() is not None:
            _log.warning("a lease heartbeat failed", exc_info=task.exception())
