"""``FunctionModel``: a model whose answers come from a function of the request, offline."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TypeAlias, final

from procflow.messages import Chunk
from procflow.models._offline import ModelResponse, ToolCall, stream_response
from procflow.models.base import ModelRequest

__all__ = ["Answer", "FunctionModel", "ModelResponse"]

Answer: TypeAlias = str | Sequence[ToolCall] | ModelResponse
"""What a ``FunctionModel``'s function returns: a text reply, a non-empty list of tool
calls, or a whole ``ModelResponse``."""


def _response(answer: object, name: str) -> ModelResponse:
    if isinstance(answer, ModelResponse):
        return answer
    if isinstance(answer, str):
        return ModelResponse(text=answer)
    if (isinstance(answer, Sequence) and answer
            and all(isinstance(call, ToolCall) for call in answer)):
        return ModelResponse(tool_calls=tuple(answer))
    raise TypeError(f"FunctionModel {name!r} returned {answer!r}; return a str (a text "
                    "reply), a non-empty list of ToolCall, or a ModelResponse")


@final
class FunctionModel:
    """A model that answers each request with what ``fn(request)`` returns.

    ``fn`` gets the ``ModelRequest`` a real provider would: the conversation as
    ``request.prompt`` (provider-facing message dicts, system first), ``tools``,
    ``tool_choice``, ``settings`` and ``output_schema`` (structured output). It may be
    sync or async, and returns a ``str`` (streamed one word per "text-delta", finishing
    with "stop"), a list of ``ToolCall`` (streamed as "tool-call" chunks, finishing
    with "tool-calls") or a ``ModelResponse`` (reasoning, text, tool calls, finish
    reason and usage of your choosing). An exception it raises is the call's failure
    (raise ``APICallError`` to act out a provider error). Every request is recorded in
    ``requests``. Like ``ScriptedModel``, it is for tests and examples.

    Example::

        def reply(request: ModelRequest) -> str | list[ToolCall]:
            if not any(m["role"] == "tool" for m in request.prompt):
                return [ToolCall("lookup", {"id": 7})]
            return "Order 7 has shipped."

        agent = Agent(id="support", model=FunctionModel(reply), tools=[lookup])

    Args:
        fn: The function that answers.
        model_id: The id it reports; ``"function:<fn's name>"`` by default.
        usage_per_word: Tokens counted per word when the answer gives no usage
            (input: words of the prompt's text; output: words of the text).

    Raises:
        TypeError: ``fn`` is not callable.
        ValueError: ``usage_per_word`` is negative.
    """

    __slots__ = ("_fn", "_model_id", "_usage_per_word", "requests")

    def __init__(self, fn: Callable[[ModelRequest], Answer | Awaitable[Answer]], *,
                 model_id: str | None = None, usage_per_word: int = 1) -> None:
        if not callable(fn):
            raise TypeError(f"FunctionModel takes a function of the request, got {fn!r}")
        if usage_per_word < 0:
            raise ValueError(f"usage_per_word must be 0 or more, got {usage_per_word}")
        self._fn = fn
        self._model_id = model_id or f"function:{getattr(fn, '__name__', 'fn')}"
        self._usage_per_word = usage_per_word
        self.requests: list[ModelRequest] = []

    @property
    def provider(self) -> str:
        """Always ``"function"``."""
        return "function"

    @property
    def model_id(self) -> str:
        """The id given at construction, or ``"function:<fn's name>"``."""
        return self._model_id

    def __repr__(self) -> str:
        return f"FunctionModel(model_id={self._model_id!r}, calls={len(self.requests)})"

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        """Record ``request``, call the function and stream its answer.

        Raises:
            TypeError: The function returned something that is not an answer.
            Exception: What the function raised.
        """
        self.requests.append(request)
        answer = self._fn(request)
        if inspect.isawaitable(answer):
            answer = await answer
        response = _response(answer, self._model_id)
        async for chunk in stream_response(response, request,
                                           usage_per_word=self._usage_per_word):
            yield chunk
