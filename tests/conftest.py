"""Fixtures shared by the whole test suite: the anyio backend, a Redis server and a
PostgreSQL database."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, NoReturn
from uuid import uuid4

import pytest
from hypothesis import settings

if TYPE_CHECKING:
    import redis.asyncio as aioredis

__all__ = ["anyio_backend", "postgres_dsn", "postgres_schema", "redis_prefix", "redis_url"]

# CI runs the property tests on fixed seeds (``.ci/run`` sets the profile), so a landing
# never depends on which examples a run happened to draw; run locally, they draw anew
# each time and keep finding new cases. No test asserts on wall-clock time, Hypothesis's
# per-example deadline included: on a loaded 2-core machine one slow example failed a
# property that holds.
settings.register_profile("local", deadline=None)
settings.register_profile("ci", derandomize=True, database=None, deadline=None)
settings.load_profile(os.environ.get("PROCFLOW_HYPOTHESIS_PROFILE") or "local")

_DEFAULT_REDIS_URL = "redis://127.0.0.1:6379"
_DEFAULT_POSTGRES_DSN = "postgresql://postgres@127.0.0.1:5432/test"
_PROBE_TIMEOUT = 0.5
_START_TIMEOUT = 10.0


@pytest.fixture(scope="session", autouse=True)
def _runs_stay_out_of_the_checkouts_database() -> Iterator[None]:
    """Runs made without a storage never go to the checkout's own
    ``.procflow/procflow.db``: the README's quick start makes one, and the suite run after
    it would otherwise add its runs there (and read values the in-memory fallback keeps
    as they are through a SQLite file). A project database of a test's own directory
    (``monkeypatch.chdir``) is found as usual; ``PROCFLOW_DB`` is not touched."""
    from pathlib import Path

    from procflow.storage import locate

    checkout = (Path.cwd() / locate.PROJECT_DB).resolve()
    find = locate.find_project_db

    def elsewhere(start: str | os.PathLike[str] | None = None) -> Path | None:
        found = find(start)
        return None if found is not None and found.resolve() == checkout else found

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(locate, "find_project_db", elsewhere)
        yield


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Run async tests on asyncio (a module may override this to add "trio")."""
    return "asyncio"


def _answers(url: str) -> bool:
    import redis

    try:
        with redis.Redis.from_url(url, socket_connect_timeout=_PROBE_TIMEOUT,
                                  socket_timeout=_PROBE_TIMEOUT) as client:
            return bool(client.ping())
    except (redis.RedisError, OSError, ValueError):
        return False


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("PROCFLOW_REQUIRE_REDIS") == "1":
        pytest.fail(f"Redis is required (PROCFLOW_REQUIRE_REDIS=1) but {reason}")
    pytest.skip(reason)


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A Redis server's URL: ``$REDIS_URL`` if it answers, else a private redis-server.

    Skips the test when neither is available (fails instead under
    ``PROCFLOW_REQUIRE_REDIS=1``).
    """
    url = os.environ.get("REDIS_URL", _DEFAULT_REDIS_URL)
    if _answers(url):
        yield url
        return
    binary = shutil.which("redis-server")
    if binary is None:
        _unavailable(f"no Redis answers at {url} and redis-server is not installed")
    with tempfile.TemporaryDirectory(prefix="procflow-redis-") as directory:
        port = _free_port()
        private_url = f"redis://127.0.0.1:{port}"
        process = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", directory],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + _START_TIMEOUT
            while not _answers(private_url):
                if process.poll() is not None or time.monotonic() > deadline:
                    _unavailable(f"no Redis answers at {url} and a private redis-server "
                                 f"on port {port} did not start")
                time.sleep(0.05)
            yield private_url
        finally:
            _stop(process)


@pytest.fixture
def redis_prefix(redis_url: str) -> Iterator[str]:
    """A key prefix unique to the test; its keys are deleted afterwards."""
    import redis

    prefix = f"procflow-test-{uuid4().hex}"
    yield prefix
    with redis.Redis.from_url(redis_url) as client:
        keys = list(client.scan_iter(match=f"{prefix}:*", count=500))
        if keys:
            client.delete(*keys)


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """A plain ``redis.asyncio`` client (strings decoded), to look at what a test wrote."""
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    try:
        yield client
    finally:
        await client.aclose()


def _postgres_unavailable(reason: str) -> NoReturn:
    if os.environ.get("PROCFLOW_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"PostgreSQL is required (PROCFLOW_REQUIRE_POSTGRES=1) but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """A fresh database ``procflow_test_<random>`` on ``$PROCFLOW_POSTGRES_DSN`` (default
    the local server's ``test`` database), dropped at the end of the session.

    Skips the test when no server answers (fails instead under
    ``PROCFLOW_REQUIRE_POSTGRES=1``).
    """
    try:
        import psycopg
        from psycopg.conninfo import make_conninfo
    except ImportError:
        _postgres_unavailable("psycopg is not installed (pip install 'procflow[postgres]')")
    admin = os.environ.get("PROCFLOW_POSTGRES_DSN", _DEFAULT_POSTGRES_DSN)
    name = f"procflow_test_{uuid4().hex[:12]}"
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=3) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as exc:
        _postgres_unavailable(f"no PostgreSQL answers at {admin}: {exc}")
    try:
        yield make_conninfo(admin, dbname=name)
    finally:
        with psycopg.connect(admin, autocommit=True, connect_timeout=3) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def postgres_schema(postgres_dsn: str) -> Iterator[str]:
    """A schema name unique to the test, in the session's database; dropped afterwards."""
    import psycopg

    schema = f"t_{uuid4().hex[:16]}"
    yield schema
    with psycopg.connect(postgres_dsn, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
