"""Backend plumbing written once: what every SQLite- and Redis-backed store shares.

``procflow._backends.sqlite``: one SQLite file behind a lock (connection set-up,
pragmas, transactions, the "database is locked" retry with backoff).
``procflow._backends.redis``: a ``redis.asyncio`` client with its ownership, fast-fail
timeouts, a display name without credentials and error translation.

A bottom layer: it imports only ``procflow.errors``. The Redis module imports
``redis``, so it is imported only by the Redis backends, on their first use.
"""

from __future__ import annotations

__all__: list[str] = []
