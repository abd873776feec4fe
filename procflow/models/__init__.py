"""Language models: the ``LanguageModel`` protocol and its implementations.

``OpenAIChatModel`` and ``AnthropicModel`` are imported on first use, so importing
this package does not import httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from procflow._lazy import lazy_exports
from procflow.models.base import (
    CallRetry,
    LanguageModel,
    ModelRequest,
    OutputSchema,
    ToolSpec,
    complete_text,
)
from procflow.models.function import FunctionModel, ModelResponse
from procflow.models.resolve import resolve_model
from procflow.models.scripted import ScriptedModel, ToolCall

if TYPE_CHECKING:
    from procflow.models.anthropic import AnthropicModel
    from procflow.models.openai import OpenAIChatModel

__all__ = [
    "AnthropicModel",
    "CallRetry",
    "FunctionModel",
    "LanguageModel",
    "ModelRequest",
    "ModelResponse",
    "OpenAIChatModel",
    "OutputSchema",
    "ScriptedModel",
    "ToolCall",
    "ToolSpec",
    "complete_text",
    "resolve_model",
]

__getattr__, __dir__ = lazy_exports(__name__, globals())
