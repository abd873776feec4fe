"""A Dramatiq Redis broker whose idle workers wake when a message is sent.

Dramatiq's Redis consumer polls: an idle worker fetches, finds nothing and sleeps a
growing pause (up to the worker timeout) before fetching again, so a message sent to an
idle pool waits for the next poll (12 ms on average with a 50 ms pause, more than half
of a 10-step run's submit-to-result time). Here every message sent to a queue also
pushes a token onto a small list beside it, and an idle consumer waits on that list with
``BLPOP`` instead of sleeping: it fetches as soon as a token arrives, and at least once
per worker timeout otherwise (``--idle-poll``: a message sent by a producer that pushes
no token, such as plain Dramatiq, waits no longer than before). Dramatiq's queues, acks
and recovery are unchanged (a token is only a hint; a spare one costs one empty fetch).
Delay queues keep Dramatiq's polling: their consumer also fires the delayed messages
that fall due.

This module imports ``dramatiq``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Final

import redis

from procflow._extras import needs

with needs("dramatiq", feature="procflow.workers"):
    from dramatiq import Message
    from dramatiq.broker import Consumer, MessageProxy
    from dramatiq.brokers.redis import RedisBroker, _RedisConsumer
    from dramatiq.errors import ConnectionClosed

__all__ = ["WakingRedisBroker", "wake_key"]

_WAKE_CAP: Final = 256
"""Most tokens kept: enough to wake every idle consumer of a large pool at once."""


def wake_key(namespace: str, queue_name: str) -> str:
    """The list of wake-up tokens of a queue."""
    return f"{namespace}:{queue_name}.wake"


class WakingRedisBroker(RedisBroker):
    """``RedisBroker`` whose sends wake an idle consumer of the queue at once."""

    def enqueue(self, message: Message[Any], *, delay: int | None = None) -> Message[Any]:
        """Send ``message`` (see ``RedisBroker.enqueue``), then wake a consumer."""
        return self.enqueue_many([message], delay=delay)[0]

    def enqueue_many(self, messages: Sequence[Message[Any]], *,
                     delay: int | None = None) -> list[Message[Any]]:
        """Send ``messages`` one by one and wake as many consumers of their queues: one
        push of tokens after the first message (an idle consumer starts at once), one
        after the rest, not one per message."""
        sent: list[Message[Any]] = []
        for batch in (messages[:1], messages[1:]):
            done = [super(WakingRedisBroker, self).enqueue(message, delay=delay)
                    for message in batch]
            if delay is None and done:
                self._wake(Counter(message.queue_name for message in done))
            sent.extend(done)
        return sent

    def _wake(self, queues: Counter[str]) -> None:
        """Push a token per message sent to each queue (at most ``_WAKE_CAP``)."""
        with self.client.pipeline(transaction=False) as pipe:
            for queue_name, count in queues.items():
                key = wake_key(self.namespace, queue_name)
                pipe.lpush(key, *[1] * min(count, _WAKE_CAP))
                pipe.ltrim(key, 0, _WAKE_CAP - 1)
            pipe.execute()

    def close(self) -> None:
        """Close the broker and its Redis connections. (Dramatiq's ``RedisBroker`` closes
        nothing: its connections were left for the garbage collector, which redis-py
        8.2 reports as unclosed sockets.)"""
        super().close()
        self.client.connection_pool.disconnect()

    def consume(self, queue_name: str, prefetch: int = 1, timeout: int = 5000) -> Consumer:
        """A consumer of ``queue_name`` (waking on tokens unless it is a delay queue)."""
        if queue_name.endswith(".DQ"):
            consumer: Consumer = super().consume(queue_name, prefetch, timeout)
            return consumer
        return _WakingConsumer(self, queue_name, prefetch, timeout)


class _WakingConsumer(_RedisConsumer):
    """``_RedisConsumer`` that waits for a token instead of sleeping when idle."""

    def __init__(self, broker: WakingRedisBroker, queue_name: str, prefetch: int,
                 timeout: int) -> None:
        super().__init__(broker, queue_name, prefetch, timeout)  # type: ignore[no-untyped-call]
        self.wake = wake_key(broker.namespace, queue_name)

    def __next__(self) -> MessageProxy | None:
        """The next fetched message, or ``None`` after an idle wait."""
        if self.message_cache or self.outstanding_message_count >= self.prefetch:
            # A cached message, or (prefetch full) Dramatiq's idle pause.
            proxy: MessageProxy | None = super().__next__()  # type: ignore[no-untyped-call]
            return proxy
        try:
            self.message_cache = self.broker.do_fetch(
                self.queue_name, self.prefetch - self.outstanding_message_count)
            if self.message_cache:
                proxy = super().__next__()  # type: ignore[no-untyped-call]
                return proxy
            self.broker.client.blpop([self.wake], timeout=self.timeout / 1000)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise ConnectionClosed(exc) from None  # type: ignore[no-untyped-call]
        return None
