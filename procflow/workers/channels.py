"""Redis pub/sub without a new connection per run.

- ``CancelListener``: one pattern subscription per worker process, on a thread of its
  own, that cancels the runs this process executes when another process asks (a run
  used to open, subscribe and close a connection of its own);
- ``Subscriptions``: reusable ``redis.asyncio`` pub/sub connections for waiting on one
  channel at a time (a wait that ends normally gives its connection back).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.from_thread
import anyio.lowlevel
import redis

from procflow._backends.deadline import shielded
from procflow._backends.redis import RedisConnection

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from redis.asyncio.client import PubSub

__all__ = ["CancelListener", "Subscriptions", "glob_escape"]

_log = logging.getLogger("procflow.workers")
_SUBSCRIBE_WAIT: Final = 10.0
_KEEP: Final = 16
"""Idle pub/sub connections ``Subscriptions`` keeps."""


class CancelListener:
    """Cancels this process's runs on request, from one ``PSUBSCRIBE`` on a thread.

    Args:
        url: The Redis server.
        pattern: The channel pattern (``{prefix}:cancel:*``); a message on a channel
            ``watch``ed here cancels that run.

    Raises:
        redis.RedisError: The subscription could not be made.
    """

    def __init__(self, url: str, pattern: str) -> None:
        self._watched: dict[bytes, tuple[Callable[[], None], Any]] = {}
        self._lock = threading.Lock()
        self._client = redis.Redis.from_url(url)
        # through ``Any``: redis-py types ``pubsub`` from 8.2 on, not before
        client: Any = self._client
        pubsub = client.pubsub()
        pubsub.psubscribe(**{pattern: self._on_message})
        # Wait for the confirmation: a request published afterwards is surely seen.
        deadline = time.monotonic() + _SUBSCRIBE_WAIT
        while True:
            message = pubsub.get_message(timeout=max(0.0, deadline - time.monotonic()))
            if message is not None and message["type"] == "psubscribe":
                break
            if time.monotonic() >= deadline:
                raise redis.ConnectionError(f"no confirmation of the subscription to {pattern}")
        self._thread = pubsub.run_in_thread(sleep_time=1.0, daemon=True)

    @contextmanager
    def watch(self, channel: str, cancel: Callable[[], None]) -> Iterator[None]:
        """Call ``cancel`` (in the calling event loop) when ``channel`` gets a message
        while inside the block."""
        key = channel.encode()
        with self._lock:
            self._watched[key] = (cancel, anyio.lowlevel.current_token())
        try:
            yield
        finally:
            with self._lock:
                self._watched.pop(key, None)

    def _on_message(self, message: dict[str, Any]) -> None:
        with self._lock:
            entry = self._watched.get(message["channel"])
        if entry is None:
            return
        cancel, token = entry
        try:
            anyio.from_thread.run_sync(cancel, token=token)
        except Exception:  # the run's event loop is gone: nothing left to cancel
            _log.debug("cancel request for %r not delivered", message["channel"],
                       exc_info=True)

    def close(self) -> None:
        """Stop the thread and close the connection."""
        self._thread.stop()
        self._thread.join(timeout=5)
        self._client.close()


class Subscriptions:
    """Pub/sub connections reused for one-channel waits (``redis.asyncio``)."""

    def __init__(self, connection: RedisConnection) -> None:
        self._connection = connection
        self._idle: list[PubSub] = []

    @asynccontextmanager
    async def subscribe(self, channel: str) -> AsyncIterator[Callable[[float], Any]]:
        """Subscribe to ``channel``; yield ``next_message(seconds)``, which returns the
        next message of the channel (its data) or ``None`` after ``seconds``.

        ``next_message`` times out on its own rather than being cancelled: a
        cancellation in the middle of a reply would leave the connection unusable, so a
        block left by an exception or a cancellation closes the connection; otherwise it
        is unsubscribed and kept for reuse.
        """
        pubsub = self._idle.pop() if self._idle else self._connection.client.pubsub()
        name = channel.encode()

        async def next_message(seconds: float) -> Any:
            deadline = anyio.current_time() + seconds
            while (left := deadline - anyio.current_time()) > 0:
                message = await pubsub.get_message(ignore_subscribe_messages=True,
                                                   timeout=left)
                if message is not None and message["channel"] == name:
                    return message["data"]
            return None

        try:
            with self._connection.translate(f"subscribing to {channel}"):
                await pubsub.subscribe(channel)
            yield next_message
            with self._connection.translate(f"unsubscribing from {channel}"):
                await pubsub.unsubscribe(channel)
        except BaseException:
            with shielded(f"closing the subscription to {channel}"):
                await _close(pubsub)
            raise
        if len(self._idle) < _KEEP:
            self._idle.append(pubsub)
        else:
            await _close(pubsub)

    async def aclose(self) -> None:
        """Close the idle connections."""
        idle, self._idle = self._idle, []
        for pubsub in idle:
            await _close(pubsub)


async def _close(pubsub: PubSub) -> None:
    """Close ``pubsub``. Called through ``Any``: redis-py types ``PubSub.aclose`` from
    8.2 on and not before, so a ``type: ignore`` would be wrong on one of them."""
    closer: Any = pubsub
    await closer.aclose()


def glob_escape(text: str) -> str:
    """``text`` with the glob characters of a Redis pattern escaped."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)
