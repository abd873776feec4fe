"""Turn a ``"provider/model-id"`` string (or a model) into a ``LanguageModel``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from procflow.models.base import LanguageModel
from procflow.models.hosts import OPENAI_COMPATIBLE

__all__ = ["PROVIDERS", "resolve_model"]

PROVIDERS: tuple[str, ...] = ("anthropic", "google", *OPENAI_COMPATIBLE)
"""The providers a model string may name."""


def resolve_model(model: str | LanguageModel | Sequence[str | LanguageModel]) -> LanguageModel:
    """The model named by ``model``.

    Args:
        model: ``"openai/<model-id>"`` (``OpenAIChatModel``), ``"anthropic/<model-id>"``
            (``AnthropicModel``), ``"google/<model-id>"`` (``GoogleModel``), an
            OpenAI-compatible host's ``"<host>/<model-id>"`` (``"ollama/llama3.2"``,
            ``"groq/..."``, ``"mistral/..."``, ``"openrouter/<vendor>/<model>"``... see
            ``hosts.OPENAI_COMPATIBLE``: an ``OpenAIChatModel`` for that host), an object
            implementing ``LanguageModel``, returned as is, or a list of them: a
            ``FallbackModel`` asking them in order. Keys and base URLs come from the
            environment at call time.

    Raises:
        ValueError: The string names no known provider or no model id, or the object
            is not a model.
    """
    if isinstance(model, str):
        provider, slash, model_id = model.partition("/")
        if not slash or not model_id:
            raise ValueError(f"model string {model!r} is not 'provider/model-id'; "
                             f"known providers: {', '.join(PROVIDERS)} "
                             "(e.g. 'openai/gpt-4o-mini')")
        if provider in OPENAI_COMPATIBLE:
            from procflow.models.openai import OpenAIChatModel

            return OpenAIChatModel(model_id, provider=provider)
        if provider == "google":
            from procflow.models.google import GoogleModel

            return GoogleModel(model_id)
        if provider == "anthropic":
            from procflow.models.anthropic import AnthropicModel

            return AnthropicModel(model_id)
        raise ValueError(f"unknown model provider {provider!r} in {model!r}; known providers: "
                         f"{', '.join(PROVIDERS)} (or pass a LanguageModel object)")
    if isinstance(model, list | tuple):
        from procflow.models.fallback import FallbackModel

        if len(model) == 1:
            return resolve_model(model[0])
        if not model:
            raise ValueError("an empty list of models; give one model or several to fall "
                             "back on, e.g. ['openai/gpt-4o', 'anthropic/claude-sonnet-4-5']")
        return FallbackModel(*model)
    if callable(getattr(model, "stream", None)) and hasattr(model, "model_id"):
        # the LanguageModel protocol, checked without typing's slow isinstance
        return cast(LanguageModel, model)
    raise ValueError(f"expected a 'provider/model-id' string or a LanguageModel, got "
                     f"{type(model).__name__}; known providers: {', '.join(PROVIDERS)}")
