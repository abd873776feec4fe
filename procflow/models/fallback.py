"""``FallbackModel``: when one model's provider is down, the next model takes the call.

A call goes to the first model. When it fails before its first chunk reached the
caller with an error ``fallback_on`` accepts (by default an outage: a connection error,
a timeout, a 5xx, or a 429 once the model's own retries are spent), the next model gets
the same request. Once a chunk has been passed on, the answer belongs to that model and
its errors are the call's errors.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeAlias, final

from procflow.errors import APICallError
from procflow.messages import Chunk, ErrorChunk, Finish
from procflow.models.base import LanguageModel, ModelFallback, ModelRequest, model_name

__all__ = ["FallbackModel", "FallbackOn", "is_outage"]

logger = logging.getLogger("procflow.models")

FallbackOn: TypeAlias = (type[Exception] | tuple[type[Exception], ...]
                         | Callable[[Exception], bool])
"""What makes a call fall over: exception types, or a predicate of the error."""


def is_outage(error: Exception) -> bool:
    """Whether ``error`` says the provider is unavailable rather than the request wrong.

    An outage is an ``APICallError`` that is retryable (a connection error, a timeout,
    a 408, 409 or 429) or carries a 5xx status. A bad request, a context too long, a
    missing or refused key (the other 4xx) is not: another model would fail the same
    way, or the mistake is the caller's to fix.
    """
    if not isinstance(error, APICallError):
        return False
    return error.is_retryable or (error.status_code is not None and error.status_code >= 500)


def _predicate(fallback_on: FallbackOn) -> Callable[[Exception], bool]:
    if isinstance(fallback_on, type) and issubclass(fallback_on, Exception):
        kinds: tuple[type[Exception], ...] = (fallback_on,)
    elif isinstance(fallback_on, tuple) and fallback_on and all(
            isinstance(k, type) and issubclass(k, Exception) for k in fallback_on):
        kinds = fallback_on
    elif callable(fallback_on) and not isinstance(fallback_on, type):
        return fallback_on
    else:
        raise TypeError(f"fallback_on must be an exception type, a non-empty tuple of them "
                        f"or a function of the error returning a bool, got {fallback_on!r}")
    return lambda error: isinstance(error, kinds)


@final
class FallbackModel:
    """Models tried in order: the first that does not fail the call answers it.

    ``Agent(model=[a, b])`` means ``Agent(model=FallbackModel(a, b))``. Which model
    answered and which failed before it (with their errors) are on the request
    (``ModelRequest.answered_by``, ``ModelRequest.fallbacks``), hence on the
    model-call span, the agent's ``StepRecord`` and ``FullOutput.response``.

    Each model keeps its own retries: a provider's 429 or 5xx is retried by its model
    (``max_retries``) before the next model is asked.

    The answer's "finish" chunk names its model (``metadata["model"]``), so a
    ``ResponseCache`` keeps it under the model that gave it and reads each model's
    entry in order.

    Args:
        primary: The model asked first (a ``LanguageModel`` or "provider/model-id").
        *fallbacks: The models asked next, in order.
        fallback_on: Which errors make the call move on: exception types, or a function
            of the error returning ``True`` to move on (default ``is_outage``: connection
            errors, timeouts, 5xx, 429). A streamed answer moves on only before its
            first chunk.

    Raises:
        ValueError: A model string names no known provider, or no fallback is given.
        TypeError: ``fallback_on`` is neither exception types nor a function.
    """

    __slots__ = ("_falls_over", "_models")

    def __init__(self, primary: str | LanguageModel, *fallbacks: str | LanguageModel,
                 fallback_on: FallbackOn = is_outage) -> None:
        from procflow.models.resolve import resolve_model

        if not fallbacks:
            raise ValueError("FallbackModel needs at least two models, e.g. "
                             "FallbackModel('openai/gpt-4o', 'anthropic/claude-sonnet-4-5')")
        self._models = tuple(resolve_model(m) for m in (primary, *fallbacks))
        self._falls_over = _predicate(fallback_on)

    @property
    def models(self) -> tuple[LanguageModel, ...]:
        """The models, in the order they are asked."""
        return self._models

    @property
    def provider(self) -> str:
        """``"fallback"``."""
        return "fallback"

    @property
    def model_id(self) -> str:
        """The models' names joined: ``"openai/gpt-4o,anthropic/claude-sonnet-4-5"``."""
        return ",".join(model_name(m) for m in self._models)

    def __repr__(self) -> str:
        return f"FallbackModel({', '.join(repr(m) for m in self._models)})"

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        """Stream the first answer a model gives without failing first.

        Raises:
            APICallError: Every model failed (the message names each model's error;
                the last one is the cause), or the answering model failed after its
                first chunk.
            Exception: A model's error ``fallback_on`` does not accept, as it was.
        """
        last = len(self._models) - 1
        for index, model in enumerate(self._models):
            retries_before = len(request.retries)
            started = False
            stream = model.stream(request)
            try:
                async for chunk in stream:
                    if not started:
                        if isinstance(chunk, ErrorChunk):
                            error = chunk.error
                            raise (error if isinstance(error, Exception)
                                   else APICallError(str(error)))
                        started = True
                        request.answered_by = model_name(model)
                    if isinstance(chunk, Finish):  # the answer says whose it is
                        chunk = dataclasses.replace(chunk, metadata={
                            **(chunk.metadata or {}), "model": model_name(model)})
                    yield chunk
                return
            except Exception as exc:
                if started or not self._falls_over(exc):
                    raise
                status = exc.status_code if isinstance(exc, APICallError) else None
                failure = ModelFallback(model_name(model), str(exc), status,
                                        len(request.retries) - retries_before)
                request.fallbacks.append(failure)
                if index == last:
                    raise _all_failed(request.fallbacks, exc) from exc
                logger.warning("%s failed (%s); falling back to %s", failure.model,
                               failure.error, model_name(self._models[index + 1]))
            finally:
                await _aclose(stream)


def _all_failed(failures: Sequence[ModelFallback], last: Exception) -> APICallError:
    detail = "; ".join(f"{f.model}: {f.error}" for f in failures)
    message = f"every model of the FallbackModel failed: {detail}"
    if not isinstance(last, APICallError):
        return APICallError(message)
    return APICallError(message, status_code=last.status_code, body=last.body,
                        is_retryable=last.is_retryable, retry_after=last.retry_after)


async def _aclose(stream: Any) -> None:
    close = getattr(stream, "aclose", None)
    if close is not None:
        await close()
