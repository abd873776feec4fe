"""Embedders: ``HashEmbedder`` (local, deterministic, no download) and ``OpenAIEmbedder``
(an OpenAI-compatible ``/embeddings`` endpoint over httpx)."""

from __future__ import annotations

import hashlib
import math
import os
import random
import re
import time
from collections.abc import Sequence
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, Final, final

import anyio

from procflow.errors import APICallError

if TYPE_CHECKING:
    import httpx

__all__ = ["HashEmbedder", "OpenAIEmbedder", "retry_after"]

_WORDS: Final = re.compile(r"\w+", re.UNICODE)
_STOPWORDS: Final = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "can", "do", "does", "did", "for",
    "from", "has", "have", "how", "i", "in", "is", "it", "its", "me", "my", "of", "on", "or",
    "our", "so", "that", "the", "their", "them", "there", "these", "this", "to", "was", "we",
    "were", "what", "when", "where", "which", "who", "why", "will", "with", "you", "your",
})


@final
class HashEmbedder:
    """Hashed bag of words and character trigrams, in a fixed-size unit vector.

    The same text always gives the same vector, in every process (the hash is
    BLAKE2b, not Python's salted ``hash``). Common English stopwords are skipped
    unless a text has nothing else. Texts sharing words or word pieces come out close;
    it knows nothing of synonyms, so use a model embedder for real semantic recall.

    Args:
        dimensions: The vector size (default 256).

    Attributes:
        name: Names its embedding space (with the size) where vectors are stored.
        cacheable: ``False``: embedding is cheaper than a cache lookup.
    """

    name: Final = "procflow-hash-v1"
    cacheable: Final = False

    def __init__(self, *, dimensions: int = 256) -> None:
        if not isinstance(dimensions, int) or dimensions < 8:
            raise ValueError(f"dimensions must be an int >= 8, got {dimensions!r}")
        self.dimensions = dimensions

    def __repr__(self) -> str:
        return f"HashEmbedder(dimensions={self.dimensions})"

    def embed_one(self, text: str) -> list[float]:
        """The unit vector of one text."""
        words = [w.lower() for w in _WORDS.findall(text)]
        kept = [w for w in words if w not in _STOPWORDS] or words or [text]
        vector = [0.0] * self.dimensions
        for word in kept:
            vector[self._bucket("w:" + word)] += 1.0
            padded = f"#{word}#"
            for i in range(len(padded) - 2):
                vector[self._bucket("c:" + padded[i:i + 3])] += 0.5
        norm = math.sqrt(math.fsum(x * x for x in vector))
        return [x / norm for x in vector]

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text."""
        return [self.embed_one(text) for text in texts]

    def _bucket(self, token: str) -> int:
        digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
        return int.from_bytes(digest, "big") % self.dimensions


@final
class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible ``POST {base_url}/embeddings`` endpoint.

    The key and base URL come from the arguments, else from ``OPENAI_API_KEY`` and
    ``OPENAI_BASE_URL`` (default ``https://api.openai.com/v1``), read at call time. No
    error message contains the key.

    Texts are sent ``batch_size`` at a time. A request that fails with 408, 409, 429 or
    5xx, a timeout or a connection error is retried up to ``max_retries`` times, with
    exponential backoff and full jitter, waiting at least what a ``Retry-After`` header
    asks (capped at ``max_delay``). Under ``Memory``, embeddings are also cached in the
    store by content hash, so re-indexing costs one request per distinct text.

    Args:
        model: The embedding model, e.g. ``"text-embedding-3-small"``.
        api_key: The API key (else ``OPENAI_API_KEY``).
        base_url: The API root, e.g. ``"http://localhost:8000/v1"``.
        dimensions: Ask the provider for vectors of this size (when it supports it).
        batch_size: Texts per request.
        max_retries: Retries of one request after a retryable failure.
        backoff: The first retry's delay bound, in seconds (doubling each time).
        max_delay: The longest wait between two attempts, in seconds.
        client: An ``httpx.AsyncClient`` to send with (default: procflow's shared one).

    Attributes:
        name: Names its embedding space (``"openai:<model>"``, plus the requested size).
    """

    KEY_ENV: Final = "OPENAI_API_KEY"
    URL_ENV: Final = "OPENAI_BASE_URL"
    DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"

    def __init__(self, model: str = "text-embedding-3-small", *, api_key: str | None = None,
                 base_url: str | None = None, dimensions: int | None = None,
                 batch_size: int = 256, max_retries: int = 4, backoff: float = 0.5,
                 max_delay: float = 30.0, client: httpx.AsyncClient | None = None) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if max_retries < 0 or backoff < 0 or max_delay < 0:
            raise ValueError(f"max_retries, backoff and max_delay must be >= 0, got "
                             f"{max_retries}, {backoff}, {max_delay}")
        self.model = model
        self.dimensions = dimensions
        self.batch_size = batch_size
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_delay = max_delay
        self.name = f"openai:{model}" + ("" if dimensions is None else f":{dimensions}")
        self._api_key = api_key
        self._base_url = base_url
        self._client = client

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def base_url(self) -> str:
        """The API root in use (argument, else ``OPENAI_BASE_URL``, else OpenAI's)."""
        return (self._base_url or os.environ.get(self.URL_ENV)
                or self.DEFAULT_BASE_URL).rstrip("/")

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order.

        Raises:
            APICallError: No key is configured, the endpoint failed or rejected the
                request, or the answer is not a list of embeddings (key redacted).
        """
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            out += await self._retrying(list(texts[start:start + self.batch_size]))
        return out

    async def _retrying(self, texts: list[str]) -> list[list[float]]:
        attempt = 0
        while True:
            try:
                return await self._batch(texts)
            except _Retry as retry:
                if attempt >= self.max_retries:
                    raise retry.error from None
                bound = min(self.max_delay, self.backoff * 2 ** attempt)
                wait = max(random.uniform(0, bound), min(retry.after, self.max_delay))
                attempt += 1
                await anyio.sleep(wait)

    async def _batch(self, texts: list[str]) -> list[list[float]]:
        import httpx

        from procflow.models.http import (
            DEFAULT_TIMEOUT,
            redact,
            shared_client,
            status_error,
            translate_error,
        )

        key = self._api_key or os.environ.get(self.KEY_ENV)
        if not key:
            raise APICallError(f"no API key for the embedder: pass api_key= to "
                               f"OpenAIEmbedder or set {self.KEY_ENV}")
        payload: dict[str, Any] = {"model": self.model, "input": texts}
        if self.dimensions is not None:
            payload["dimensions"] = self.dimensions
        client = self._client or shared_client()
        url = f"{self.base_url}/embeddings"
        try:
            response = await client.post(url, json=payload,
                                         headers={"authorization": f"Bearer {key}"})
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            error = translate_error(exc, provider="openai embeddings", secrets=[key],
                                    timeout=DEFAULT_TIMEOUT)
            if error.is_retryable:
                raise _Retry(error, 0.0) from None
            raise error from None
        if response.status_code >= 400:
            error = status_error("openai embeddings", response.status_code, response.text,
                                 [key])
            if error.is_retryable:
                raise _Retry(error, retry_after(response.headers.get("retry-after")))
            raise error
        try:
            data = response.json()["data"]
            vectors = [[float(x) for x in item["embedding"]]
                       for item in sorted(data, key=lambda item: item.get("index", 0))]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            body = redact(response.text[:500], [key])
            raise APICallError(f"openai embeddings answered with no list of embeddings "
                               f"({type(exc).__name__}): {body!r}", body=body) from None
        if len(vectors) != len(texts):
            raise APICallError(f"openai embeddings returned {len(vectors)} vectors for "
                               f"{len(texts)} texts")
        return vectors


class _Retry(Exception):
    """A retryable failure of one request, with the server's requested wait."""

    def __init__(self, error: APICallError, after: float) -> None:
        super().__init__(str(error))
        self.error = error
        self.after = after


def retry_after(value: str | None) -> float:
    """Seconds a ``Retry-After`` header asks to wait (delta-seconds or an HTTP date; 0.0
    when absent or unreadable)."""
    if not value:
        return 0.0
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return 0.0
    return max(0.0, moment.timestamp() - time.time())
