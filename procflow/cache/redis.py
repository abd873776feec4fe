"""``RedisCache``: a ``ServerCache`` on a Redis server, shared by processes and machines.

Every key is ``{prefix}{key}``; values are JSON text with a native Redis expiry
(``PX``). ``clear()`` walks the prefix with ``SCAN`` and deletes only those keys,
never ``KEYS`` or ``FLUSHDB``. This module imports ``redis``; ``procflow.cache`` only
imports it when ``RedisCache`` is first used.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any, Final, final

import redis.asyncio as aioredis

from procflow._backends.redis import RedisConnection
from procflow.cache.base import ServerCache, check_ttl, dump_value

__all__ = ["DEFAULT_REDIS_CACHE_PREFIX", "DEFAULT_REDIS_CACHE_URL", "RedisCache"]

logger = logging.getLogger("procflow.cache")

DEFAULT_REDIS_CACHE_URL: Final = "redis://127.0.0.1:6379/0"
DEFAULT_REDIS_CACHE_PREFIX: Final = "procflow:cache:"
_TIMEOUT: Final = 2.0  # a cache must fail fast: the caller falls back to the model
_SCAN_BATCH: Final = 500
_GLOB_SPECIALS: Final = frozenset("*?[]\\")


@final
class RedisCache(ServerCache):
    """A ``ServerCache`` on Redis (``redis.asyncio``; asyncio event loops only).

    Args:
        url: The server, e.g. ``"redis://:password@host:6379/0"``.
        prefix: Prepended to every key; ``clear()`` deletes exactly the keys that start
            with it. Give caches sharing a server prefixes that do not start with one
            another (``"app:a:"`` and ``"app:ab:"`` are fine, ``"app:"`` and
            ``"app:a:"`` are not).
        client: A ``redis.asyncio.Redis`` to use instead of connecting to ``url``; it is
            not closed by ``aclose()``.
        default_ttl: Seconds an entry lives when ``set`` gets no TTL; ``None``: forever.
        timeout: Seconds to wait for a connection and for each reply (a client made from
            ``url``); past it the cache misses (a read) or gives up (a write) and the
            caller goes on without it.

    Raises:
        ValueError: ``prefix`` is empty or ``default_ttl`` is invalid.
        StorageError: ``url`` is not a valid Redis URL.

    Example::

        async with RedisCache("redis://127.0.0.1:6379/0", prefix="myapp:cache:") as cache:
            await cache.set("k", {"v": 1}, ttl_seconds=60)
    """

    def __init__(self, url: str = DEFAULT_REDIS_CACHE_URL, *,
                 prefix: str = DEFAULT_REDIS_CACHE_PREFIX,
                 client: aioredis.Redis | None = None,
                 default_ttl: float | None = None, timeout: float = _TIMEOUT) -> None:
        if not isinstance(prefix, str) or not prefix:
            raise ValueError(f"RedisCache: prefix must be a non-empty str (clear() deletes "
                             f"every key starting with it), got {prefix!r}")
        self._prefix = prefix
        self._default_ttl = check_ttl(default_ttl, "RedisCache: default_ttl")
        self._redis = RedisConnection(url, client=client, name="Redis cache",
                                      connect_timeout=timeout, timeout=timeout, retries=1)
        self._client = self._redis.client

    @property
    def prefix(self) -> str:
        """The key namespace."""
        return self._prefix

    def __repr__(self) -> str:
        return f"RedisCache({self._redis.display!r}, prefix={self._prefix!r})"

    async def get(self, key: str) -> Any | None:
        """The value under ``key``, or ``None`` when missing, expired or not valid JSON
        (the last is logged as a warning naming the key, and the entry is left alone).

        Raises:
            StorageError: The server could not be reached.
        """
        with self._redis.translate(f"reading key {key!r}"):
            raw = await self._client.get(self._prefix + key)
        if raw is None:
            return None
        try:
            text = raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
            return json.loads(text)
        except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError included
            logger.warning("Redis cache at %s: the value of key %r is not valid JSON (%s); "
                           "treated as a miss", self._redis.display, self._prefix + key, exc)
            return None

    async def set(self, key: str, value: Any, ttl_seconds: float | None = None) -> None:
        """Store ``value`` under ``key`` with an expiry of ``ttl_seconds``
        (default: ``default_ttl``; rounded up to whole milliseconds).

        Raises:
            TypeError: ``value`` is not JSON-serialisable.
            ValueError: ``ttl_seconds`` is not a positive number.
            StorageError: The server could not be reached.
        """
        ttl = check_ttl(ttl_seconds, "ttl_seconds")
        if ttl is None:
            ttl = self._default_ttl
        text = dump_value(key, value)
        px = None if ttl is None else max(1, math.ceil(ttl * 1000))
        with self._redis.translate(f"writing key {key!r}"):
            await self._client.set(self._prefix + key, text, px=px)

    async def delete(self, key: str) -> None:
        """Remove ``key`` (a missing key is not an error).

        Raises:
            StorageError: The server could not be reached.
        """
        with self._redis.translate(f"deleting key {key!r}"):
            await self._client.delete(self._prefix + key)

    async def clear(self) -> None:
        """Delete every key that starts with this cache's prefix (``SCAN`` + ``UNLINK``).

        Raises:
            StorageError: The server could not be reached.
        """
        pattern = _glob_escape(self._prefix) + "*"
        with self._redis.translate(f"clearing prefix {self._prefix!r}"):
            batch: list[Any] = []
            async for found in self._client.scan_iter(match=pattern, count=_SCAN_BATCH):
                batch.append(found)
                if len(batch) >= _SCAN_BATCH:
                    await self._client.unlink(*batch)
                    batch = []
            if batch:
                await self._client.unlink(*batch)

    async def aclose(self) -> None:
        """Close the connection pool (unless the client was given by the caller)."""
        await self._redis.aclose()


def _glob_escape(text: str) -> str:
    return "".join(f"\\{c}" if c in _GLOB_SPECIALS else c for c in text)
