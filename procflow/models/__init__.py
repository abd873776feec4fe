"""Language models: the ``LanguageModel`` protocol and its implementations.

The HTTP-backed models (``OpenAIChatModel``, ``OpenAIResponsesModel``,
``AnthropicModel``, ``GoogleModel``) are imported on first use, so importing this
package does not import httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from procflow._lazy import lazy_exports
from procflow.models.base import (
    CallRetry,
    LanguageModel,
    ModelFallback,
    ModelRequest,
    OutputSchema,
    ToolSpec,
    complete_text,
)
from procflow.models.fallback import FallbackModel, is_outage
from procflow.models.function import FunctionModel, ModelResponse
from procflow.models.resolve import resolve_model
from procflow.models.scripted import ScriptedModel, ToolCall

if TYPE_CHECKING:
    from procflow.models.anthropic import AnthropicModel
    from procflow.models.google import GoogleModel
    from procflow.models.openai import OpenAIChatModel
    from procflow.models.openai_responses import OpenAIResponsesModel

__all__ = [
    "AnthropicModel",
    "CallRetry",
    "FallbackModel",
    "FunctionModel",
    "GoogleModel",
    "LanguageModel",
    "ModelFallback",
    "ModelRequest",
    "ModelResponse",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "OutputSchema",
    "ScriptedModel",
    "ToolCall",
    "ToolSpec",
    "complete_text",
    "is_outage",
    "resolve_model",
]

__getattr__, __dir__ = lazy_exports(__name__, globals())
