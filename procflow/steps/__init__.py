"""Steps: ``Step``, ``create_step``, ``@step`` and ``StepContext``."""

from __future__ import annotations

from procflow.runtime.step_context import StepContext
from procflow.steps.schema import Schema
from procflow.steps.step import ExecuteFn, Step, create_step, step

__all__ = ["ExecuteFn", "Schema", "Step", "StepContext", "create_step", "step"]
