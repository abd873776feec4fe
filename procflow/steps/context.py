"""``StepContext`` and the step signals, re-exported from ``procflow.runtime`` where they
live (the runtime builds the context; steps only receive it)."""

from __future__ import annotations

from procflow.runtime.step_context import BailSignal, StepContext, SuspendSignal

__all__ = ["BailSignal", "StepContext", "SuspendSignal"]
