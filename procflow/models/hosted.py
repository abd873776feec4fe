"""``HostedModel``: what the HTTP-backed models share.

The id, key and base URL resolution, and the streamed call itself: POST the payload,
read the server-sent events, hand each event's JSON to the provider's decoder, and end
with the decoder's final chunks. A provider module says only what differs: its auth
headers, its payload and how it decodes its events.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, ClassVar

import httpx

from procflow.errors import APICallError
from procflow.messages import Chunk
from procflow.models.base import ModelRequest
from procflow.models.http import (
    parse_json_event,
    post_event_stream,
    secret_header_values,
    shared_client,
)

__all__ = ["HostedModel", "StreamDecoder"]


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

    __slots__ = ("_api_key", "_base_url", "_client", "_headers", "_model_id", "_timeout")

    def __init__(self, model_id: str, *, api_key: str | None = None,
                 base_url: str | None = None, client: httpx.AsyncClient | None = None,
                 timeout: float | None = None, headers: Mapping[str, str] | None = None) -> None:
        name = type(self).__name__
        if not model_id:
            raise ValueError(f"{name} needs a model id, e.g. {name}({self.EXAMPLE_ID!r})")
        self._model_id = model_id
        self._api_key = api_key
        self._base_url = base_url
        self._client = client
        self._timeout = timeout
        self._headers = dict(headers or {})

    @property
    def provider(self) -> str:
        """The provider's name."""
        return self.PROVIDER

    @property
    def model_id(self) -> str:
        """The model's id at the provider."""
        return self._model_id

    @property
    def base_url(self) -> str:
        """The API root requests go to (argument, else the environment, else the default)."""
        url = self._base_url or os.environ.get(self.URL_ENV) or self.DEFAULT_URL
        return url.rstrip("/")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_id={self._model_id!r}, base_url={self.base_url!r})"

    def _key(self) -> str:
        key = (self._api_key or os.environ.get(self.KEY_ENV) or "").strip()
        if not key:
            name = type(self).__name__
            raise APICallError(
                f"{self.KEY_ENV} is not set and no api_key was given to "
                f"{name}({self._model_id!r}); set the environment variable or pass "
                "api_key=... (use ScriptedModel to run offline)", is_retryable=False)
        return key

    @abstractmethod
    def _auth_headers(self, key: str) -> dict[str, str]:
        """The headers that carry ``key`` (and the API version, if any)."""

    @abstractmethod
    def _payload(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body of a streamed call for ``request``."""

    @abstractmethod
    def _decoder(self, secrets: list[str]) -> StreamDecoder:
        """A fresh decoder for one call's events (``secrets`` to redact from errors)."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        """Stream the answer to ``request`` as chunks ending with one "finish" chunk.

        Raises:
            APICallError: The key is missing, the provider rejected the call or sent
                an error event, the connection failed or the stream was malformed or
                cut short.
            ValueError: ``tool_choice`` or a setting is invalid.
        """
        key = self._key()
        secrets = [key, *secret_header_values(self._headers)]
        payload = self._payload(request)
        headers = {**self._auth_headers(key), "accept": "text/event-stream", **self._headers}
        decoder = self._decoder(secrets)
        sentinel = self.DONE_SENTINEL
        events = post_event_stream(
            self._client or shared_client(), f"{self.base_url}{self.ENDPOINT}",
            provider=self.PROVIDER, headers=headers, payload=payload, secrets=secrets,
            request_timeout=self._timeout)
        async with aclosing(events):
            try:
                async for event in events:
                    # Once the answer is complete the rest is read and dropped, so the
                    # connection can be reused (as the providers' SDKs do).
                    if decoder.done:
                        continue
                    if sentinel is not None and event.data.strip() == sentinel:
                        decoder.done = True
                        continue
                    data = parse_json_event(event, provider=self.PROVIDER, secrets=secrets)
                    for chunk in decoder.feed(data):
                        yield chunk
            except APICallError:
                if not decoder.done:
                    raise
        for chunk in decoder.finish():
            yield chunk
