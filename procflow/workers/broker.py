"""The Dramatiq side: a Redis broker with procflow's safe settings, and its messages.

Two actors make up the protocol, both on ``WorkerSettings.queue``:

- ``procflow_run(workflow_id, run_id[, step, resume_data])``: execute (start, continue,
  resume or finish) a stored run;
- ``procflow_job(workflow_id, run_id, join, total, unit_path, path, data[, reads])``:
  run one item or branch of a distributed fan-out (``reads``: the paths of the stored
  results it may read).

Messages carry ids only (and a job's JSON input): the run's state is in ``RedisStorage``,
the source of truth, so a message delivered twice does no harm. Beside the queues and
``RedisStorage``'s keys (a fan-out's finished jobs among them), workers use two kinds
of keys under the storage prefix::

    {prefix}:settled:{run_id}    channel  published when a run settles
    {prefix}:cancel:{run_id}     string   + channel: cancel requested

This module imports ``dramatiq``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import anyio.to_thread
import redis

from procflow._backends.redis import escape_key
from procflow._extras import needs
from procflow.workers.settings import WorkerSettings
from procflow.workers.waking import WakingRedisBroker

with needs("dramatiq", feature="procflow.workers"):
    import dramatiq
    from dramatiq.brokers.redis import RedisBroker
    from dramatiq.middleware import (
        AgeLimit,
        AsyncIO,
        Callbacks,
        CurrentMessage,
        Pipelines,
        Retries,
        ShutdownNotifications,
        TimeLimit,
    )

__all__ = [
    "JOB_ACTOR",
    "RUN_ACTOR",
    "cancel_key",
    "enqueue",
    "job_message",
    "make_broker",
    "run_message",
    "settled_channel",
]

RUN_ACTOR: Final = "procflow_run"
JOB_ACTOR: Final = "procflow_job"
_MAINTENANCE_SCALE: Final = 1_000_000  # Dramatiq's maintenance chance is per million
BROKER_CONNECT_TIMEOUT: Final = 5.0
"""Seconds the broker waits for a connection to Redis."""
BROKER_TIMEOUT: Final = 30.0
"""Seconds the broker waits for a reply: well above a consumer's idle wait (BLPOP of
about a second), so only a frozen or unreachable server reaches it."""


def make_broker(settings: WorkerSettings) -> RedisBroker:
    """A Redis broker with heartbeat recovery, maintenance and retries as ``settings`` say.

    The middleware is Dramatiq's default set without Prometheus, with ``AsyncIO`` (the
    actors are ``async def``) and ``CurrentMessage``. An idle worker wakes as soon as a
    message is sent (``WakingRedisBroker``) instead of at its next poll. Its connections
    have a connect timeout (``BROKER_CONNECT_TIMEOUT``) and a reply timeout
    (``BROKER_TIMEOUT``): a frozen server fails a send instead of hanging it.
    """
    pool = redis.ConnectionPool.from_url(settings.redis_url,
                                         socket_connect_timeout=BROKER_CONNECT_TIMEOUT,
                                         socket_timeout=BROKER_TIMEOUT)
    return WakingRedisBroker(  # type: ignore[no-untyped-call]  # untyped in dramatiq
        connection_pool=pool, namespace=settings.namespace,
        heartbeat_timeout=round(settings.heartbeat_timeout * 1000),
        maintenance_chance=max(1, round(settings.maintenance_chance * _MAINTENANCE_SCALE)),
        middleware=[AgeLimit(), TimeLimit(), ShutdownNotifications(), Callbacks(),
                    Pipelines(), Retries(max_retries=settings.max_retries, min_backoff=500,
                                         max_backoff=30_000),
                    AsyncIO(), CurrentMessage()])


def run_message(settings: WorkerSettings, workflow_id: str, run_id: str,
                resume: tuple[str, Any] | None = None) -> dramatiq.Message[Any]:
    """The message that has a worker execute a stored run (``resume``: the step to resume
    and its JSON-ready resume data)."""
    args: tuple[Any, ...] = (workflow_id, run_id) if resume is None \
        else (workflow_id, run_id, *resume)
    return dramatiq.Message(queue_name=settings.queue, actor_name=RUN_ACTOR,
                            args=args, kwargs={}, options={})


def job_message(settings: WorkerSettings, workflow_id: str, run_id: str, join: str,
                total: int, unit_path: str, path: str, data: Any,
                reads: Sequence[str] = ()) -> dramatiq.Message[Any]:
    """The message that has a worker run one job of a distributed fan-out (``reads``:
    the stored results it may read, ``Job.reads``)."""
    args: tuple[Any, ...] = (workflow_id, run_id, join, total, unit_path, path, data)
    if reads:
        args = (*args, list(reads))
    return dramatiq.Message(queue_name=settings.queue, actor_name=JOB_ACTOR,
                            args=args, kwargs={}, options={})


async def enqueue(broker: dramatiq.Broker, messages: Sequence[dramatiq.Message[Any]], *,
                  delay: float | None = None) -> None:
    """Send ``messages`` (in a worker thread: the broker's client blocks).

    Args:
        delay: Seconds before they are delivered.
    """
    milliseconds = None if delay is None else max(1, round(delay * 1000))

    def send() -> None:
        if isinstance(broker, WakingRedisBroker):  # one wake-up push for all
            broker.enqueue_many(messages, delay=milliseconds)
            return
        for message in messages:
            broker.enqueue(message, delay=milliseconds)

    await anyio.to_thread.run_sync(send)


def settled_channel(prefix: str, run_id: str) -> str:
    """The channel a worker publishes on when ``run_id`` settles."""
    return f"{prefix}:settled:{escape_key(run_id)}"


def cancel_key(prefix: str, run_id: str) -> str:
    """The key (and channel) of a cancellation request for ``run_id``."""
    return f"{prefix}:cancel:{escape_key(run_id)}"
