"""``ServerCache``: the contract of a key-value cache for JSON data, with per-entry TTLs."""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from typing import Any

from procflow._backends import AsyncResource

__all__ = ["ServerCache", "check_ttl", "dump_value"]


class ServerCache(AsyncResource, ABC):
    """A key-value cache of JSON-serialisable values whose entries may expire.

    Backends: ``InMemoryServerCache`` (one process) and ``RedisCache`` (shared). A
    subclass implements ``get``, ``set``, ``delete`` and ``clear``; ``aclose`` is a
    no-op unless it holds resources. Every cache is an async context manager.

    Values go in as JSON data (dicts, lists, str, numbers, bools, ``None``) and come
    back as fresh copies: a tuple comes back as a list, and editing what ``get``
    returned never changes the stored entry.

    Example::

        async with InMemoryServerCache(max_size=100) as cache:
            await cache.set("greeting", {"text": "hi"}, ttl_seconds=60)
            assert await cache.get("greeting") == {"text": "hi"}
    """

    @abstractmethod
    async def get(self, key: str) -> Any | None:
        """The value stored under ``key``; ``None`` when missing, expired or unreadable.

        Raises:
            StorageError: The backend could not be reached.
        """

    @abstractmethod
    async def set(self, key: str, value: Any, ttl_seconds: float | None = None) -> None:
        """Store ``value`` under ``key``, replacing any previous entry.

        Args:
            key: The entry's key.
            value: JSON-serialisable data.
            ttl_seconds: Seconds until the entry expires (> 0); ``None`` uses the
                cache's default TTL.

        Raises:
            TypeError: ``value`` is not JSON-serialisable.
            ValueError: ``ttl_seconds`` is not a positive number.
            StorageError: The backend could not be reached.
        """

    @abstractmethod
    async def delete(self, key: str) -> None:
        """Remove ``key`` (a missing key is not an error).

        Raises:
            StorageError: The backend could not be reached.
        """

    @abstractmethod
    async def clear(self) -> None:
        """Remove every entry of this cache (and nothing else on a shared backend).

        Raises:
            StorageError: The backend could not be reached.
        """

    async def aclose(self) -> None:
        """Release the cache's resources (nothing to release by default)."""
        return None



def check_ttl(ttl: float | None, what: str) -> float | None:
    """``ttl`` as a float, or ``None``; for backends validating their TTL arguments.

    Raises:
        ValueError: ``ttl`` is not a finite number of seconds > 0 (or ``None``).
    """
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not (
            math.isfinite(ttl) and ttl > 0):
        raise ValueError(f"{what} must be a number of seconds > 0 or None (no expiry), "
                         f"got {ttl!r}")
    return float(ttl)


def dump_value(key: str, value: Any) -> str:
    """``value`` as compact JSON text, for backends that store text.

    Raises:
        TypeError: ``value`` is not JSON-serialisable (NaN and infinities included).
    """
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise TypeError(f"cache value for key {key!r} must be JSON-serialisable data "
                        f"(dict, list, str, number, bool or None): {exc}") from None
