"""The contract every model provider meets: a request in, a stream of chunks out."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from procflow.errors import APICallError
from procflow.messages import Chunk, ErrorChunk, TextDelta

__all__ = ["CallRetry", "LanguageModel", "ModelFallback", "ModelRequest", "OutputSchema",
           "ToolSpec", "complete_text", "model_name"]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as a model sees it.

    Attributes:
        name: The tool's name.
        description: What it does (the model reads this).
        parameters: JSON schema of its arguments.
    """

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class OutputSchema:
    """The JSON the answer must be (structured output).

    A provider asks for it natively where it can (OpenAI's JSON-schema
    ``response_format``, a forced tool on Anthropic, whose input then streams as the
    answer's text); the agent validates the text either way.

    Attributes:
        name: A short name for the schema (letters, digits, ``_`` and ``-``).
        schema: The JSON schema.
        description: What the answer is, for the model.
    """

    name: str
    schema: dict[str, Any]
    description: str = ""


@dataclass(frozen=True, slots=True)
class CallRetry:
    """One retry of a provider call (recorded on the request and the model-call span).

    Attributes:
        attempt: 1 for the first retry, 2 for the second...
        delay: Seconds waited before it.
        error: The failure that caused it.
        status_code: That failure's HTTP status, if any.
        retry_after: The wait the provider asked for (``Retry-After``), if it did.
    """

    attempt: int
    delay: float
    error: str
    status_code: int | None = None
    retry_after: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The retry as plain data (as traces store it)."""
        return {"attempt": self.attempt, "delay": self.delay, "error": self.error,
                "status_code": self.status_code, "retry_after": self.retry_after}


@dataclass(frozen=True, slots=True)
class ModelFallback:
    """A model that failed a call another model then answered (``FallbackModel``).

    Attributes:
        model: The model that failed, as ``"provider/model_id"``.
        error: Its error.
        status_code: The error's HTTP status, if any.
        retries: The retries it made before giving up.
    """

    model: str
    error: str
    status_code: int | None = None
    retries: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The failure as plain data (as traces and stored runs keep it)."""
        return {"model": self.model, "error": self.error, "status_code": self.status_code,
                "retries": self.retries}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelFallback:
        """The inverse of ``to_dict()``."""
        status = data.get("status_code")
        return cls(str(data.get("model", "")), str(data.get("error", "")),
                   status if isinstance(status, int) else None, int(data.get("retries") or 0))


@dataclass(slots=True)
class ModelRequest:
    """One model call.

    Attributes:
        prompt: Provider-facing messages (``MessageList.to_prompt()``).
        tools: Tools the model may call.
        tool_choice: "auto", "none", "required" or ``{"type": "tool", "tool_name": ...}``.
        settings: Call settings such as ``temperature``, ``max_tokens``, ``response_format``.
        output_schema: The JSON the answer must be (structured output), if any.
        retries: Filled in by the model: the retries it made for this call.
        fallbacks: Filled in by a ``FallbackModel``: the models that failed the call,
            in order, before one answered.
        answered_by: Filled in by a model that delegates (``FallbackModel``): the model
            that answered, as ``"provider/model_id"`` (``None``: the model called).
    """

    prompt: list[dict[str, Any]]
    tools: Sequence[ToolSpec] | None = None
    tool_choice: Any = None
    settings: dict[str, Any] = field(default_factory=dict)
    output_schema: OutputSchema | None = None
    retries: list[CallRetry] = field(default_factory=list)
    fallbacks: list[ModelFallback] = field(default_factory=list)
    answered_by: str | None = None


@runtime_checkable
class LanguageModel(Protocol):
    """A model: ``stream(request)`` yields chunks ("text-delta", "tool-call", ...)
    and ends with one "finish" chunk carrying ``finish_reason`` and ``usage``.

    Provider rejections raise ``APICallError``.
    """

    @property
    def provider(self) -> str:
        """The provider's name, e.g. "openai"."""
        ...

    @property
    def model_id(self) -> str:
        """The model's id at the provider."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        """Stream the answer to ``request``."""
        ...


def model_name(model: LanguageModel) -> str:
    """``"provider/model_id"``: how traces, prices and fallbacks name ``model``."""
    return f"{model.provider}/{model.model_id}"


async def complete_text(model: LanguageModel, prompt: list[dict[str, Any]],
                        **settings: Any) -> str:
    """Call ``model`` and return its whole text answer.

    Raises:
        APICallError: The provider failed, or the stream carried an "error" chunk.
    """
    parts: list[str] = []
    async for chunk in model.stream(ModelRequest(prompt=prompt, settings=dict(settings))):
        if isinstance(chunk, TextDelta):
            parts.append(chunk.text)
        elif isinstance(chunk, ErrorChunk):
            error = chunk.error
            if isinstance(error, BaseException):
                raise error
            raise APICallError(f"model {model.provider}/{model.model_id} failed: {error}")
    return "".join(parts)
