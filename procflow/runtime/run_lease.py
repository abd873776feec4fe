"""``LeaseKeeper``: the lease a run holds while it executes, across its executions —
taken before, renewed beside the run's body, released (or handed to a parked fan-out)
after."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import anyio

from procflow._backends.deadline import shielded
from procflow.runtime.leases import RunLease, Start, lease_owner_id, parked_owner

if TYPE_CHECKING:
    from procflow.storage.base import Storage

__all__ = ["LeaseKeeper"]

T = TypeVar("T")


class LeaseKeeper:
    """A run's lease (one per ``Run``; see ``Run.restart`` for what the lease guards)."""

    __slots__ = ("_owner", "lease", "run_id", "workflow_id")

    def __init__(self, workflow_id: str, run_id: str) -> None:
        self.workflow_id = workflow_id
        self.run_id = run_id
        self._owner: str | None = None
        self.lease: RunLease | None = None
        """The lease last taken (``None``: never taken)."""

    @property
    def owner(self) -> str:
        """The id this run object takes its leases under (made when first needed)."""
        owner = self._owner
        if owner is None:
            owner = self._owner = lease_owner_id()
        return owner

    @property
    def lost(self) -> bool:
        """Whether the lease was lost while the run executed."""
        return self.lease is not None and self.lease.lost

    def check_kept(self) -> None:
        """Raise ``RunStateError`` if the lease was lost while the run executed."""
        if self.lease is not None and self.lease.lost:
            raise self.lease.lost_error()

    async def take(self, storage: Storage, *, ttl: float, parked: bool = False,
                   start: Start | None = None) -> bool:
        """Hold the run's lease; no-op if held or if nothing is stored. ``parked``: take
        over a parked fan-out's lease; ``start``: take it with the run's start (see
        ``RunLease.take``).

        Returns:
            Whether ``start`` took the lease (and stored the run's start).

        Raises:
            RunStateError: Another live process holds it.
        """
        if not storage.persistent:
            return False
        if self.lease is None or self.lease.held is None:
            self.lease = RunLease(storage, self.workflow_id, self.run_id,
                                  owner=self.owner, ttl=ttl)
        return await self.lease.take(parked=parked, start=start)

    def releasable(self) -> str | None:
        """The owner whose lease the run's last write may release with it
        (``Storage.save_and_release``): the lease is held and expires; else ``None``
        (``release`` deals with it)."""
        lease = self.lease
        if lease is None or lease.held is None or not lease.renews:
            return None
        return lease.owner

    def released(self) -> None:
        """The run's last write released the lease (``releasable``)."""
        if self.lease is not None:
            self.lease.held = None

    async def drop(self) -> None:
        """Release the lease if held."""
        if self.lease is not None:
            await self.lease.drop()

    async def beside(self, body: Callable[[], Awaitable[T]], on_lost: Callable[[], None],
                     ) -> T:
        """``await body()`` with a heartbeat renewing the lease beside it; ``on_lost`` is
        called if the lease is lost meanwhile."""
        lease = self.lease
        if lease is None or lease.held is None or not lease.renews:
            return await body()
        beat = lease.heartbeat(on_lost)
        if beat is not None:  # asyncio: a timer, and a task only for a long run
            try:
                return await body()
            finally:
                await beat.stop()
        async with anyio.create_task_group() as tg:
            tg.start_soon(lease.keep, on_lost)
            outcome = await body()
            tg.cancel_scope.cancel()
        return outcome

    async def release(self, parked: str | None) -> None:
        """After an execution: release the lease if held, or hand it to the fan-out the
        run ``parked`` at (its jobs renew it while they run)."""
        lease = self.lease
        if lease is not None and lease.held is not None:
            if not lease.renews:  # a process-local storage's release never waits
                await lease.drop()
            else:
                with shielded(f"releasing the lease of run {self.run_id!r}"):
                    if parked is not None:
                        await lease.hand_over(parked_owner(parked))
                    else:
                        await lease.drop()
