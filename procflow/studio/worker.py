"""``procflow worker TARGET... --redis URL``: Dramatiq workers for workflows and agents.

The command checks its targets and the Redis server in this process (an error is one
line, exit status 2), then hands over to Dramatiq's own process manager
(``dramatiq.cli.main``): it forks ``--processes`` worker processes of ``--threads``
threads each, restarts none silently, and on SIGTERM/SIGINT lets each worker finish its
current messages for ``--shutdown-timeout`` seconds before they are delivered again.
Each worker process imports ``procflow.studio.worker_boot``, which rebuilds the targets
and the broker from ``PROCFLOW_WORKER_BOOT`` (JSON set here).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any, Final

from procflow._extras import MissingExtraError, needs
from procflow.studio.targets import TargetError, load_target

__all__ = ["BOOT_ENV", "add_worker_parser", "worker_main"]

BOOT_ENV: Final = "PROCFLOW_WORKER_BOOT"

_EPILOG = """safe defaults (Dramatiq's own are not safe for runs):
  a worker that stops sending heartbeats for --heartbeat-timeout seconds counts as dead
  and its unacknowledged messages go to the other workers (recovery runs on
  --maintenance-chance of broker commands); each actor call is retried --max-retries
  times and cancelled after --time-limit seconds; a run holds a lease renewed by a
  heartbeat (--lease-ttl), so two workers never run the same step of one run at once and
  a run lost with its worker is continued from its snapshot, the step it was in shown as
  "attempt 2 after worker loss". On SIGTERM a worker finishes its current messages for
  --shutdown-timeout seconds; what is left is delivered again. Send SIGTERM to this
  command's process only (it forwards it; systemd: KillMode=mixed).

submit runs from Python:
  executor = DramatiqExecutor("redis://127.0.0.1:6379/0")
  run = wf.create_run(storage=executor.storage)
  run_id = await run.submit(input, executor=executor); result = await run.result(timeout=60)
and list them with: procflow runs --db redis://127.0.0.1:6379/0"""


def add_worker_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``worker`` subcommand to the ``procflow`` parser (``sub``: its
    subparsers)."""
    from procflow.workers.settings import WorkerSettings

    d = WorkerSettings()
    worker: argparse.ArgumentParser = sub.add_parser(
        "worker", help="run workflows and agents on Dramatiq workers (procflow[dramatiq])",
        description="Start Dramatiq worker processes able to run the named workflows and "
        "agents, sharing runs, traces and queues through one Redis server.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    worker.add_argument("targets", metavar="TARGET", nargs="+",
                        help="path/to/file.py:name or package.module:name (a Workflow or "
                        "an Agent); runs of other workflows are not taken")
    worker.add_argument("--redis", metavar="URL", default=d.redis_url,
                        help=f"the shared Redis server (default {d.redis_url})")
    worker.add_argument("--processes", type=_count, default=1, metavar="N",
                        help="worker processes (default 1)")
    worker.add_argument("--threads", type=_count, default=4, metavar="N",
                        help="messages handled at once per process (default 4)")
    worker.add_argument("--prefix", default=d.prefix, help="run storage key prefix "
                        f"(default {d.prefix!r}, what --db redis://... reads)")
    worker.add_argument("--queue", default=d.queue, help=f"queue name (default {d.queue!r})")
    worker.add_argument("--namespace", default=d.namespace,
                        help=f"Dramatiq key namespace (default {d.namespace!r})")
    worker.add_argument("--heartbeat-timeout", type=float, default=d.heartbeat_timeout,
                        metavar="S", help="seconds of silence after which a worker is "
                        "dead and its messages are delivered again (default "
                        f"{d.heartbeat_timeout:g})")
    worker.add_argument("--maintenance-chance", type=float, default=d.maintenance_chance,
                        metavar="F", help="fraction of broker commands that recover dead "
                        f"workers' messages (default {d.maintenance_chance})")
    worker.add_argument("--max-retries", type=int, default=d.max_retries, metavar="N",
                        help=f"retries of a message whose actor raised (default {d.max_retries})")
    worker.add_argument("--time-limit", type=float, default=d.time_limit, metavar="S",
                        help=f"seconds one actor call may take (default {d.time_limit:g})")
    worker.add_argument("--lease-ttl", type=float, default=d.lease_ttl, metavar="S",
                        help="seconds a run's lease lasts unless renewed (default "
                        f"{d.lease_ttl:g})")
    worker.add_argument("--shutdown-timeout", type=float, default=d.shutdown_timeout,
                        metavar="S", help="seconds a worker given SIGTERM finishes its "
                        f"current messages (default {d.shutdown_timeout:g})")
    worker.add_argument("--idle-poll", type=float, default=d.idle_poll, metavar="S",
                        help="longest pause between two fetches of an idle worker (default "
                        f"{d.idle_poll:g}; Dramatiq's is 1)")
    return worker


def _count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def worker_main(args: argparse.Namespace) -> int:
    """Check the targets and Redis, then run Dramatiq's process manager until stopped.

    Returns:
        Dramatiq's exit status.

    Raises:
        TargetError: A target cannot be loaded (the caller prints one line, exit 2).
        ValueError: A setting is out of range, or Redis does not answer.
    """
    # Read by Dramatiq when its worker module is imported (forked workers inherit it).
    os.environ.setdefault("dramatiq_worker_timeout", str(max(1, round(args.idle_poll * 1000))))
    try:
        with needs("dramatiq", feature="procflow worker"):
            import dramatiq.cli
    except MissingExtraError as exc:
        raise TargetError(str(exc)) from None
    from procflow.workers.settings import WorkerSettings

    settings = WorkerSettings(
        redis_url=args.redis, prefix=args.prefix, namespace=args.namespace, queue=args.queue,
        heartbeat_timeout=args.heartbeat_timeout, maintenance_chance=args.maintenance_chance,
        max_retries=args.max_retries, time_limit=args.time_limit, lease_ttl=args.lease_ttl,
        shutdown_timeout=args.shutdown_timeout, idle_poll=args.idle_poll)
    targets = [_absolute(spec) for spec in args.targets]
    for spec in targets:
        load_target(spec)
    _check_redis(settings.redis_url)
    os.environ[BOOT_ENV] = json.dumps({"targets": targets, "settings": settings.to_json()})
    parser = dramatiq.cli.make_argument_parser()  # type: ignore[no-untyped-call]  # untyped
    parsed = parser.parse_args([
        "procflow.studio.worker_boot:broker", "--processes", str(args.processes),
        "--threads", str(args.threads), "--queues", settings.queue,
        "--worker-shutdown-timeout", str(round(settings.shutdown_timeout * 1000))])
    code: int = dramatiq.cli.main(parsed)  # type: ignore[no-untyped-call]  # untyped
    return code


def _absolute(spec: str) -> str:
    """A file target with an absolute path (worker processes may change directory)."""
    source, _, name = spec.rpartition(":")
    if source.endswith(".py") or "/" in source:
        return f"{Path(source).resolve()}:{name}"
    return spec


def _check_redis(url: str) -> None:
    import redis

    from procflow._backends.redis import redact_url

    try:
        with redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3) as client:
            client.ping()
    except (redis.RedisError, OSError, ValueError) as exc:
        raise ValueError(f"Redis at {redact_url(url)} does not answer: "
                         f"{type(exc).__name__}") from None
