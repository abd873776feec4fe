"""Language models: the ``LanguageModel`` protocol and its implementations.

``OpenAIChatModel`` and ``AnthropicModel`` are imported on first use, so importing
this package does not import httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from procflow.models.base import LanguageModel, ModelRequest, ToolSpec, complete_text
from procflow.models.resolve import resolve_model
from procflow.models.scripted import ScriptedModel, ToolCall

if TYPE_CHECKING:
    from procflow.models.anthropic import AnthropicModel
    from procflow.models.openai import OpenAIChatModel

__all__ = [
    "AnthropicModel",
    "LanguageModel",
    "ModelRequest",
    "OpenAIChatModel",
    "ScriptedModel",
    "ToolCall",
    "ToolSpec",
    "complete_text",
    "resolve_model",
]

_LAZY = {"OpenAIChatModel": "procflow.models.openai",
         "AnthropicModel": "procflow.models.anthropic"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
