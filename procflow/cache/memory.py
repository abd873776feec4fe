"""``InMemoryServerCache``: a bounded, TTL-aware LRU cache living in one process."""

from __future__ import annotations

import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final, final

from procflow.cache.base import ServerCache, check_ttl, dump_value

__all__ = ["DEFAULT_CACHE_MAX_SIZE", "DEFAULT_CACHE_TTL_SECONDS", "InMemoryServerCache"]

logger = logging.getLogger("procflow.cache")

DEFAULT_CACHE_MAX_SIZE: Final = 1000
"""Entries an ``InMemoryServerCache`` holds before evicting the least recently used."""

DEFAULT_CACHE_TTL_SECONDS: Final = 300.0
"""Seconds an entry lives when ``set`` is given no TTL (5 minutes)."""


@final
class InMemoryServerCache(ServerCache):
    """A ``ServerCache`` in this process's memory, for development, tests and one-process apps.

    Entries expire after their TTL (measured on a monotonic clock, so changing the
    system time does not expire or revive anything). When ``max_size`` entries are
    held, storing a new key first drops expired entries, then the least recently
    used one (reads and writes both count as use). Values are stored as JSON text,
    so the same data goes in and out as with ``RedisCache``.

    Args:
        max_size: Most entries held at once (an int >= 1).
        default_ttl: Seconds an entry lives when ``set`` gets no TTL; ``None``: forever.
        clock: Where time comes from (seconds, monotonic); tests may pass a fake one.

    Raises:
        ValueError: ``max_size`` or ``default_ttl`` is invalid.
    """

    __slots__ = ("_clock", "_default_ttl", "_entries", "_max_size")

    def __init__(self, *, max_size: int = DEFAULT_CACHE_MAX_SIZE,
                 default_ttl: float | None = DEFAULT_CACHE_TTL_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
            raise ValueError(f"InMemoryServerCache: max_size must be an int >= 1, "
                             f"got {max_size!r}")
        self._max_size = max_size
        self._default_ttl = check_ttl(default_ttl, "InMemoryServerCache: default_ttl")
        self._clock = clock
        # key -> (expires_at or None, JSON text); ordered from least to most recently used
        self._entries: OrderedDict[str, tuple[float | None, str]] = OrderedDict()

    @property
    def max_size(self) -> int:
        """Most entries held at once."""
        return self._max_size

    @property
    def default_ttl(self) -> float | None:
        """Seconds an entry lives when ``set`` gets no TTL (``None``: forever)."""
        return self._default_ttl

    def __len__(self) -> int:
        """The number of live (unexpired) entries."""
        self._purge_expired()
        return len(self._entries)

    def __repr__(self) -> str:
        return (f"InMemoryServerCache(max_size={self._max_size}, "
                f"default_ttl={self._default_ttl}, entries={len(self._entries)})")

    async def get(self, key: str) -> Any | None:
        """The value under ``key`` (a fresh copy), or ``None`` when missing or expired."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires_at, text = entry
        if expires_at is not None and self._clock() >= expires_at:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        try:
            return json.loads(text)
        except ValueError:
            logger.warning("in-memory cache entry %r is not valid JSON; treated as a miss", key)
            return None

    async def set(self, key: str, value: Any, ttl_seconds: float | None = None) -> None:
        """Store ``value`` under ``key`` for ``ttl_seconds`` (default: ``default_ttl``).

        Raises:
            TypeError: ``value`` is not JSON-serialisable.
            ValueError: ``ttl_seconds`` is not a positive number.
        """
        ttl = check_ttl(ttl_seconds, "ttl_seconds")
        if ttl is None:
            ttl = self._default_ttl
        text = dump_value(key, value)
        expires_at = None if ttl is None else self._clock() + ttl
        if key in self._entries:
            self._entries.move_to_end(key)
        elif len(self._entries) >= self._max_size:
            self._purge_expired()
            while len(self._entries) >= self._max_size:
                self._entries.popitem(last=False)
        self._entries[key] = (expires_at, text)

    async def delete(self, key: str) -> None:
        """Remove ``key`` (a missing key is not an error)."""
        self._entries.pop(key, None)

    async def clear(self) -> None:
        """Remove every entry."""
        self._entries.clear()

    def _purge_expired(self) -> None:
        now = self._clock()
        expired = [key for key, (expires_at, _) in self._entries.items()
                   if expires_at is not None and now >= expires_at]
        for key in expired:
            del self._entries[key]
