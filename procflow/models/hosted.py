"""``HostedModel``: what the HTTP-backed models share (id, key and base URL resolution)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import ClassVar

import httpx

from procflow.errors import APICallError

__all__ = ["HostedModel"]


class HostedModel:
    """Base of the models behind a provider's HTTP API.

    Subclasses set ``PROVIDER``, ``KEY_ENV``, ``URL_ENV``, ``DEFAULT_URL`` and
    ``EXAMPLE_ID``. The key and base URL come from the arguments, else from the
    environment, read at call time; a missing key is an error, never a fallback.
    """

    PROVIDER: ClassVar[str]
    KEY_ENV: ClassVar[str]
    URL_ENV: ClassVar[str]
    DEFAULT_URL: ClassVar[str]
    EXAMPLE_ID: ClassVar[str]

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
