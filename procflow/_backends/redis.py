"""A ``redis.asyncio`` client for procflow's Redis backends, set up and owned in one place.

What every Redis-backed store, cache and ledger shares:

- **Credentials never shown.** ``redact_url`` gives the URL without user, password or
  query; ``url_secrets`` lists the password forms to ``scrub`` from any message.
- **Ownership.** A client made from a URL is closed by ``aclose()``; a client the caller
  passed in stays open (the caller made it, the caller closes it).
- **Fast failure.** A connect timeout always (an unreachable server fails in seconds,
  not at the OS's TCP timeout) and an optional per-command timeout and retry count.
  A connection error is retried (redis-py's backoff), a timeout never: a frozen server
  (SIGSTOP, a full network buffer) costs one timeout, not four. After a timeout the
  server counts as unresponsive for ``QUIET`` seconds: commands fail at once meanwhile,
  so the cleanup after a failed write (the run's status, its trace, its lease) does not
  wait out one timeout per command.
- **One error type.** ``translate()`` turns redis and socket errors into
  ``StorageError`` naming the backend, the server and the operation.

This module imports ``redis``: only the Redis backends import it, on first use.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final, final
from urllib.parse import unquote, urlsplit, urlunsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff, NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from procflow.errors import StorageError

__all__ = [
    "CONNECT_TIMEOUT",
    "OPERATION_TIMEOUT",
    "QUIET",
    "RedisConnection",
    "describe_client",
    "escape_key",
    "redact_url",
    "scrub",
    "url_secrets",
]

CONNECT_TIMEOUT: Final = 5.0
"""Seconds to wait for a connection unless a backend asks for less."""

OPERATION_TIMEOUT: Final = 5.0
"""Seconds a storage or memory command waits for the server's reply by default."""

QUIET: Final = 2.0
"""Seconds after a timed-out command during which commands fail without being sent."""

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
        retries: How many times a command is retried after a connection error, at once
            (``None``: 3 times, backing off from 0.1 s to 1 s); never after a timeout.

    Raises:
        StorageError: ``url`` is not a valid Redis URL (the password not shown).
    """

    __slots__ = ("_client", "_display", "_name", "_owns_client", "_secrets", "_silent_until")

    def __init__(self, url: str, *, client: aioredis.Redis | None = None, name: str,
                 connect_timeout: float = CONNECT_TIMEOUT, timeout: float | None = None,
                 retries: int | None = None) -> None:
        self._name = name
        self._silent_until = 0.0
        self._secrets = url_secrets(url) if client is None else []
        if client is None:
            self._display = redact_url(url)
            options: dict[str, Any] = {"socket_connect_timeout": connect_timeout,
                                       "socket_timeout": timeout}
            # Connection errors only: a timed-out command is not sent again.
            options["retry"] = (
                Retry(ExponentialWithJitterBackoff(base=0.1, cap=1.0), 3,
                      supported_errors=(RedisConnectionError,)) if retries is None
                else Retry(NoBackoff(), retries, supported_errors=(RedisConnectionError,)))
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
    def translate(self, operation: str, *, gate: bool = True) -> Iterator[None]:
        """Turn redis and socket errors raised inside into ``StorageError``.

        Args:
            operation: What is being done, for the message (``"reading key 'k'"``).
            gate: Fail at once while the server counts as unresponsive (see ``QUIET``).
        """
        if gate and self._silent_until and time.monotonic() < self._silent_until:
            raise StorageError(f"{self._name} at {self._display}: {operation} failed: the "
                               f"server did not answer in time a moment ago (not tried "
                               f"again for {QUIET:g} s)")
        try:
            yield
        except (RedisError, OSError) as exc:
            if isinstance(exc, RedisTimeoutError | TimeoutError):
                self._silent_until = time.monotonic() + QUIET
            detail = self.scrub(str(exc)) or type(exc).__name__
            raise StorageError(f"{self._name} at {self._display}: {operation} failed: "
                               f"{detail}") from exc

    async def aclose(self) -> None:
        """Close the connection pool if it was made here; a given client stays open."""
        if self._owns_client:
            with self.translate("closing", gate=False):
                await self._client.aclose()
