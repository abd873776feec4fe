"""Backend plumbing written once: what every SQLite- and Redis-backed store shares.

``procflow._backends.sqlite``: one SQLite file behind a lock (connection set-up,
pragmas, transactions, the "database is locked" retry with backoff).
``procflow._backends.redis``: a ``redis.asyncio`` client with its ownership, fast-fail
timeouts, a display name without credentials and error translation.
``AsyncResource`` (here): ``async with`` for a backend with an ``aclose()``;
``lease_ttl`` (here): the check every backend's ``acquire_lease`` makes of its ttl.

A bottom layer: it imports only ``procflow.errors``. The Redis module imports
``redis``, so it is imported only by the Redis backends, on their first use.
"""

from __future__ import annotations

import math
from types import TracebackType
from typing import Self

__all__ = ["AsyncResource", "lease_ttl"]


def lease_ttl(ttl: float) -> float:
    """``ttl`` as a lease duration in seconds.

    Raises:
        ValueError: ``ttl`` is not a finite number > 0.
    """
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not math.isfinite(ttl) \
            or ttl <= 0:
        raise ValueError(f"a lease ttl must be a finite number of seconds > 0, got {ttl!r}")
    return float(ttl)


class AsyncResource:
    """Base of a backend that holds a connection: ``async with`` ends in ``aclose()``."""

    __slots__ = ()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Release the connection (subclasses say what that means for them)."""
