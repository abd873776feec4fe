"""A ``redis.asyncio`` client for procflow's Redis backends, set up and owned in one place.

What every Redis-backed store, cache and ledger shares:

- **Credentials never shown.** ``redact_url`` gives the URL without user, password or
  query; ``url_secrets`` lists the password forms to ``scrub`` from any message.
- **Ownership.** A client made from a URL is closed by ``aclose()``; a client the caller
  passed in stays open (the caller made it, the caller closes it).
- **Fast failure.** A connect timeout always (an unreachable server fails in seconds,
  not at the OS's TCP timeout) and an optional per-command timeout and retry count.
- **One error type.** ``translate()`` turns redis and socket errors into
  ``StorageError`` naming the backend, the server and the operation.

This module imports ``redis``: only the Redis backends import it, on first use.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final, final
from urllib.parse import unquote, urlsplit, urlunsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from procflow.errors import StorageError

__all__ = [
    "CONNECT_TIMEOUT",
    "RedisConnection",
    "describe_client",
    "escape_key",
    "redact_url",
    "scrub",
    "url_secrets",
]

CONNECT_TIMEOUT: Final = 5.0
"""Seconds to wait for a connection unless a backend asks for less."""

_HIDDEN: Final = "***"
_EXAMPLE_URL: Final = "redis://127.0.0.1:6379/0"


def redact_url(url: str) -> str:
    """``url`` without user name, password or query string, for messages."""
    try:
        parts = urlsplit(url)
    except (ValueError, TypeError):
        return "<invalid Redis URL>"
    host = parts.netloc.rpartition("@")[2]
    if not parts.scheme:
        return urlunsplit(("", host, parts.path, "", ""))
    return f"{parts.scheme}://{host}{parts.path}"  # keeps ``unix:///path``


def url_secrets(url: str) -> list[str]:
    """The password forms in ``url`` (raw and unquoted, from the user info and from a
    ``?password=`` query item), longest first, to scrub from messages."""
    try:
        parts = urlsplit(url)
        found = [parts.password or ""]
    except (ValueError, TypeError):
        return []
    for item in parts.query.split("&"):
        name, _, value = item.partition("=")
        if name == "password":
            found.append(value)
    forms = {form for secret in found if secret for form in (secret, unquote(secret))}
    return sorted(forms, key=len, reverse=True)


def scrub(text: str, secrets: list[str]) -> str:
    """``text`` with every secret replaced by ``***``."""
    for secret in secrets:
        text = text.replace(secret, _HIDDEN)
    return text


def describe_client(client: aioredis.Redis) -> str:
    """Where a caller-provided client points (``redis://host:port/db``), no credentials."""
    try:
        options = client.connection_pool.connection_kwargs
        host = options.get("path") or f"{options.get('host', '?')}:{options.get('port', '?')}"
        return f"redis://{host}/{options.get('db', 0)}"
    except Exception:  # an unusual pool: describe it vaguely rather than fail
        return "a caller-provided Redis client"


def escape_key(identifier: str) -> str:
    """``identifier`` with ``%`` and ``:`` escaped, so ids cannot make two keys collide."""
    return identifier.replace("%", "%25").replace(":", "%3A")


@final
class RedisConnection:
    """A ``redis.asyncio.Redis`` with its owner, its display name and error translation.

    Args:
        url: The server, e.g. ``"redis://:password@host:6379/0"`` (ignored if ``client``).
        client: A client to use instead of connecting to ``url``; ``aclose()`` leaves it
            open.
        name: The backend, for messages (e.g. ``"Redis storage"``).
        connect_timeout: Seconds to wait for a connection.
        timeout: Seconds to wait for a reply; ``None``: no limit.
        retries: How many times a command is retried after a connection error
            (``None``: redis-py's default).

    Raises:
        StorageError: ``url`` is not a valid Redis URL (the password not shown).
    """

    __slots__ = ("_client", "_display", "_name", "_owns_client", "_secrets")

    def __init__(self, url: str, *, client: aioredis.Redis | None = None, name: str,
                 connect_timeout: float = CONNECT_TIMEOUT, timeout: float | None = None,
                 retries: int | None = None) -> None:
        self._name = name
        self._secrets = url_secrets(url) if client is None else []
        if client is None:
            self._display = redact_url(url)
            options: dict[str, Any] = {"socket_connect_timeout": connect_timeout,
                                       "socket_timeout": timeout}
            if retries is not None:
                options["retry"] = Retry(NoBackoff(), retries)
            try:
                client = aioredis.Redis.from_url(url, **options)
            except (ValueError, TypeError) as exc:
                raise StorageError(f"{name}: invalid Redis URL {self._display!r}: "
                                   f"{self.scrub(str(exc))}; expected e.g. "
                                   f"{_EXAMPLE_URL!r}") from None
            self._owns_client = True
        else:
            self._display = describe_client(client)
            self._owns_client = False
        self._client = client

    @property
    def client(self) -> aioredis.Redis:
        """The client."""
        return self._client

    @property
    def display(self) -> str:
        """The server, without credentials, for messages and ``repr``."""
        return self._display

    @property
    def owns_client(self) -> bool:
        """Whether ``aclose()`` closes the client (it was made here from the URL)."""
        return self._owns_client

    def scrub(self, text: str) -> str:
        """``text`` with the URL's password forms replaced by ``***``."""
        return scrub(text, self._secrets)

    @contextmanager
    def translate(self, operation: str) -> Iterator[None]:
        """Turn redis and socket errors raised inside into ``StorageError``.

        Args:
            operation: What is being done, for the message (``"reading key 'k'"``).
        """
        try:
            yield
        except (RedisError, OSError) as exc:
            detail = self.scrub(str(exc)) or type(exc).__name__
            raise StorageError(f"{self._name} at {self._display}: {operation} failed: "
                               f"{detail}") from exc

    async def aclose(self) -> None:
        """Close the connection pool if it was made here; a given client stays open."""
        if self._owns_client:
            with self.translate("closing"):
                await self._client.aclose()
