"""Built-in processors. Each is imported on first use, so importing this package is cheap."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from procflow.processors.builtin.batch_parts import BatchPartsProcessor
    from procflow.processors.builtin.detection import DetectionResult, PIIDetection, PIIType
    from procflow.processors.builtin.error_handlers import (
        CompatRule,
        PrefillErrorHandler,
        ProviderHistoryCompat,
        StreamErrorRetryProcessor,
    )
    from procflow.processors.builtin.injection import PromptInjectionDetector
    from procflow.processors.builtin.moderation import ModerationProcessor
    from procflow.processors.builtin.pii import PIIDetector
    from procflow.processors.builtin.regex_filter import RegexFilterProcessor, RegexRule
    from procflow.processors.builtin.token_limiter import TokenLimiter, TokenLimiterOptions
    from procflow.processors.builtin.tool_call_filter import ToolCallFilter
    from procflow.processors.builtin.unicode import UnicodeNormalizer

LOCATIONS: dict[str, str] = {
    "BatchPartsProcessor": "batch_parts",
    "CompatRule": "error_handlers",
    "DetectionResult": "detection",
    "ModerationProcessor": "moderation",
    "PIIDetection": "detection",
    "PIIDetector": "pii",
    "PIIType": "detection",
    "PrefillErrorHandler": "error_handlers",
    "PromptInjectionDetector": "injection",
    "ProviderHistoryCompat": "error_handlers",
    "RegexFilterProcessor": "regex_filter",
    "RegexRule": "regex_filter",
    "StreamErrorRetryProcessor": "error_handlers",
    "TokenLimiter": "token_limiter",
    "TokenLimiterOptions": "token_limiter",
    "ToolCallFilter": "tool_call_filter",
    "UnicodeNormalizer": "unicode",
}
"""Public name -> the module of this package that defines it."""

__all__ = [
    "BatchPartsProcessor",
    "CompatRule",
    "DetectionResult",
    "ModerationProcessor",
    "PIIDetection",
    "PIIDetector",
    "PIIType",
    "PrefillErrorHandler",
    "PromptInjectionDetector",
    "ProviderHistoryCompat",
    "RegexFilterProcessor",
    "RegexRule",
    "StreamErrorRetryProcessor",
    "TokenLimiter",
    "TokenLimiterOptions",
    "ToolCallFilter",
    "UnicodeNormalizer",
]


def __getattr__(name: str) -> Any:
    module = LOCATIONS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *LOCATIONS})
