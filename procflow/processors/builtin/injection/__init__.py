"""Prompt-injection detection: rule tables, the multi-view scanner and the detector."""

from __future__ import annotations

from procflow.processors.builtin.injection.detector import PromptInjectionDetector

__all__ = ["PromptInjectionDetector"]
