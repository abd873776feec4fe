"""Cleanup that must not be cancelled, and must not hang either: one helper for every
shielded block (saving a run's last status or trace, releasing a lease, closing a pool).

``anyio.CancelScope(shield=True)`` alone keeps a cleanup from being cut short by the
caller's cancellation (its ``fail_after``, a task group's cancel) - and so also lets it
wait forever on a frozen server, inside the caller's own timeout. ``shielded()`` gives
the shielded block a deadline of its own: past it the block is cancelled, a
``StorageError`` saying what was given up is logged, and the code after the block runs.
A caller's deadline is thus honoured within ``CLEANUP_TIMEOUT`` seconds.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

import anyio

from procflow.errors import StorageError

__all__ = ["CLEANUP_TIMEOUT", "shielded"]

CLEANUP_TIMEOUT: Final = 5.0
"""Seconds a shielded cleanup may take before it is given up."""

_log = logging.getLogger("procflow")


@contextmanager
def shielded(what: str, *, timeout: float = CLEANUP_TIMEOUT) -> Iterator[anyio.CancelScope]:
    """A block shielded from outer cancellation, cancelled after ``timeout`` seconds.

    Use it where ``with anyio.CancelScope(shield=True):`` was::

        with shielded("releasing the lease of run r1"):
            await lease.drop()

    Args:
        what: The cleanup, for the log (``"saving the status of run 'r1'"``).
        timeout: Seconds the block may take.

    Yields:
        The block's cancel scope (``cancelled_caught`` tells whether it was given up).
    """
    with anyio.CancelScope(shield=True, deadline=anyio.current_time() + timeout) as scope:
        yield scope
    if scope.cancelled_caught:
        error = StorageError(f"{what} took more than {timeout:g} s and was given up")
        _log.warning("%s", error, exc_info=error)
