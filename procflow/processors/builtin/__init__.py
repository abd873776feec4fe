"""Built-in processors. Each is imported on first use, so importing this package is cheap."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from procflow.memory.processors import MessageHistory, SemanticRecall, WorkingMemory
    from procflow.processors.builtin._detection import DetectionResult, PIIDetection, PIIType
    from procflow.processors.builtin.batch_parts import BatchPartsProcessor
    from procflow.processors.builtin.cost_guard import CostGuardProcessor, CostScope, ModelPrice
    from procflow.processors.builtin.cost_ledger import CostLedger, InMemoryCostLedger
    from procflow.processors.builtin.cost_ledger_redis import RedisCostLedger
    from procflow.processors.builtin.error_handlers import (
        CompatRule,
        PrefillErrorHandler,
        ProviderHistoryCompat,
        StreamErrorRetryProcessor,
    )
    from procflow.processors.builtin.injection import PromptInjectionDetector
    from procflow.processors.builtin.moderation import ModerationProcessor
    from procflow.processors.builtin.onnx_classifier import OnnxTextClassifier
    from procflow.processors.builtin.pii import PIIDetector
    from procflow.processors.builtin.regex.filter import RegexFilterProcessor, RegexRule
    from procflow.processors.builtin.response_cache import (
        DEFAULT_RESPONSE_CACHE_TTL_SECONDS,
        ResponseCache,
        ResponseCacheContextOptions,
        ResponseCacheKeyInputs,
        build_response_cache_key,
    )
    from procflow.processors.builtin.token_limiter import TokenLimiter, TokenLimiterOptions
    from procflow.processors.builtin.tool_call_filter import ToolCallFilter
    from procflow.processors.builtin.tool_search import (
        ToolSearchHit,
        ToolSearchOptions,
        ToolSearchProcessor,
    )
    from procflow.processors.builtin.unicode import UnicodeNormalizer

LOCATIONS: dict[str, str] = {
    "BatchPartsProcessor": "batch_parts",
    "CompatRule": "error_handlers",
    "CostGuardProcessor": "cost_guard",
    "CostLedger": "cost_ledger",
    "CostScope": "cost_guard",
    "DEFAULT_RESPONSE_CACHE_TTL_SECONDS": "response_cache",
    "DetectionResult": "_detection",
    "InMemoryCostLedger": "cost_ledger",
    "MessageHistory": "procflow.memory.processors",
    "ModelPrice": "cost_guard",
    "ModerationProcessor": "moderation",
    "OnnxTextClassifier": "onnx_classifier",
    "PIIDetection": "_detection",
    "PIIDetector": "pii",
    "PIIType": "_detection",
    "PrefillErrorHandler": "error_handlers",
    "PromptInjectionDetector": "injection",
    "ProviderHistoryCompat": "error_handlers",
    "RegexFilterProcessor": "regex",
    "RedisCostLedger": "cost_ledger_redis",
    "RegexRule": "regex",
    "ResponseCache": "response_cache",
    "ResponseCacheContextOptions": "response_cache",
    "ResponseCacheKeyInputs": "response_cache",
    "SemanticRecall": "procflow.memory.processors",
    "StreamErrorRetryProcessor": "error_handlers",
    "TokenLimiter": "token_limiter",
    "TokenLimiterOptions": "token_limiter",
    "ToolCallFilter": "tool_call_filter",
    "ToolSearchHit": "tool_search",
    "ToolSearchOptions": "tool_search",
    "ToolSearchProcessor": "tool_search",
    "UnicodeNormalizer": "unicode",
    "WorkingMemory": "procflow.memory.processors",
    "build_response_cache_key": "response_cache",
}
"""Public name -> the module that defines it (a module of this package, or a full path)."""

__all__ = [
    "DEFAULT_RESPONSE_CACHE_TTL_SECONDS",
    "BatchPartsProcessor",
    "CompatRule",
    "CostGuardProcessor",
    "CostLedger",
    "CostScope",
    "DetectionResult",
    "InMemoryCostLedger",
    "MessageHistory",
    "ModelPrice",
    "ModerationProcessor",
    "OnnxTextClassifier",
    "PIIDetection",
    "PIIDetector",
    "PIIType",
    "PrefillErrorHandler",
    "PromptInjectionDetector",
    "ProviderHistoryCompat",
    "RedisCostLedger",
    "RegexFilterProcessor",
    "RegexRule",
    "ResponseCache",
    "ResponseCacheContextOptions",
    "ResponseCacheKeyInputs",
    "SemanticRecall",
    "StreamErrorRetryProcessor",
    "TokenLimiter",
    "TokenLimiterOptions",
    "ToolCallFilter",
    "ToolSearchHit",
    "ToolSearchOptions",
    "ToolSearchProcessor",
    "UnicodeNormalizer",
    "WorkingMemory",
    "build_response_cache_key",
]


def __getattr__(name: str) -> Any:
    module = LOCATIONS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    path = module if "." in module else f"{__name__}.{module}"
    value = getattr(importlib.import_module(path), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *LOCATIONS})
