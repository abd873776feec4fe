"""``RedisCostLedger``: a ``CostLedger`` shared by processes through a Redis server.

Key layout (the ledger key is escaped so that ``:`` in it cannot collide)::

    {prefix}:{key}    zset    member "<at>:<nonce>:<cost>", scored by <at> (seconds)

``add`` is one MULTI/EXEC: add the entry, drop entries older than ``ttl``, and set the
key to expire ``ttl`` seconds after its last write. ``total`` sums the members scored
at or after ``since``. This module imports ``redis``.
"""

from __future__ import annotations

import math
from typing import Final, final
from uuid import uuid4

import redis.asyncio as aioredis

from procflow._backends import AsyncResource
from procflow._backends.redis import CONNECT_TIMEOUT, RedisConnection, escape_key

__all__ = ["RedisCostLedger"]

DEFAULT_PREFIX: Final = "procflow:cost"


def _member_cost(member: object) -> float:
    if isinstance(member, bytes):
        text = member.decode("utf-8", "replace")
    elif isinstance(member, str):
        text = member
    else:
        return 0.0
    try:
        cost = float(text.rpartition(":")[2])
    except ValueError:
        return 0.0  # not one of ours: ignore rather than fail the guard
    return cost if math.isfinite(cost) and cost > 0 else 0.0


@final
class RedisCostLedger(AsyncResource):
    """A ``CostLedger`` over ``redis.asyncio``: one sorted set per key, with expiry.

    Args:
        url: The server, e.g. ``"redis://127.0.0.1:6379/0"`` (ignored if ``client``).
        prefix: Namespace of the keys (``{prefix}:{key}``).
        client: A ``redis.asyncio.Redis`` to use (not closed by ``aclose``).
        connect_timeout: Seconds to wait for a connection.
        timeout: Seconds to wait for a reply.

    Raises:
        StorageError: The URL is invalid.

    Example::

        ledger = RedisCostLedger("redis://127.0.0.1:6379", prefix="myapp:cost")
        guard = CostGuardProcessor(5.0, prices=prices, ledger=ledger)
    """

    def __init__(self, url: str = "redis://127.0.0.1:6379", *, prefix: str = DEFAULT_PREFIX,
                 client: aioredis.Redis | None = None,
                 connect_timeout: float = CONNECT_TIMEOUT,
                 timeout: float = CONNECT_TIMEOUT) -> None:
        if not isinstance(prefix, str) or not prefix:
            raise ValueError(f"RedisCostLedger: prefix must be a non-empty str, got {prefix!r}")
        self._prefix = prefix
        self._redis = RedisConnection(url, client=client, name="Redis cost ledger",
                                      connect_timeout=connect_timeout, timeout=timeout)
        self._client = self._redis.client

    @property
    def prefix(self) -> str:
        """The key namespace."""
        return self._prefix

    def __repr__(self) -> str:
        return f"RedisCostLedger({self._redis.display!r}, prefix={self._prefix!r})"

    def key(self, key: str) -> str:
        """The Redis key holding ledger key ``key``."""
        return f"{self._prefix}:{escape_key(key)}"

    async def add(self, key: str, cost: float, *, at: float, ttl: float) -> None:
        """Record ``cost`` for ``key`` at ``at`` and trim entries older than ``ttl``.

        Raises:
            ValueError: ``cost`` is negative or not finite, or ``ttl`` is not > 0.
            StorageError: Redis failed or is unreachable.
        """
        if not math.isfinite(cost) or cost < 0:
            raise ValueError(f"RedisCostLedger: cost must be a finite number >= 0, got {cost!r}")
        if not ttl > 0:
            raise ValueError(f"RedisCostLedger: ttl must be > 0, got {ttl!r}")
        name = self.key(key)
        member = f"{at!r}:{uuid4().hex}:{cost!r}"
        with self._redis.translate(f"recording a cost for {key!r}"):
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.zadd(name, {member: at})
                pipe.zremrangebyscore(name, "-inf", f"({at - ttl!r}")
                pipe.expire(name, max(1, math.ceil(ttl)))
                await pipe.execute()

    async def total(self, key: str, *, since: float) -> float:
        """The sum of ``key``'s costs recorded at or after ``since``.

        Raises:
            StorageError: Redis failed or is unreachable.
        """
        with self._redis.translate(f"reading the costs of {key!r}"):
            members = await self._client.zrangebyscore(self.key(key), repr(float(since)), "+inf")
        return math.fsum(_member_cost(m) for m in members)

    async def aclose(self) -> None:
        """Close the connection pool (unless the client was given by the caller)."""
        await self._redis.aclose()
