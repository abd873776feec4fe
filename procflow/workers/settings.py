"""``WorkerSettings``: how procflow's Dramatiq workers and their clients are set up.

Dramatiq's defaults are not safe for runs: a SIGKILLed worker's messages wait for a
60 s heartbeat timeout and for maintenance that runs on 0.1% of broker commands, and an
actor retries 20 times under a 10-minute limit. procflow sets each explicitly (all
overridable, ``procflow worker --help`` lists them). Plain data: importing this module
does not import Dramatiq.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from typing import Any

__all__ = ["WorkerSettings"]


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerSettings:
    """Where workers meet and how they recover.

    Attributes:
        redis_url: The Redis server shared by clients and workers (runs, traces and the
            message queues).
        prefix: Key prefix of the run storage (``RedisStorage(prefix=...)``; ``procflow
            runs --db redis://...`` reads the default one).
        namespace: Key namespace of Dramatiq's queues.
        queue: The queue procflow's actors listen on.
        heartbeat_timeout: Seconds without a heartbeat after which a worker counts as
            dead and its unacknowledged messages are delivered again.
        maintenance_chance: Fraction of broker commands that run that recovery
            (Dramatiq's default is 0.001; too rare for a small pool).
        max_retries: Times a message whose actor raised is retried.
        time_limit: Seconds one actor call may take (a whole run, up to its first
            distributed fan-out) before it is cancelled.
        lease_ttl: Seconds a run's lease lasts unless renewed (a worker on another host
            that dies holds its runs this long; one on this host is seen dead at once).
        shutdown_timeout: Seconds a worker given SIGTERM lets its current messages
            finish; after that they are delivered again to other workers.
        idle_poll: Longest pause, in seconds, between two fetches of an idle worker
            (Dramatiq polls Redis with a growing pause; its default of 1 s adds up to a
            second to a run submitted to an idle pool).
    """

    redis_url: str = "redis://127.0.0.1:6379/0"
    prefix: str = "procflow"
    namespace: str = "procflow-dramatiq"
    queue: str = "procflow"
    heartbeat_timeout: float = 10.0
    maintenance_chance: float = 0.05
    max_retries: int = 3
    time_limit: float = 3600.0
    lease_ttl: float = 15.0
    shutdown_timeout: float = 30.0
    idle_poll: float = 0.05

    def __post_init__(self) -> None:
        for name in ("heartbeat_timeout", "time_limit", "lease_ttl", "shutdown_timeout",
                     "idle_poll"):
            _positive(name, getattr(self, name))
        chance = self.maintenance_chance
        if isinstance(chance, bool) or not isinstance(chance, int | float) \
                or not 0 < chance <= 1:
            raise ValueError(f"maintenance_chance must be a fraction in (0, 1], got {chance!r}")
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int) \
                or self.max_retries < 0:
            raise ValueError(f"max_retries must be an int >= 0, got {self.max_retries!r}")
        for name in ("redis_url", "prefix", "namespace", "queue"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"{name} must be a non-empty string, got {value!r}")

    def to_json(self) -> str:
        """The settings as JSON (how the ``procflow worker`` parent hands them on)."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerSettings:
        """Settings from ``to_json`` output.

        Raises:
            ValueError: Not such a document.
        """
        try:
            data: Any = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"worker settings are not JSON: {exc}") from None
        known = {f.name for f in fields(cls)}
        if not isinstance(data, dict) or not set(data) <= known:
            raise ValueError(f"worker settings must be an object with keys from "
                             f"{sorted(known)}, got {text[:200]!r}")
        return cls(**data)


def _positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number of seconds > 0, got {value!r}")
