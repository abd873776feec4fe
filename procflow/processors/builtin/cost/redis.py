"""``RedisCostLedger``: a ``CostLedger`` shared by processes through a Redis server.

Key layout (the ledger key is escaped so that ``:`` in it cannot collide)::

    {prefix}:{key}    zset    member "<at>:<nonce>:<cost>", scored by <at> (seconds)

``add`` is one MULTI/EXEC: add the entry, drop entries older than ``ttl``, and set the
key to expire ``ttl`` seconds after its last write. ``total`` sums the members scored
at or after ``since``. This module imports ``redis``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Final, Self, final
from urllib.parse import urlsplit, urlunsplit
from uuid import uuid4

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from procflow.errors import StorageError

__all__ = ["RedisCostLedger"]

DEFAULT_PREFIX: Final = "procflow:cost"
_CONNECT_TIMEOUT: Final = 5.0


def _escape(identifier: str) -> str:
    return identifier.replace("%", "%25").replace(":", "%3A")


def _display(url: str) -> str:
    """``url`` without credentials or query, for messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid Redis URL>"
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


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
class RedisCostLedger:
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
                 connect_timeout: float = _CONNECT_TIMEOUT,
                 timeout: float = _CONNECT_TIMEOUT) -> None:
        if not isinstance(prefix, str) or not prefix:
            raise ValueError(f"RedisCostLedger: prefix must be a non-empty str, got {prefix!r}")
        self._prefix = prefix
        if client is None:
            self._where = _display(url)
            try:
                client = aioredis.Redis.from_url(url, socket_connect_timeout=connect_timeout,
                                                 socket_timeout=timeout)
            except ValueError:
                raise StorageError(f"RedisCostLedger: invalid Redis URL {self._where!r}; "
                                   "expected e.g. 'redis://127.0.0.1:6379/0'") from None
            self._owns_client = True
        else:
            self._where = "a given client"
            self._owns_client = False
        self._client = client

    @property
    def prefix(self) -> str:
        """The key namespace."""
        return self._prefix

    def __repr__(self) -> str:
        return f"RedisCostLedger({self._where!r}, prefix={self._prefix!r})"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    def key(self, key: str) -> str:
        """The Redis key holding ledger key ``key``."""
        return f"{self._prefix}:{_escape(key)}"

    @contextmanager
    def _translate(self, operation: str) -> Iterator[None]:
        try:
            yield
        except (RedisError, OSError) as exc:
            raise StorageError(f"Redis cost ledger at {self._where}: {operation} failed: "
                               f"{exc or type(exc).__name__}") from exc

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
        with self._translate(f"recording a cost for {key!r}"):
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
        with self._translate(f"reading the costs of {key!r}"):
            members = await self._client.zrangebyscore(self.key(key), repr(float(since)), "+inf")
        return math.fsum(_member_cost(m) for m in members)

    async def aclose(self) -> None:
        """Close the connection pool (unless the client was given by the caller)."""
        if self._owns_client:
            with self._translate("closing"):
                await self._client.aclose()
