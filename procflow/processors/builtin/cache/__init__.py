"""Response caching: ``ResponseCache`` answers a repeated model call from a ``ServerCache``."""

from __future__ import annotations

from procflow.processors.builtin.cache.response import (
    DEFAULT_RESPONSE_CACHE_TTL_SECONDS,
    ResponseCache,
    ResponseCacheContextOptions,
    ResponseCacheKeyInputs,
    build_response_cache_key,
)

__all__ = ["DEFAULT_RESPONSE_CACHE_TTL_SECONDS", "ResponseCache", "ResponseCacheContextOptions",
           "ResponseCacheKeyInputs", "build_response_cache_key"]
