"""Cost ledgers: where ``CostGuardProcessor`` records what each scope spent.

A ledger keeps timestamped amounts per key and sums those since a point in time. The
contract is two coroutines; ``InMemoryCostLedger`` keeps entries in this process,
``RedisCostLedger`` (``procflow.processors.builtin.cost.redis``) shares them
between processes through a Redis server.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

__all__ = ["CostLedger", "InMemoryCostLedger"]

DEFAULT_MAX_KEYS: Final = 10_000
DEFAULT_MAX_ENTRIES_PER_KEY: Final = 1_000


@runtime_checkable
class CostLedger(Protocol):
    """Records costs per key and sums them over a time window.

    Implementations may raise on failure; ``CostGuardProcessor`` logs a warning and
    lets the call proceed (fail-open).
    """

    async def add(self, key: str, cost: float, *, at: float, ttl: float) -> None:
        """Record ``cost`` for ``key`` at time ``at`` (seconds); it may be forgotten
        ``ttl`` seconds later."""
        ...

    async def total(self, key: str, *, since: float) -> float:
        """The sum of the costs recorded for ``key`` at or after ``since``."""
        ...


@dataclass(slots=True)
class _Entry:
    at: float
    cost: float
    expires: float


class InMemoryCostLedger:
    """A ``CostLedger`` in this process's memory, bounded in keys and entries.

    When a key holds more than ``max_entries_per_key`` entries, its two oldest are
    merged into one stamped with the newer time: the total stays exact, and the merged
    cost leaves the window slightly late (the guard errs towards blocking). Past
    ``max_keys`` keys, the least recently used key is forgotten.

    Args:
        max_keys: Most keys kept (> 0).
        max_entries_per_key: Most entries per key (>= 2).

    Raises:
        ValueError: A bound is out of range.
    """

    def __init__(self, *, max_keys: int = DEFAULT_MAX_KEYS,
                 max_entries_per_key: int = DEFAULT_MAX_ENTRIES_PER_KEY) -> None:
        if isinstance(max_keys, bool) or not isinstance(max_keys, int) or max_keys < 1:
            raise ValueError(f"InMemoryCostLedger: max_keys must be an int > 0, "
                             f"got {max_keys!r}")
        if (isinstance(max_entries_per_key, bool) or not isinstance(max_entries_per_key, int)
                or max_entries_per_key < 2):
            raise ValueError(f"InMemoryCostLedger: max_entries_per_key must be an int >= 2, "
                             f"got {max_entries_per_key!r}")
        self._max_keys = max_keys
        self._max_entries = max_entries_per_key
        self._keys: OrderedDict[str, deque[_Entry]] = OrderedDict()

    def __len__(self) -> int:
        """The number of keys held."""
        return len(self._keys)

    async def add(self, key: str, cost: float, *, at: float, ttl: float) -> None:
        """Record ``cost`` for ``key`` at ``at``; entries past their ``ttl`` are dropped.

        Raises:
            ValueError: ``cost`` is negative or not finite, or ``ttl`` is not > 0.
        """
        if not math.isfinite(cost) or cost < 0:
            raise ValueError(f"InMemoryCostLedger: cost must be a finite number >= 0, "
                             f"got {cost!r}")
        if not ttl > 0:
            raise ValueError(f"InMemoryCostLedger: ttl must be > 0, got {ttl!r}")
        entries = self._keys.get(key)
        if entries is None:
            entries = self._keys[key] = deque()
            while len(self._keys) > self._max_keys:
                self._keys.popitem(last=False)
        else:
            self._keys.move_to_end(key)
            while entries and entries[0].expires <= at:
                entries.popleft()
        entries.append(_Entry(at, cost, at + ttl))
        if len(entries) > self._max_entries:
            first, second = entries.popleft(), entries.popleft()
            entries.appendleft(_Entry(max(first.at, second.at), first.cost + second.cost,
                                      max(first.expires, second.expires)))

    async def total(self, key: str, *, since: float) -> float:
        """The sum of ``key``'s costs recorded at or after ``since`` (0.0 when none)."""
        entries = self._keys.get(key)
        if entries is None:
            return 0.0
        self._keys.move_to_end(key)
        return math.fsum(e.cost for e in entries if e.at >= since)
