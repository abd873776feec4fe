"""Processors: the ``Processor`` base class, hook args, the runner, processor steps."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from procflow.processors.apply import StepInfo, StepOverrides
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
from procflow.processors.base import HOOKS, Processor
from procflow.processors.builtin import LOCATIONS as builtin_names
from procflow.processors.reducer import merge_processor_results, merge_text_edits
from procflow.processors.runner import ProcessorRunner, check_processors, run_processor_workflow
from procflow.processors.step import ProcessorStep, ProcessorStepSchema, is_processor_workflow
from procflow.processors.stream import StreamPipeline

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
        MessageHistory,
        ModelPrice,
        ModerationProcessor,
        OnnxTextClassifier,
        PIIDetection,
        PIIDetector,
        PrefillErrorHandler,
        PromptInjectionDetector,
        ProviderHistoryCompat,
        RedisCostLedger,
        RegexFilterProcessor,
        RegexRule,
        ResponseCache,
        ResponseCacheContextOptions,
        ResponseCacheKeyInputs,
        SemanticRecall,
        StreamErrorRetryProcessor,
        TokenLimiter,
        TokenLimiterOptions,
        ToolCallFilter,
        ToolSearchHit,
        ToolSearchOptions,
        ToolSearchProcessor,
        UnicodeNormalizer,
        WorkingMemory,
        build_response_cache_key,
    )

_BUILTINS = frozenset(builtin_names)


def __getattr__(name: str) -> Any:
    if name in _BUILTINS:
        from procflow.processors import builtin

        return getattr(builtin, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_RESPONSE_CACHE_TTL_SECONDS",
    "HOOKS",
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
    "ProcessorRunner",
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
    "StepInfo",
    "StepOverrides",
    "StreamErrorRetryProcessor",
    "StreamPipeline",
    "TokenLimiter",
    "TokenLimiterOptions",
    "ToolCallFilter",
    "ToolSearchHit",
    "ToolSearchOptions",
    "ToolSearchProcessor",
    "UnicodeNormalizer",
    "WorkingMemory",
    "build_response_cache_key",
    "check_processors",
    "is_processor_workflow",
    "merge_processor_results",
    "merge_text_edits",
    "run_processor_workflow",
]
