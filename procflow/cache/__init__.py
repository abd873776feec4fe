"""Server-side caches: the ``ServerCache`` contract and its backends.

``InMemoryServerCache`` (one process; development and tests) and ``RedisCache``
(shared by processes). ``ResponseCache`` stores model responses in any of them.
``RedisCache`` is imported on first access, so importing this package never imports
``redis``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from procflow._lazy import lazy_exports
from procflow.cache.base import ServerCache
from procflow.cache.memory import InMemoryServerCache

if TYPE_CHECKING:
    from procflow.cache.redis import RedisCache

__all__ = ["InMemoryServerCache", "RedisCache", "ServerCache"]


__getattr__, __dir__ = lazy_exports(__name__, globals())
