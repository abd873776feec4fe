"""``RedisMemoryStore``: threads, messages, working memory and message vectors on Redis,
beside ``RedisStorage``'s runs (same server, same key prefix)::

    {prefix}:mem:thread:{thread}          hash    resource_id, title, metadata (JSON),
                                                  created_at, updated_at
    {prefix}:mem:threads                  zset    thread ids by updated_at
    {prefix}:mem:rthreads:{resource}      zset    a resource's thread ids by updated_at
    {prefix}:mem:msgdata / msgthread / msgres   hash    message id -> JSON / thread / resource
    {prefix}:mem:order:{thread}           zset    message ids by save sequence number
    {prefix}:mem:rorder:{resource}        zset    a resource's message ids, alike
    {prefix}:mem:seq                      string  the last save sequence number
    {prefix}:mem:working                  hash    working memory key -> text
    {prefix}:mem:vec:{space}:{scope}      zset    message ids by vector write sequence
    {prefix}:mem:vecdata:{space}          hash    message id -> b"\\x01" + float32 bytes
                                                  (b"" when there was nothing to embed)
    {prefix}:mem:vecthread:{space}        hash    message id -> thread
    {prefix}:mem:vecscopes:{space}        hash    message id -> its scopes (JSON)
    {prefix}:mem:vecver:{space}           hash    scope -> version
    {prefix}:mem:embcache:{model}         hash    content hash -> float32 bytes

Ids in key names are escaped (``escape_key``). Writes that must be atomic (saving
messages, saving a thread, saving vectors) are Lua scripts, so a sequence number is
taken and used in one step: a reader that saw a scope's version and read its rows up to
a sequence number misses nothing when it later reads the rows after it.

This module imports ``redis``; ``procflow.memory`` imports it only on first use.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Final, final

import redis.asyncio as aioredis

from procflow._backends import AsyncResource
from procflow._backends.redis import (
    CONNECT_TIMEOUT,
    OPERATION_TIMEOUT,
    RedisConnection,
    escape_key,
)
from procflow.memory.base import StoredVector, Thread, VectorBatch
from procflow.memory.codec import (
    is_hidden,
    load_message,
    load_metadata,
    message_rows,
    scope_column,
    timestamp,
    to_datetime,
    vector_scopes,
)
from procflow.messages import Message
from procflow.storage.redis import RedisStorage

__all__ = ["RedisMemoryStore"]

_BATCH: Final = 10_000

_ESCAPE: Final = """
local function esc(s)
  s = string.gsub(s, '%%', '%%25')
  s = string.gsub(s, ':', '%%3A')
  return s
end
"""

# ARGV: prefix, now, then (id, thread, resource or "", data) per message.
_SAVE_MESSAGES: Final = _ESCAPE + """
local p, now = ARGV[1], ARGV[2]
for i = 3, #ARGV, 4 do
  local id, tid, rid, data = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local oldt = redis.call('HGET', p .. ':msgthread', id)
  local oldr = redis.call('HGET', p .. ':msgres', id)
  local seq = false
  if oldt == tid then
    seq = redis.call('ZSCORE', p .. ':order:' .. esc(tid), id)
  elseif oldt then
    redis.call('ZREM', p .. ':order:' .. esc(oldt), id)
  end
  if oldr and oldr ~= '' and oldr ~= rid then
    redis.call('ZREM', p .. ':rorder:' .. esc(oldr), id)
  end
  if not seq then seq = redis.call('INCR', p .. ':seq') end
  redis.call('ZADD', p .. ':order:' .. esc(tid), seq, id)
  if rid ~= '' then redis.call('ZADD', p .. ':rorder:' .. esc(rid), seq, id) end
  redis.call('HSET', p .. ':msgdata', id, data)
  redis.call('HSET', p .. ':msgthread', id, tid)
  redis.call('HSET', p .. ':msgres', id, rid)
  local tkey = p .. ':thread:' .. esc(tid)
  if redis.call('EXISTS', tkey) == 0 then
    redis.call('HSET', tkey, 'metadata', '{}', 'created_at', now)
  end
  redis.call('HSET', tkey, 'updated_at', now)
  local owner = redis.call('HGET', tkey, 'resource_id')
  if (not owner) and rid ~= '' then
    redis.call('HSET', tkey, 'resource_id', rid)
    owner = rid
  end
  redis.call('ZADD', p .. ':threads', now, tid)
  if owner then redis.call('ZADD', p .. ':rthreads:' .. esc(owner), now, tid) end
