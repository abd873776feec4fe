"""``HostedModel``: what the HTTP-backed models share.

The id, key and base URL resolution, and the streamed call itself: POST the payload,
read the server-sent events, hand each event's JSON to the provider's decoder, and end
with the decoder's final chunks. A provider module says only what differs: its auth
headers, its payload and how it decodes its events.

Calls survive a flaky provider: a retryable failure (429, 5xx, a timeout, a connection
error) before the first byte of the answer is retried with exponential backoff and full
jitter, honouring ``Retry-After``; a stream that stalls fails after an idle timeout; a
call may have an overall deadline; an answer larger than a cap is refused.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import random
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, ClassVar

import anyio
import httpx

from procflow.errors import APICallError
from procflow.messages import Chunk, Finish
from procflow.models.base import CallRetry, ModelRequest
from procflow.models.hosts import Host
from procflow.models.http import (
    StreamProgress,
    parse_json_event,
    post_event_stream,
    secret_header_values,
    shared_client,
)
from procflow.models.prices import priced

__all__ = ["DEFAULT_IDLE_TIMEOUT", "DEFAULT_MAX_RESPONSE_BYTES", "DEFAULT_MAX_RETRIES",
           "DEFAULT_MAX_RETRY_WAIT", "HostedModel", "StreamDecoder"]

logger = logging.getLogger("procflow.models")

DEFAULT_MAX_RETRIES = 2
"""Retries of a failed call, as the providers' SDKs do."""
DEFAULT_IDLE_TIMEOUT = 60.0
"""Seconds a stream may go without sending data (keep-alives do not count)."""
DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024
"""The largest answer accepted (32 MiB)."""
DEFAULT_MAX_RETRY_WAIT = 60.0
"""The longest ``Retry-After`` honoured; a provider asking for more fails the call."""
_MAX_REPAIRS = 2  # requests adjusted for provider quirks, per call
_BACKOFF_BASE = 0.5
_BACKOFF_MAX = 8.0


@dataclass(slots=True)
class StreamDecoder(ABC):
    """What a provider's stream has said so far; one per call.

    Attributes:
        secrets: Values to redact from the errors it raises (the API key).
        done: Whether the answer is complete (what follows is read and dropped).
    """

    secrets: list[str]
    done: bool = False

    @abstractmethod
    def feed(self, data: Mapping[str, Any]) -> list[Chunk]:
        """Take one event's JSON; return the chunks it yields now."""

    @abstractmethod
    def finish(self) -> list[Chunk]:
        """The chunks left at the end, the "finish" chunk last.

        Raises:
            APICallError: The stream ended before the answer did.
        """


