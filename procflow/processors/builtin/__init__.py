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

from procflow._lazy import declared_exports, lazy_exports

# The one list of this package's exports: mypy reads these imports; at run time the
# block is read as the table of what to import on first use (``declared_exports``).
# isort: off
if TYPE_CHECKING:
    from procflow.processors.builtin._detection import (
        DetectionResult as DetectionResult,
        PIIDetection as PIIDetection,
        PIIType as PIIType,
    )
    from procflow.processors.builtin.batch_parts import BatchPartsProcessor as BatchPartsProcessor
    from procflow.processors.builtin.cache import (
        DEFAULT_RESPONSE_CACHE_TTL_SECONDS as DEFAULT_RESPONSE_CACHE_TTL_SECONDS,
        ResponseCache as ResponseCache,
        ResponseCacheContextOptions as ResponseCacheContextOptions,
        ResponseCacheKeyInputs as ResponseCacheKeyInputs,
        build_response_cache_key as build_response_cache_key,
    )
    from procflow.processors.builtin.cost import (
        CostGuardProcessor as CostGuardProcessor,
        CostLedger as CostLedger,
        CostScope as CostScope,
        InMemoryCostLedger as InMemoryCostLedger,
        ModelPrice as ModelPrice,
        RedisCostLedger as RedisCostLedger,
    )
    from procflow.processors.builtin.error_handlers import (
        CompatRule as CompatRule,
        PrefillErrorHandler as PrefillErrorHandler,
        ProviderHistoryCompat as ProviderHistoryCompat,
        StreamErrorRetryProcessor as StreamErrorRetryProcessor,
    )
    from procflow.processors.builtin.injection import (
        PromptInjectionDetector as PromptInjectionDetector,
    )
    from procflow.processors.builtin.moderation import ModerationProcessor as ModerationProcessor
    from procflow.processors.builtin.onnx_classifier import (
        OnnxTextClassifier as OnnxTextClassifier,
    )
    from procflow.processors.builtin.pii import PIIDetector as PIIDetector
    from procflow.processors.builtin.regex import (
        RegexFilterProcessor as RegexFilterProcessor,
        RegexRule as RegexRule,
    )
    from procflow.processors.builtin.token_limiter import (
        TokenLimiter as TokenLimiter,
        TokenLimiterOptions as TokenLimiterOptions,
    )
    from procflow.processors.builtin.tools import (
        ToolCallFilter as ToolCallFilter,
        ToolSearchHit as ToolSearchHit,
        ToolSearchOptions as ToolSearchOptions,
        ToolSearchProcessor as ToolSearchProcessor,
    )
    from procflow.processors.builtin.unicode import UnicodeNormalizer as UnicodeNormalizer
# isort: on

_EXPORTS = declared_exports(__name__, globals())
"""Public name -> the module that exports it."""

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
