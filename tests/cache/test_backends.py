"""The ``ServerCache`` contract, run against every backend (memory, Redis)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import anyio
import pytest
import redis.asyncio as aioredis

from procflow.cache import InMemoryServerCache, RedisCache, ServerCache
from procflow.errors import StorageError


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Backend:
    """Makes caches of one backend; ``namespace`` separates caches sharing a server."""

    make: Callable[[str], ServerCache]
    advance: Callable[[float], Awaitable[None]]
    corrupt: Callable[[ServerCache, str, bytes], Awaitable[None]]
    made: list[ServerCache] = field(default_factory=list)

    def cache(self, namespace: str = "a") -> ServerCache:
        made = self.make(namespace)
        self.made.append(made)
        return made


def memory_backend() -> Backend:
    clock = FakeClock()

    async def advance(seconds: float) -> None:
        clock.now += seconds

    async def corrupt(cache: ServerCache, key: str, raw: bytes) -> None:
        assert isinstance(cache, InMemoryServerCache)
        cache._entries[key] = (None, raw.decode("utf-8", "replace"))

    return Backend(lambda ns: InMemoryServerCache(clock=clock), advance, corrupt)


def redis_backend(url: str, prefix: str) -> Backend:
    async def corrupt(cache: ServerCache, key: str, raw: bytes) -> None:
        assert isinstance(cache, RedisCache)
        async with aioredis.Redis.from_url(url) as client:
            await client.set(cache.prefix + key, raw)

    return Backend(lambda ns: RedisCache(url, prefix=f"{prefix}:{ns}:"), anyio.sleep, corrupt)


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    if request.param == "memory":
        made = memory_backend()
    else:
        made = redis_backend(request.getfixturevalue("redis_url"),
                             request.getfixturevalue("redis_prefix"))
    yield made
    for cache in made.made:
        await cache.aclose()


async def test_set_then_get_returns_an_equal_fresh_copy(backend: Backend) -> None:
    cache = backend.cache()
    value = {"chunks": [{"type": "text-delta", "payload": {"text": "hé"}}], "n": 1.5}

    await cache.set("k", value)
    got = await cache.get("k")
    assert got == value
    got["n"] = 2
    assert await cache.get("k") == value


async def test_a_missing_key_is_none(backend: Backend) -> None:
    assert await backend.cache().get("nope") is None


async def test_set_replaces_the_previous_value(backend: Backend) -> None:
    cache = backend.cache()
    await cache.set("k", [1, 2])
    await cache.set("k", "two")
    assert await cache.get("k") == "two"


async def test_an_entry_expires_after_its_ttl(backend: Backend) -> None:
    cache = backend.cache()
    await cache.set("short", "s", ttl_seconds=0.05)
    await cache.set("long", "l", ttl_seconds=60)

    await backend.advance(0.3)

    assert await cache.get("short") is None
    assert await cache.get("long") == "l"


async def test_delete_removes_one_key(backend: Backend) -> None:
    cache = backend.cache()
    await cache.set("a", 1)
    await cache.set("b", 2)

    await cache.delete("a")
    await cache.delete("never-set")

    assert await cache.get("a") is None
    assert await cache.get("b") == 2


async def test_clear_removes_only_this_caches_entries(backend: Backend) -> None:
    mine, other = backend.cache("a"), backend.cache("b")
    await mine.set("k1", 1)
    await mine.set("k2", 2)
    await other.set("k1", "other")

    await mine.clear()

    assert await mine.get("k1") is None and await mine.get("k2") is None
    assert await other.get("k1") == "other"


async def test_caches_in_different_namespaces_do_not_share_keys(backend: Backend) -> None:
    first, second = backend.cache("a"), backend.cache("b")
    await first.set("k", "first")
    await second.set("k", "second")

    assert await first.get("k") == "first"
    assert await second.get("k") == "second"


@pytest.mark.parametrize("raw", [b"{not json", b"\xff\xfe"], ids=["bad-json", "bad-utf8"])
async def test_a_corrupted_value_is_a_miss_with_a_warning(
        backend: Backend, raw: bytes, caplog: pytest.LogCaptureFixture) -> None:
    cache = backend.cache()
    await backend.corrupt(cache, "broken", raw)

    assert await cache.get("broken") is None
    assert "broken" in caplog.text


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf"), True, "5"])
async def test_set_rejects_a_bad_ttl(backend: Backend, ttl: object) -> None:
    with pytest.raises(ValueError, match="ttl_seconds"):
        await backend.cache().set("k", 1, ttl_seconds=ttl)  # type: ignore[arg-type]


async def test_set_rejects_values_that_are_not_json(backend: Backend) -> None:
    with pytest.raises(TypeError, match=r"'k'.*JSON"):
        await backend.cache().set("k", {"when": object()})


# ---------------------------------------------------------------- in-memory only


async def test_memory_cache_evicts_the_least_recently_used_entry() -> None:
    cache = InMemoryServerCache(max_size=2)
    await cache.set("a", 1)
    await cache.set("b", 2)
    await cache.get("a")  # "b" is now the least recently used

    await cache.set("c", 3)

    assert len(cache) == 2
    assert await cache.get("b") is None
    assert await cache.get("a") == 1 and await cache.get("c") == 3


async def test_memory_cache_evicts_expired_entries_before_live_ones() -> None:
    clock = FakeClock()
    cache = InMemoryServerCache(max_size=2, clock=clock)
    await cache.set("live", 1, ttl_seconds=100)
    await cache.set("dying", 2, ttl_seconds=1)
    clock.now += 5

    await cache.set("new", 3)

    assert await cache.get("live") == 1 and await cache.get("new") == 3


async def test_memory_cache_default_ttl_applies_and_none_means_forever() -> None:
    clock = FakeClock()
    expiring = InMemoryServerCache(default_ttl=10, clock=clock)
    forever = InMemoryServerCache(default_ttl=None, clock=clock)
    await expiring.set("k", 1)
    await forever.set("k", 1)

    clock.now += 10

    assert await expiring.get("k") is None
    assert await forever.get("k") == 1


@pytest.mark.parametrize("options, message", [
    pytest.param({"max_size": 0}, "max_size", id="max-size-zero"),
    pytest.param({"max_size": 2.5}, "max_size", id="max-size-float"),
    pytest.param({"default_ttl": 0}, "default_ttl", id="ttl-zero"),
    pytest.param({"default_ttl": -3}, "default_ttl", id="ttl-negative"),
])
def test_memory_cache_rejects_bad_options(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        InMemoryServerCache(**options)  # type: ignore[arg-type]


# ---------------------------------------------------------------- Redis only


@pytest.mark.redis
async def test_redis_cache_stores_json_under_its_prefix_with_an_expiry(
        redis_url: str, redis_prefix: str) -> None:
    async with RedisCache(redis_url, prefix=f"{redis_prefix}:c:") as cache, \
            aioredis.Redis.from_url(redis_url, decode_responses=True) as raw:
        await cache.set("k", {"a": [1, 2]}, ttl_seconds=30)

        assert await raw.get(f"{redis_prefix}:c:k") == '{"a":[1,2]}'
        assert 0 < await raw.pttl(f"{redis_prefix}:c:k") <= 30_000


@pytest.mark.redis
async def test_redis_clear_scans_only_its_prefix_even_with_glob_characters(
        redis_url: str, redis_prefix: str) -> None:
    async with RedisCache(redis_url, prefix=f"{redis_prefix}:x*[y]:") as cache, \
            aioredis.Redis.from_url(redis_url, decode_responses=True) as raw:
        await raw.set(f"{redis_prefix}:xz[y]:k", "bystander")
        await raw.set(f"{redis_prefix}:other", "bystander")
        for i in range(1200):  # more than one SCAN/UNLINK batch
            await cache.set(f"k{i}", i)

        await cache.clear()

        assert await raw.get(f"{redis_prefix}:xz[y]:k") == "bystander"
        assert await raw.get(f"{redis_prefix}:other") == "bystander"
        assert await cache.get("k0") is None and await cache.get("k1199") is None


@pytest.mark.redis
async def test_redis_cache_uses_a_given_client_and_leaves_it_open(
        redis_url: str, redis_prefix: str) -> None:
    async with aioredis.Redis.from_url(redis_url) as client:
        cache = RedisCache(prefix=f"{redis_prefix}:", client=client)
        await cache.set("k", 1)
        await cache.aclose()

        assert await client.get(f"{redis_prefix}:k") == b"1"


async def test_an_unreachable_redis_is_a_storage_error_without_the_password() -> None:
    async with RedisCache("redis://:hunter2@127.0.0.1:1/0", prefix="p:") as cache:
        with pytest.raises(StorageError) as info:
            await cache.get("k")

    assert "redis://127.0.0.1:1/0" in str(info.value) and "'k'" in str(info.value)
    assert "hunter2" not in str(info.value) and "hunter2" not in repr(cache)


def test_redis_cache_rejects_an_empty_prefix() -> None:
    with pytest.raises(ValueError, match="prefix"):
        RedisCache(prefix="")


def test_importing_the_cache_package_does_not_import_redis() -> None:
    code = ("import sys, procflow.cache as c; assert 'redis' not in sys.modules; "
            "c.RedisCache; assert 'redis' in sys.modules")

    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)
