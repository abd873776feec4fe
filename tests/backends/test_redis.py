"""The shared Redis plumbing: credentials never shown, who closes the client, errors."""

from __future__ import annotations

import subprocess
import sys
from uuid import uuid4

import anyio
import pytest
import redis.asyncio as aioredis
from hypothesis import given
from hypothesis import strategies as st

from procflow._backends.redis import (
    RedisConnection,
    describe_client,
    escape_key,
    redact_url,
    scrub,
    url_secrets,
)
from procflow.cache import RedisCache
from procflow.errors import StorageError
from procflow.processors.builtin.cost.redis import RedisCostLedger
from procflow.storage import RedisStorage


@pytest.mark.parametrize(("url", "shown"), [
    pytest.param("redis://:hunter2@host:6379/0", "redis://host:6379/0", id="password"),
    pytest.param("redis://me:hunter2@host/1", "redis://host/1", id="user-and-password"),
    pytest.param("rediss://host:6380/0?password=hunter2&ssl_cert_reqs=none",
                 "rediss://host:6380/0", id="query-password"),
    pytest.param("unix://:hunter2@/tmp/redis.sock?db=2", "unix:///tmp/redis.sock",
                 id="unix-socket"),
])
def test_redact_url_drops_credentials_and_query(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_url_secrets_lists_raw_and_unquoted_forms() -> None:
    secrets = url_secrets("redis://:p%40ss%3Aword@host/0?password=other")

    assert set(secrets) == {"p%40ss%3Aword", "p@ss:word", "other"}
    assert scrub("auth p@ss:word or p%40ss%3Aword, other", secrets) == "auth *** or ***, ***"


def test_a_url_without_password_has_no_secrets() -> None:
    assert url_secrets("redis://host:6379/0") == []
    assert url_secrets("redis://[broken") == []


@given(st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"),
               min_size=1))
def test_a_password_never_survives_scrubbing(password: str) -> None:
    from urllib.parse import quote

    url = f"redis://:{quote(password, safe='')}@host:6379/0"
    text = f"could not AUTH with {password!r} at {url}"

    scrubbed = scrub(text, url_secrets(url))

    assert quote(password, safe="") not in scrubbed
    assert password not in scrubbed or password in "***"


def test_an_invalid_url_is_a_storage_error_without_the_password() -> None:
    with pytest.raises(StorageError) as info:
        RedisConnection("http://:hunter2@host/0", name="Test backend")

    message = str(info.value)
    assert message.startswith("Test backend: invalid Redis URL 'http://host/0'")
    assert "hunter2" not in message and "redis://127.0.0.1:6379/0" in message


@pytest.mark.parametrize("backend", [
    pytest.param(lambda url: RedisStorage(url, prefix="p"), id="storage"),
    pytest.param(lambda url: RedisCache(url, prefix="p:"), id="cache"),
    pytest.param(lambda url: RedisCostLedger(url, prefix="p", connect_timeout=0.5,
                                             timeout=0.5), id="cost-ledger"),
])
async def test_every_backend_hides_the_password(backend: object) -> None:
    assert callable(backend)
    instance = backend("redis://:hunter2@127.0.0.1:1/0?password=hunter3")
    assert "hunter" not in repr(instance) and "redis://127.0.0.1:1/0" in repr(instance)
    await instance.aclose()


async def test_an_unreachable_server_is_a_storage_error_naming_the_operation() -> None:
    connection = RedisConnection("redis://:hunter2@127.0.0.1:1/0", name="Test backend",
                                 connect_timeout=0.5)

    with pytest.raises(StorageError) as info, connection.translate("reading key 'k'"):
        await connection.client.get("k")

    message = str(info.value)
    assert message.startswith("Test backend at redis://127.0.0.1:1/0: reading key 'k' failed")
    assert "hunter2" not in message
    await connection.aclose()


def test_a_given_client_is_described_without_credentials() -> None:
    client = aioredis.Redis(host="example", port=7000, db=3, password="hunter2")

    assert describe_client(client) == "redis://example:7000/3"
    assert "hunter2" not in repr(RedisStorage(client=client))


def test_escape_key_keeps_distinct_ids_distinct() -> None:
    assert escape_key("a:b") != escape_key("a%3Ab")
    assert ":" not in escape_key("wf:run:1")


async def _named_connections(url: str, name: str) -> int:
    async with aioredis.Redis.from_url(url) as raw:
        clients = await raw.client_list()
    return sum(1 for c in clients if c.get("name") == name)


async def _until_gone(url: str, name: str) -> int:
    """How many connections by that name remain once the server has dropped them."""
    for _ in range(250):  # the server notices a closed socket a moment later
        if not (count := await _named_connections(url, name)):
            break
        await anyio.sleep(0.02)
    return count


@pytest.mark.redis
async def test_a_client_made_from_the_url_is_closed(redis_url: str) -> None:
    name = f"procflow-test-{uuid4().hex}"
    connection = RedisConnection(f"{redis_url}/0?client_name={name}", name="Test backend")
    await connection.client.ping()
    assert connection.owns_client and await _named_connections(redis_url, name) == 1

    await connection.aclose()

    assert await _until_gone(redis_url, name) == 0


@pytest.mark.redis
@pytest.mark.parametrize("backend", [
    pytest.param(lambda c: RedisStorage(client=c), id="storage"),
    pytest.param(lambda c: RedisCache(client=c), id="cache"),
    pytest.param(lambda c: RedisCostLedger(client=c), id="cost-ledger"),
    pytest.param(lambda c: RedisConnection("", client=c, name="Test"), id="connection"),
])
async def test_a_given_client_is_left_open(redis_url: str, backend: object) -> None:
    assert callable(backend)
    name = f"procflow-test-{uuid4().hex}"
    async with aioredis.Redis.from_url(redis_url, client_name=name) as client:
        await client.ping()
        instance = backend(client)

        await instance.aclose()

        assert await _named_connections(redis_url, name) == 1
        assert await client.ping()


def test_importing_procflow_does_not_import_redis() -> None:
    code = "import sys, procflow, procflow._backends; assert 'redis' not in sys.modules"

    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)
