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
from procflow.processors.reducer import merge_processor_results, merge_text_edits
from procflow.processors.runner import ProcessorRunner, check_processors, run_processor_workflow
from procflow.processors.step import ProcessorStep, ProcessorStepSchema, is_processor_workflow
from procflow.processors.stream import StreamPipeline

if TYPE_CHECKING:
    from procflow.processors.builtin import (
        BatchPartsProcessor,
        CompatRule,
        DetectionResult,
        ModerationProcessor,
        PIIDetection,
        PIIDetector,
        PrefillErrorHandler,
        PromptInjectionDetector,
        ProviderHistoryCompat,
        RegexFilterProcessor,
        RegexRule,
        StreamErrorRetryProcessor,
        TokenLimiter,
        TokenLimiterOptions,
        ToolCallFilter,
        UnicodeNormalizer,
    )

_BUILTINS = frozenset({
    "BatchPartsProcessor", "CompatRule", "DetectionResult", "ModerationProcessor",
    "PIIDetection", "PIIDetector", "PrefillErrorHandler", "PromptInjectionDetector",
    "ProviderHistoryCompat", "RegexFilterProcessor", "RegexRule", "StreamErrorRetryProcessor",
    "TokenLimiter", "TokenLimiterOptions", "ToolCallFilter", "UnicodeNormalizer",
})


def __getattr__(name: str) -> Any:
    if name in _BUILTINS:
        from procflow.processors import builtin

        return getattr(builtin, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "HOOKS",
    "APIErrorResult",
    "BatchPartsProcessor",
    "CompatRule",
    "DetectionResult",
    "ModerationProcessor",
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
    "RegexFilterProcessor",
    "RegexRule",
    "Signal",
    "StepInfo",
    "StepOverrides",
    "StreamErrorRetryProcessor",
    "StreamPipeline",
    "TokenLimiter",
    "TokenLimiterOptions",
    "ToolCallFilter",
    "UnicodeNormalizer",
    "check_processors",
    "is_processor_workflow",
    "merge_processor_results",
    "merge_text_edits",
    "run_processor_workflow",
]
