"""Processors: the ``Processor`` base class, its hooks' args and results, processor steps,
and the built-in processors (imported on first use).

The machinery that runs them (the runner, the stream pipeline, the hook table) is
internal: ``procflow.processors._runner``, ``._stream``, ``._hooks``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from procflow._lazy import lazy_exports
from procflow.processors import builtin as _builtin
from procflow.processors.args import (
    APIErrorResult,
    OutputResult,
    ProcessAPIErrorArgs,
    ProcessInputArgs,
    ProcessInputResult,
    ProcessInputStepArgs,
    ProcessInputStepResult,
    ProcessLLMRequestArgs,
    ProcessLLMRequestResult,
    ProcessLLMResponseArgs,
    ProcessorArgs,
    ProcessorContext,
    ProcessorViolation,
    ProcessorWriter,
    ProcessOutputResultArgs,
    ProcessOutputStepArgs,
    ProcessOutputStreamArgs,
    ProcessToolResultArgs,
    ProcessToolResultResult,
    Signal,
)
from procflow.processors.base import Processor
from procflow.processors.reducer import merge_processor_results, merge_text_edits
from procflow.processors.step import ProcessorStep, ProcessorStepSchema

if TYPE_CHECKING:
    from procflow.processors.builtin import (
        DEFAULT_RESPONSE_CACHE_TTL_SECONDS,
        BatchPartsProcessor,
        CompatRule,
        CostGuardProcessor,
        CostLedger,
        CostScope,
        DetectionResult,
        InMemoryCostLedger,
        ModelPrice,
        ModerationProcessor,
        OnnxTextClassifier,
        PIIDetection,
        PIIDetector,
        PIIType,
        PrefillErrorHandler,
        PromptInjectionDetector,
        ProviderHistoryCompat,
        RedisCostLedger,
        RegexFilterProcessor,
        RegexRule,
        ResponseCache,
        ResponseCacheContextOptions,
        ResponseCacheKeyInputs,
        StreamErrorRetryProcessor,
        TokenLimiter,
        TokenLimiterOptions,
        ToolCallFilter,
        ToolSearchHit,
        ToolSearchOptions,
        ToolSearchProcessor,
        UnicodeNormalizer,
        build_response_cache_key,
    )

__all__ = [
    "DEFAULT_RESPONSE_CACHE_TTL_SECONDS",
    "APIErrorResult",
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
    "OutputResult",
    "PIIDetection",
    "PIIDetector",
    "PIIType",
    "PrefillErrorHandler",
    "ProcessAPIErrorArgs",
    "ProcessInputArgs",
    "ProcessInputResult",
    "ProcessInputStepArgs",
    "ProcessInputStepResult",
    "ProcessLLMRequestArgs",
    "ProcessLLMRequestResult",
    "ProcessLLMResponseArgs",
    "ProcessOutputResultArgs",
    "ProcessOutputStepArgs",
    "ProcessOutputStreamArgs",
    "ProcessToolResultArgs",
    "ProcessToolResultResult",
    "Processor",
    "ProcessorArgs",
    "ProcessorContext",
    "ProcessorStep",
    "ProcessorStepSchema",
    "ProcessorViolation",
    "ProcessorWriter",
    "PromptInjectionDetector",
    "ProviderHistoryCompat",
    "RedisCostLedger",
    "RegexFilterProcessor",
    "RegexRule",
    "ResponseCache",
    "ResponseCacheContextOptions",
    "ResponseCacheKeyInputs",
    "SemanticRecall",
    "Signal",
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
    "merge_processor_results",
    "merge_text_edits",
]

# DESIGN §4 lists the memory processors among the built-ins. They are defined in
# ``procflow.memory`` (which builds on this package), so they are resolved from there on
# first read: the one name map here that points up a layer, and never at import time.
_MEMORY_PROCESSORS = dict.fromkeys(("MessageHistory", "SemanticRecall", "WorkingMemory"),
                                   "procflow.memory.processors")

__getattr__, __dir__ = lazy_exports(__name__, globals(), {
    **dict.fromkeys(_builtin.__all__, ".builtin"), **_MEMORY_PROCESSORS})