end
return 1
"""

# ARGV: prefix, thread id, resource or "", title or "", has_title, metadata, created, updated
_SAVE_THREAD: Final = _ESCAPE + """
local p, tid, rid, title, has_title = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local tkey = p .. ':thread:' .. esc(tid)
local old = redis.call('HGET', tkey, 'resource_id')
if old then redis.call('ZREM', p .. ':rthreads:' .. esc(old), tid) end
redis.call('DEL', tkey)
redis.call('HSET', tkey, 'metadata', ARGV[6], 'created_at', ARGV[7], 'updated_at', ARGV[8])
if rid ~= '' then redis.call('HSET', tkey, 'resource_id', rid) end
if has_title == '1' then redis.call('HSET', tkey, 'title', title) end
redis.call('ZADD', p .. ':threads', ARGV[8], tid)
if rid ~= '' then redis.call('ZADD', p .. ':rthreads:' .. esc(rid), ARGV[8], tid) end
return 1
"""

# ARGV: prefix, space, then (id, thread, vector field, scopes JSON) per vector.
_SAVE_VECTORS: Final = _ESCAPE + """
local p, space = ARGV[1], ARGV[2]
local s = esc(space)
for i = 3, #ARGV, 4 do
  local id, tid, vec, scopes = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local old = redis.call('HGET', p .. ':vecscopes:' .. s, id)
  if old then
    for _, scope in ipairs(cjson.decode(old)) do
      redis.call('ZREM', p .. ':vec:' .. s .. ':' .. esc(scope), id)
    end
  end
  local seq = redis.call('INCR', p .. ':vecseq')
  for _, scope in ipairs(cjson.decode(scopes)) do
    redis.call('ZADD', p .. ':vec:' .. s .. ':' .. esc(scope), seq, id)
    redis.call('HINCRBY', p .. ':vecver:' .. s, scope, 1)
  end
  redis.call('HSET', p .. ':vecscopes:' .. s, id, scopes)
  redis.call('HSET', p .. ':vecdata:' .. s, id, vec)
  redis.call('HSET', p .. ':vecthread:' .. s, id, tid)
