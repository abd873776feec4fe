"""Language models: the ``LanguageModel`` protocol and its implementations."""

from __future__ import annotations

from procflow.models.base import LanguageModel, ModelRequest, ToolSpec, complete_text

__all__ = ["LanguageModel", "ModelRequest", "ToolSpec", "complete_text"]