class HostedModel(ABC):
    """Base of the models behind a provider's HTTP API.

    Subclasses set ``PROVIDER``, ``KEY_ENV``, ``URL_ENV``, ``DEFAULT_URL``,
    ``EXAMPLE_ID`` and ``ENDPOINT`` (and ``DONE_SENTINEL`` if the stream ends with
    one), and implement ``_auth_headers``, ``_payload`` and ``_decoder``. The key and
    base URL come from the arguments, else from the environment, read at call time; a
    missing key is an error, never a fallback.

    Args:
        model_id: The provider's model id.
        api_key: The API key (else the provider's environment variable).
        base_url: The API root (else the provider's environment variable).
        client: The client to send with (else one shared per event-loop run).
        timeout: Seconds for each phase of a request, overriding the client's timeouts.
        headers: Extra request headers (values of credential-like headers are redacted
            from errors like the key).
        max_retries: Retries of a 429, 5xx, timeout or connection failure that happens
            before the answer's first byte (default 2), with exponential backoff and
            full jitter, or the provider's ``Retry-After``; never after output streamed.
        idle_timeout: Seconds the stream may send no data (keep-alives do not count)
            before the call fails (default 60; ``None``: no limit).
        deadline: Seconds the whole call may take, retries included (``None``: no limit).
        max_response_bytes: The largest answer accepted (default 32 MiB; ``None``: no cap).
        max_retry_wait: The longest ``Retry-After`` honoured (default 60 s); a provider
            asking for more fails the call at once.

    Raises:
        ValueError: ``model_id`` is empty, or a limit is negative or not a number.
    """

    PROVIDER: ClassVar[str]
    KEY_ENV: ClassVar[str]
    URL_ENV: ClassVar[str]
    DEFAULT_URL: ClassVar[str]
    EXAMPLE_ID: ClassVar[str]
    ENDPOINT: ClassVar[str]
    """The path after the base URL that streamed calls are POSTed to."""
    DONE_SENTINEL: ClassVar[str | None] = None
    """An event's data that marks the end of the answer (OpenAI's ``[DONE]``)."""
    supports_output_schema: ClassVar[bool] = True
    """The provider is asked for structured output natively (``ModelRequest.output_schema``)."""
    KEEPALIVE_EVENTS: ClassVar[frozenset[str]] = frozenset()
    """SSE event names that only keep the connection open (they do not reset the idle
    timeout)."""

    __slots__ = ("_api_key", "_base_url", "_client", "_deadline", "_headers", "_host",
                 "_idle_timeout", "_max_response_bytes", "_max_retries", "_max_retry_wait",
                 "_model_id", "_timeout")

    def __init__(self, model_id: str, *, api_key: str | None = None,
                 base_url: str | None = None, client: httpx.AsyncClient | None = None,
                 timeout: float | None = None, headers: Mapping[str, str] | None = None,
                 max_retries: int = DEFAULT_MAX_RETRIES,
                 idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
                 deadline: float | None = None,
                 max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
                 max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT) -> None:
        name = type(self).__name__
        if not model_id:
            raise ValueError(f"{name} needs a model id, e.g. {name}({self.EXAMPLE_ID!r})")
        if not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"{name}: max_retries must be an int >= 0, got {max_retries!r}")
        for option, value in (("idle_timeout", idle_timeout), ("deadline", deadline),
                              ("max_response_bytes", max_response_bytes)):
            if value is not None and not value > 0:
                raise ValueError(f"{name}: {option} must be positive or None, got {value!r}")
        if not max_retry_wait >= 0:
            raise ValueError(f"{name}: max_retry_wait must be >= 0, got {max_retry_wait!r}")
        self._model_id = model_id
        self._host = Host(self.PROVIDER, self.DEFAULT_URL, self.KEY_ENV, self.URL_ENV)
        self._api_key = api_key
        self._base_url = base_url
        self._client = client
        self._timeout = timeout
        self._headers = dict(headers or {})
        self._max_retries = max_retries
        self._idle_timeout = idle_timeout
        self._deadline = deadline
        self._max_response_bytes = max_response_bytes
        self._max_retry_wait = max_retry_wait

    @property
    def provider(self) -> str:
        """The provider's name."""
        return self._host.name

    @property
    def model_id(self) -> str:
        """The model's id at the provider."""
        return self._model_id

    @property
    def base_url(self) -> str:
        """The API root requests go to (argument, else the environment, else the default)."""
        url = self._base_url or os.environ.get(self._host.url_env) or self._host.base_url
        return url.rstrip("/")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_id={self._model_id!r}, base_url={self.base_url!r})"

    def _key(self) -> str:
        """The API key ("" for a host that needs none and was given none)."""
        key_env = self._host.key_env
        key = (self._api_key or (key_env and os.environ.get(key_env)) or "").strip()
        if not key and key_env is not None:
            name = type(self).__name__
            raise APICallError(
                f"{key_env} is not set and no api_key was given to "
                f"{name}({self._model_id!r}); set the environment variable or pass "
                "api_key=... (use ScriptedModel to run offline)", is_retryable=False)
        return key

    def _endpoint(self) -> str:
        """The path after the base URL of this model's streamed calls (``ENDPOINT``)."""
        return self.ENDPOINT

    @abstractmethod
    def _auth_headers(self, key: str) -> dict[str, str]:
        """The headers that carry ``key`` (and the API version, if any)."""

    @abstractmethod
    def _payload(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body of a streamed call for ``request``."""

    @abstractmethod
    def _decoder(self, secrets: list[str], request: ModelRequest) -> StreamDecoder:
        """A fresh decoder for one call's events (``secrets`` to redact from errors)."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        """Stream the answer to ``request`` as chunks ending with one "finish" chunk.

        A retryable failure before the answer's first byte is retried (``max_retries``
        times, each recorded in ``request.retries`` and logged on ``procflow.models``);
        one after it never is. The "finish" chunk's usage carries the call's cost when
        the model's price is known (``procflow.models.prices``).

        Raises:
            APICallError: The key is missing, the provider rejected the call or sent
                an error event, the connection failed, the stream was malformed, cut
                short, stalled past ``idle_timeout`` or larger than
                ``max_response_bytes``, or the call passed its ``deadline``.
            ValueError: ``tool_choice`` or a setting is invalid.
        """
        key = self._key()
        secrets = [key, *secret_header_values(self._headers)]
        payload = self._payload(request)
        headers = {**self._auth_headers(key), "accept": "text/event-stream", **self._headers}
        deadline = (math.inf if self._deadline is None
                    else anyio.current_time() + self._deadline)
        attempt = 0
        repairs = 0
        while True:
            progress = StreamProgress()
            yielded = False
            try:
                async with aclosing(self._attempt(request, payload, headers, secrets,
                                                  progress, deadline)) as chunks:
                    async for chunk in chunks:
                        yielded = True
                        if isinstance(chunk, Finish) and chunk.usage is not None:
                            chunk = dataclasses.replace(chunk, usage=priced(
                                chunk.usage, f"{self.provider}/{self._model_id}"))
                        yield chunk
                return
            except APICallError as err:
                fixed = None if yielded or progress.body_bytes or repairs >= _MAX_REPAIRS \
                    else self._repair(payload, err)
                if fixed is not None:  # a provider quirk, named by its error: resend
                    repairs, payload = repairs + 1, fixed
                    request.retries.append(CallRetry(len(request.retries) + 1, 0.0,
                                                     f"{err} (request adjusted)",
                                                     err.status_code))
                    logger.info("%s/%s: resending the request adjusted after: %s",
                                self.provider, self._model_id, err)
                    continue
                delay = None if yielded or progress.body_bytes else self._retry_delay(
                    attempt, err, deadline)
                if delay is None:
                    raise
                attempt += 1
                request.retries.append(CallRetry(attempt, delay, str(err), err.status_code,
                                                 err.retry_after))
                logger.info("%s/%s: retry %d of %d in %.2fs after: %s", self.provider,
                            self._model_id, attempt, self._max_retries, delay, err)
            await anyio.sleep(delay)

    def _repair(self, payload: dict[str, Any], err: APICallError) -> dict[str, Any] | None:
        """The payload adjusted for a provider quirk ``err`` names (its own error text),
        to send once more; ``None`` (the default) when the error is no known quirk."""
        return None

    def _retry_delay(self, attempt: int, err: APICallError, deadline: float) -> float | None:
        """Seconds to wait before retrying after ``err``, or ``None`` for no retry."""
        if not err.is_retryable or attempt >= self._max_retries:
            return None
        if err.retry_after is not None:
            if err.retry_after > self._max_retry_wait:
                return None
            delay = err.retry_after
        else:  # exponential backoff with full jitter
            delay = random.uniform(0.0, min(_BACKOFF_MAX, _BACKOFF_BASE * 2 ** attempt))
        if anyio.current_time() + delay >= deadline:
            return None
        return delay

    async def _attempt(self, request: ModelRequest, payload: dict[str, Any],
                       headers: dict[str, str],
                       secrets: list[str], progress: StreamProgress,
                       deadline: float) -> AsyncGenerator[Chunk, None]:
        """One try of the streamed call."""
        decoder = self._decoder(secrets, request)
        sentinel = self.DONE_SENTINEL
        keepalive = self.KEEPALIVE_EVENTS
        idle = math.inf if self._idle_timeout is None else self._idle_timeout
        events = post_event_stream(
            self._client or shared_client(), f"{self.base_url}{self._endpoint()}",
            provider=self.provider, headers=headers, payload=payload, secrets=secrets,
            request_timeout=self._timeout, max_bytes=self._max_response_bytes,
            progress=progress)
        async with aclosing(events):
            try:
                stalled_since = math.inf
                while True:
                    if stalled_since == math.inf:  # data came: the idle clock restarts
                        stalled_since = anyio.current_time()
                    with anyio.CancelScope(deadline=min(stalled_since + idle,
                                                        deadline)) as scope:
                        event = await anext(events, None)
                    if scope.cancelled_caught:
                        raise self._timed_out(deadline)
                    if event is None:
                        break
                    if event.event not in keepalive:
                        stalled_since = math.inf
                    # Once the answer is complete the rest is read and dropped, so the
                    # connection can be reused (as the providers' SDKs do).
                    if decoder.done:
                        continue
                    if sentinel is not None and event.data.strip() == sentinel:
                        decoder.done = True
                        continue
                    data = parse_json_event(event, provider=self.provider, secrets=secrets)
                    for chunk in decoder.feed(data):
                        yield chunk
            except APICallError:
                if not decoder.done:
                    raise
        for chunk in decoder.finish():
            yield chunk

    def _timed_out(self, deadline: float) -> APICallError:
        if anyio.current_time() >= deadline:
            return APICallError(f"the call to {self.provider} did not finish within its "
                                f"deadline of {self._deadline}s", is_retryable=False)
        return APICallError(
            f"{self.provider} sent no data for {self._idle_timeout}s: the stream stalled "
            "(idle_timeout)", is_retryable=True)