end
return 1
"""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@final
class RedisMemoryStore(AsyncResource):
    """A ``MemoryStore`` and ``VectorStore`` on a Redis server (``redis.asyncio``).

    Args:
        source: A Redis URL, or a ``RedisStorage`` whose client and key prefix to share
            (memory then lives beside its runs; ``aclose()`` leaves that client open).
        prefix: The key namespace, when ``source`` is a URL (keys go under
            ``{prefix}:mem:``).
        client: A ``redis.asyncio.Redis`` to use instead of connecting to the URL; it is
            not closed by ``aclose()``.
        timeout: Seconds each command waits for the server's reply (``None``: no
            limit); a command past it raises ``StorageError``. Applies to a client made
            from the URL; a given ``client`` keeps its own ``socket_timeout``.
        connect_timeout: Seconds to wait for a connection (a client made from the URL).

    Example:
        ```python
        storage = RedisStorage("redis://127.0.0.1:6379", prefix="myapp")
        memory = Memory(storage=storage)   # runs and memory on one server
        ```
    """

    def __init__(self, source: str | RedisStorage = "redis://127.0.0.1:6379", *,
                 prefix: str = "procflow", client: aioredis.Redis | None = None,
                 timeout: float | None = OPERATION_TIMEOUT,
                 connect_timeout: float = CONNECT_TIMEOUT) -> None:
        if isinstance(source, RedisStorage):
            client, prefix, url = source.client, source.prefix, ""
        elif isinstance(source, str):
            url = source
        else:
            raise TypeError(f"RedisMemoryStore takes a Redis URL or a RedisStorage, got "
                            f"{type(source).__name__}")
        self._redis = RedisConnection(url, client=client, name="Redis memory store",
                                      connect_timeout=connect_timeout, timeout=timeout)
        self._client = self._redis.client
        self._p = f"{prefix}:mem"
        self._save_messages = self._client.register_script(_SAVE_MESSAGES)
        self._save_thread = self._client.register_script(_SAVE_THREAD)
        self._save_vectors = self._client.register_script(_SAVE_VECTORS)

    def __repr__(self) -> str:
        return f"RedisMemoryStore({self._redis.display!r}, prefix={self._p[:-4]!r})"

    async def aclose(self) -> None:
        """Close the connection pool (unless the client was given or shared)."""
        await self._redis.aclose()

    def _key(self, kind: str, *ids: str) -> str:
        return ":".join((self._p, kind, *map(escape_key, ids)))

    # ------------------------------------------------------------------ threads

    async def save_thread(self, thread: Thread) -> None:
        """Insert or replace a thread."""
        args = [self._p, thread.id, thread.resource_id or "", thread.title or "",
                "1" if thread.title is not None else "0", json.dumps(dict(thread.metadata)),
                repr(timestamp(thread.created_at)), repr(timestamp(thread.updated_at))]
        with self._redis.translate(f"saving thread {thread.id!r}"):
            await self._save_thread(args=args)

    async def get_thread(self, thread_id: str) -> Thread | None:
        """The thread, or ``None`` if unknown.

        Raises:
            MemoryCorruptedError: Its stored metadata cannot be decoded.
        """
        with self._redis.translate(f"loading thread {thread_id!r}"):
            fields = await self._client.hgetall(self._key("thread", thread_id))
        return _thread(thread_id, fields) if fields else None

    async def list_threads(self, resource_id: str | None = None) -> list[Thread]:
        """Threads (of one resource when given), most recently updated first."""
        index = (self._key("threads") if resource_id is None
                 else self._key("rthreads", resource_id))
        with self._redis.translate("listing threads"):
            ids = [_text(i) for i in await self._client.zrange(index, 0, -1)]
            async with self._client.pipeline(transaction=False) as pipe:
                for thread_id in ids:
                    pipe.hgetall(self._key("thread", thread_id))
                rows = await pipe.execute()
        found = [_thread(i, row) for i, row in zip(ids, rows, strict=True) if row]
        return sorted(found, key=lambda t: (-t.updated_at.timestamp(), t.id))

    # ------------------------------------------------------------------ messages

    async def save_messages(self, messages: Sequence[Message]) -> None:
        """Upsert messages by id (a known one keeps its place) and bump (or create)
        their threads, in one atomic script.

        Raises:
            ValueError: A message has no ``thread_id``.
        """
        args: list[str] = [self._p, repr(time.time())]
        for row in message_rows(messages):
            args += [row.id, row.thread_id, row.resource_id or "", row.json]
        if len(args) == 2:
            return
        with self._redis.translate(f"saving {len(messages)} message(s)"):
            await self._save_messages(args=args)

    async def _load(self, ids: list[str], thread_id: str | None) -> list[Message]:
        if not ids:
            return []
        with self._redis.translate("loading messages"):
            rows = await self._client.hmget(self._key("msgdata"), ids)
        return [load_message(_text(row) if row is not None else None,
                             thread_id=thread_id, row_id=i) for i, row in zip(ids, rows,
                                                                              strict=True)]

    async def get_messages(self, thread_id: str, *, last: int | None = None,
                           include_hidden: bool = True) -> list[Message]:
        """The thread's messages in save order (only the last ``last`` when given;
        hidden signals left out, and not counted, when ``include_hidden`` is false).

        Raises:
            MemoryCorruptedError: A stored message cannot be decoded.
        """
        if last is not None and last <= 0:
            return []
        start = -last if last is not None and include_hidden else 0
        with self._redis.translate(f"loading thread {thread_id!r}"):
            ids = [_text(i) for i in await self._client.zrange(
                self._key("order", thread_id), start, -1)]
        loaded = await self._load(ids, thread_id)
        if not include_hidden:
            loaded = [m for m in loaded if not is_hidden(m)]
        return loaded if last is None else loaded[-last:]

    async def get_messages_by_id(self, ids: Sequence[str], *, before: int = 0,
                                 after: int = 0) -> list[Message]:
        """The messages with these ids plus ``before``/``after`` neighbours, grouped by
        thread, each thread in save order, without duplicates."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return []
        with self._redis.translate("loading messages by id"):
            threads = await self._client.hmget(self._key("msgthread"), wanted)
            picked: dict[str, dict[int, str]] = {}
            for message_id, raw in zip(wanted, threads, strict=True):
                if raw is None:
                    continue
                thread_id = _text(raw)
                order = self._key("order", thread_id)
                at: Any = await self._client.zrank(order, message_id)
                if at is None:
                    continue
                low = max(0, at - before)
                around = await self._client.zrange(order, low, at + after)
                picked.setdefault(thread_id, {}).update(
                    {low + n: _text(i) for n, i in enumerate(around)})
        out: list[Message] = []
        for thread_id, positions in picked.items():
            out += await self._load([positions[p] for p in sorted(positions)], thread_id)
        return out

    # ------------------------------------------------------------------ working memory

    async def get_working_memory(self, key: str) -> str | None:
        """The working memory stored under ``key``, or ``None``."""
        with self._redis.translate(f"loading working memory {key!r}"):
            value = await self._client.hget(self._key("working"), key)
        return None if value is None else _text(value)

    async def set_working_memory(self, key: str, value: str) -> None:
        """Replace the working memory stored under ``key``."""
        with self._redis.translate(f"saving working memory {key!r}"):
            await self._client.hset(self._key("working"), key, value)

    # ------------------------------------------------------------------ vectors

    async def save_vectors(self, space: str, vectors: Sequence[StoredVector]) -> None:
        """Upsert vectors by message id and bump their scopes' versions, atomically."""
        args: list[str | bytes] = [self._p, space]
        for item in vectors:
            args += [item.message_id, item.thread_id,
                     b"" if item.vector is None else b"\x01" + item.vector,
                     json.dumps(vector_scopes(item))]
        if len(args) == 2:
            return
        with self._redis.translate(f"saving {len(vectors)} vector(s) of {space!r}"):
            await self._save_vectors(args=args)

    async def vector_version(self, space: str, scope: str) -> int:
        """The scope's version in the space (0 before any write)."""
        with self._redis.translate(f"reading the version of {scope!r}"):
            value = await self._client.hget(self._key("vecver", space), scope)
        return 0 if value is None else int(value)

    async def load_vectors(self, space: str, scope: str, *, after: int = 0,
                           ) -> AsyncIterator[VectorBatch]:
        """The scope's vectors written after sequence number ``after``, in write order."""
        index = self._key("vec", space, scope)
        cursor = f"({after}"
        while True:
            with self._redis.translate(f"loading vectors of {scope!r}"):
                rows: Any = await self._client.zrangebyscore(index, cursor, "+inf", start=0,
                                                        num=_BATCH, withscores=True)
                if not rows:
                    return
                ids = [_text(i) for i, _ in rows]
                threads = await self._client.hmget(self._key("vecthread", space), ids)
                data: Any = await self._client.hmget(self._key("vecdata", space), ids)
            yield VectorBatch(ids=ids, threads=[_text(t) for t in threads],
                              seqs=[int(score) for _, score in rows],
                              vectors=[bytes(v)[1:] if v else None for v in data])
            if len(rows) < _BATCH:
                return
            cursor = f"({int(rows[-1][1])}"

    async def unindexed_messages(self, space: str, scope: str, *,
                                 limit: int) -> list[Message]:
        """Up to ``limit`` messages of the scope without a vector in the space, oldest
        first."""
        if limit <= 0:
            return []
        column, key = scope_column(scope)
        order = self._key("order" if column == "thread_id" else "rorder", key)
        with self._redis.translate(f"listing unindexed messages of {scope!r}"):
            ids = [_text(i) for i in await self._client.zrange(order, 0, -1)]
            if not ids:
                return []
            scores = await self._client.zmscore(self._key("vec", space, scope), ids)
            missing = [i for i, s in zip(ids, scores, strict=True) if s is None][:limit]
            if not missing:
                return []
            threads = await self._client.hmget(self._key("msgthread"), missing)
            rows = await self._client.hmget(self._key("msgdata"), missing)
        return [load_message(_text(row) if row is not None else None,
                             thread_id=_text(t) if t is not None else None, row_id=i)
                for i, t, row in zip(missing, threads, rows, strict=True)]

    async def get_cached_embeddings(self, model: str, hashes: Sequence[str],
                                    ) -> dict[str, bytes]:
        """Cached embeddings of ``model`` by content hash (only those found)."""
        wanted = list(hashes)
        if not wanted:
            return {}
        with self._redis.translate(f"reading cached embeddings of {model!r}"):
            rows: Any = await self._client.hmget(self._key("embcache", model), wanted)
        return {h: bytes(v) for h, v in zip(wanted, rows, strict=True) if v is not None}

    async def cache_embeddings(self, model: str, vectors: Mapping[str, bytes]) -> None:
        """Remember embeddings of ``model`` by content hash."""
        if not vectors:
            return
        with self._redis.translate(f"caching embeddings of {model!r}"):
            await self._client.hset(self._key("embcache", model),
                                    mapping=dict(vectors))  # type: ignore[arg-type]


def _thread(thread_id: str, fields: Mapping[Any, Any]) -> Thread:
    row = {_text(k): _text(v) for k, v in fields.items()}
    return Thread(id=thread_id, resource_id=row.get("resource_id"),
                  created_at=to_datetime(float(row.get("created_at") or 0)),
                  updated_at=to_datetime(float(row.get("updated_at") or 0)),
                  title=row.get("title"),
                  metadata=load_metadata(row.get("metadata", "{}"), thread_id=thread_id))
