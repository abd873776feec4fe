"""Built-in processors. Each is imported on first use, so importing this package is cheap.

Layout: a concern with several modules is a subpackage (``cost/``, ``cache/``,
``tools/``, and the detectors'); a processor that fits in one module stays a module
here (``batch_parts``, ``error_handlers``, ``token_limiter``, ``unicode``).

The memory processors (``MessageHistory``, ``SemanticRecall``, ``WorkingMemory``) are
built on ``procflow.memory``, a package beside this one that imports it; import them
from ``procflow.memory``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from procflow._lazy import lazy_exports

if TYPE_CHECKING:
    from procflow.processors.builtin._detection import DetectionResult, PIIDetection, PIIType
    from procflow.processors.builtin.batch_parts import BatchPartsProcessor
    from procflow.processors.builtin.cache import (
        DEFAULT_RESPONSE_CACHE_TTL_SECONDS,
        ResponseCache,
        ResponseCacheContextOptions,
        ResponseCacheKeyInputs,
        build_response_cache_key,
    )
    from procflow.processors.builtin.cost import (
        CostGuardProcessor,
        CostLedger,
        CostScope,
        InMemoryCostLedger,
        ModelPrice,
        RedisCostLedger,
    )
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
    from procflow.processors.builtin.token_limiter import TokenLimiter, TokenLimiterOptions
    from procflow.processors.builtin.tools import (
        ToolCallFilter,
        ToolSearchHit,
        ToolSearchOptions,
        ToolSearchProcessor,
    )
    from procflow.processors.builtin.unicode import UnicodeNormalizer

_LOCATIONS: dict[str, str] = {
    "BatchPartsProcessor": ".batch_parts",
    "CompatRule": ".error_handlers",
    "CostGuardProcessor": ".cost",
    "CostLedger": ".cost",
    "CostScope": ".cost",
    "DEFAULT_RESPONSE_CACHE_TTL_SECONDS": ".cache",
    "DetectionResult": "._detection",
    "InMemoryCostLedger": ".cost",
    "ModelPrice": ".cost",
    "ModerationProcessor": ".moderation",
    "OnnxTextClassifier": ".onnx_classifier",
    "PIIDetection": "._detection",
    "PIIDetector": ".pii",
    "PIIType": "._detection",
    "PrefillErrorHandler": ".error_handlers",
    "PromptInjectionDetector": ".injection",
    "ProviderHistoryCompat": ".error_handlers",
    "RedisCostLedger": ".cost",
    "RegexFilterProcessor": ".regex",
    "RegexRule": ".regex",
    "ResponseCache": ".cache",
    "ResponseCacheContextOptions": ".cache",
    "ResponseCacheKeyInputs": ".cache",
    "StreamErrorRetryProcessor": ".error_handlers",
    "TokenLimiter": ".token_limiter",
    "TokenLimiterOptions": ".token_limiter",
    "ToolCallFilter": ".tools",
    "ToolSearchHit": ".tools",
    "ToolSearchOptions": ".tools",
    "ToolSearchProcessor": ".tools",
    "UnicodeNormalizer": ".unicode",
    "build_response_cache_key": ".cache",
}
"""Public name -> the module (relative to this package) that exports it."""

__all__ = [
    "DEFAULT_RESPONSE_CACHE_TTL_SECONDS",
    "BatchPartsProcessor",
    "CompatRule",
    "CostGuardProcessor",
    "CostLedger",
    "CostScope",
    "DetectionResult",
    "InMemoryCostLedger",
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
    "StreamErrorRetryProcessor",
    "TokenLimiter",
    "TokenLimiterOptions",
    "ToolCallFilter",
    "ToolSearchHit",
    "ToolSearchOptions",
    "ToolSearchProcessor",
    "UnicodeNormalizer",
    "build_response_cache_key",
]

__getattr__, __dir__ = lazy_exports(__name__, globals(), _LOCATIONS)
