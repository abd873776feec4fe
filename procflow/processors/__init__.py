"""Processors: the ``Processor`` base class, hook args, the runner, processor steps."""

from __future__ import annotations

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

__all__ = [
    "HOOKS",
    "APIErrorResult",
    "OutputResult",
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
    "Signal",
    "StepInfo",
    "StepOverrides",
    "StreamPipeline",
    "check_processors",
    "is_processor_workflow",
    "merge_processor_results",
    "merge_text_edits",
    "run_processor_workflow",
]
