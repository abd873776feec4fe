"""Where workflow runs are persisted: the ``Storage`` contract and its backends.

``InMemoryStorage`` (tests, benchmarks), ``SQLiteStorage`` (the embedded default),
``RedisStorage`` (several processes sharing state) and ``PostgresStorage`` (the durable
system of record). The three backends are imported on first access, so importing this
package imports none of ``sqlite3``, ``redis`` or ``psycopg``. ``prune_runs`` deletes
finished runs older than a cut-off (``procflow.storage.retention``). Where runs and
memory go when no ``storage=`` is given is ``procflow.storage.locate``'s one order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from procflow._lazy import lazy_exports
from procflow.storage.base import Storage
from procflow.storage.memory import InMemoryStorage
from procflow.storage.null import NullStorage
from procflow.storage.retention import PrunedRun, prune_runs
from procflow.storage.values import register_type

if TYPE_CHECKING:
    from procflow.storage.postgres import PostgresStorage
    from procflow.storage.redis import RedisStorage
    from procflow.storage.sqlite import SQLiteStorage

__all__ = ["InMemoryStorage", "NullStorage", "PostgresStorage", "PrunedRun", "RedisStorage",
           "SQLiteStorage", "Storage", "prune_runs", "register_type"]

__getattr__, __dir__ = lazy_exports(__name__, globals())
