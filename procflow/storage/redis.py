"""Redis storage: runs shared by several processes or machines through one Redis server.

Key layout (ids are escaped so that ``:`` in an id cannot make two keys collide)::

    {prefix}:run:{workflow_id}:{run_id}     string  the run header (JSON)
    {prefix}:steps:{workflow_id}:{run_id}   hash    step path -> step result (JSON)
    {prefix}:runs                           zset    every run, scored by updated_at
    {prefix}:wfruns:{workflow_id}           zset    the workflow's runs, scored alike
    {prefix}:trace:{run_id}                 string  a run's trace, spans included (JSON)
    {prefix}:tracehead:{run_id}             string  the trace's header, no spans (JSON)
    {prefix}:traces                         zset    every trace, scored by started_at
    {prefix}:wftraces:{workflow_id}         zset    the workflow's traces, scored alike
    {prefix}:lease:{workflow_id}:{run_id}   string  the lease holder's id, expiring (PX)
    {prefix}:stream:{workflow_id}:{run_id}  list    an agent stream's chunks (JSON), in order
    {prefix}:lease:{workflow_id}:{run_id}#{path}     the lease of one distributed job
    {prefix}:join:{workflow_id}:{run_id}:{join}  set  the finished jobs of a fan-out

Run index members are the JSON array ``[workflow_id, run_id]``; trace index members are
the run id. ``list_traces`` reads only the small header documents. Writes are MULTI/EXEC
transactions; ``claim_run`` and ``save_trace`` are optimistic WATCH transactions; a lease
is taken and released by Lua scripts (atomic on the server) and expires by Redis's own
clock. A distributed job (``claim_job``, ``finish_job``) is claimed and finished by
one script each: it never writes the run's header, only its own step rows. This
module imports ``redis``; ``procflow.storage`` only imports it when ``RedisStorage`` is
first used.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar, final

import redis.asyncio as aioredis
from redis.exceptions import WatchError
from redis.typing import EncodableT, FieldT

from procflow._backends import AsyncResource, lease_ttl
from procflow._backends.redis import (
    CONNECT_TIMEOUT,
    OPERATION_TIMEOUT,
    RedisConnection,
    escape_key,
)
from procflow.errors import SnapshotCorruptedError, StorageError
from procflow.records import Lease, RunSnapshot, RunStatus, StepResult, TraceRecord
from procflow.storage.base import Storage
from procflow.storage.codec import (
    dump_run,
    dump_steps,
    dump_trace,
    listed_snapshot,
    load_job_run,
    load_run,
    load_snapshot_json,
    load_trace_json,
)
from procflow.storage.retention import PrunedRun, oldest_first, trace_time

__all__ = ["JobClaim", "RedisStorage"]

_K = TypeVar("_K")

_LIST_BATCH: Final = 200
_MAX_CLAIM_ATTEMPTS: Final = 100
_MAX_TRACE_SAVE_ATTEMPTS: Final = 100

# KEYS[1] the lease; ARGV[1] the owner, ARGV[2] the ttl in ms, ARGV[3] the holder it may
# be stolen from ("" for none). Free, expired (gone), the owner's own or the dead
# holder's: set it; another owner's: refuse.
_ACQUIRE: Final = """
local held = redis.call('GET', KEYS[1])
if held and held ~= ARGV[1] and (ARGV[3] == '' or held ~= ARGV[3]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""
_RELEASE: Final = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
"""

# A distributed job's claim. KEYS: the run header, the step rows, the job's lease, the
# run's lease. ARGV: the job's path, the claiming owner, the ttl in ms, the holder it may
# be stolen from ("" for none), the parked run's lease owner, the HSCAN pattern of the
# job's inner rows ("" for none: a step), then the paths of the rows the job may read.
# A job whose row is stored finished is "done" (it is never run again); a run not
# stored is "missing"; a job leased by another owner is "busy" (with that owner).
# Otherwise the job's lease is taken, the parked run's renewed, and the reply is
# "ready", the header, then path/row pairs: the rows asked for, the job's inner rows
# and the blobs they reference (large values, "$blob:<sha256>").
# Entries ARGV[2..] at positions ARGV[1], ...: a position already stored is kept;
# position 0 begins a new log.
_APPEND_STREAM: Final = """
local start = tonumber(ARGV[1])
if start == 0 then redis.call('DEL', KEYS[1]) end
local have = redis.call('LLEN', KEYS[1])
for i = 2, #ARGV do
  if start + i - 2 >= have then redis.call('RPUSH', KEYS[1], ARGV[i]) end
end
return 1
"""

_CLAIM_JOB: Final = """
local row = redis.call('HGET', KEYS[2], ARGV[1])
if row then
  local ok, doc = pcall(cjson.decode, row)
  if ok and type(doc) == 'table' and (doc['status'] == 'success' or
      doc['status'] == 'failed' or doc['status'] == 'suspended') then
    return {'done'}
  end
end
local header = redis.call('GET', KEYS[1])
if not header then return {'missing'} end
local held = redis.call('GET', KEYS[3])
if held and held ~= ARGV[2] and held ~= ARGV[4] then return {'busy', held} end
redis.call('SET', KEYS[3], ARGV[2], 'PX', ARGV[3])
local run = redis.call('GET', KEYS[4])
if not run or run == ARGV[5] then redis.call('SET', KEYS[4], ARGV[5], 'PX', ARGV[3]) end
local out = {'ready', header}
local texts = {header}
local function add(path, text)
  out[#out + 1] = path
  out[#out + 1] = text
  texts[#texts + 1] = text
end
if row then add(ARGV[1], row) end
local n = #ARGV
for first = 7, n, 1000 do
  local last = math.min(first + 999, n)
  local values = redis.call('HMGET', KEYS[2], unpack(ARGV, first, last))
  for i = 1, last - first + 1 do
    if values[i] then add(ARGV[first + i - 1], values[i]) end
  end
end
if ARGV[6] ~= '' then
  local cursor = '0'
  repeat
    local page = redis.call('HSCAN', KEYS[2], cursor, 'MATCH', ARGV[6], 'COUNT', 1000)
    cursor = page[1]
    for i = 1, #page[2], 2 do add(page[2][i], page[2][i + 1]) end
  until cursor == '0'
end
local seen = {}
for _, text in ipairs(texts) do
  for digest in string.gmatch(text, '"sha256":"(%x+)"') do
    if not seen[digest] then
      seen[digest] = true
      local blob = redis.call('HGET', KEYS[2], '$blob:' .. digest)
      if blob then add('$blob:' .. digest, blob) end
    end
  end
end
return out
"""

# Renew a running job's lease and its parked run's. KEYS: the job's lease, the run's.
# ARGV: the job's owner, the ttl in ms, the parked run's lease owner.
_RENEW_JOB: Final = """
local held = redis.call('GET', KEYS[1])
if held and held ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local run = redis.call('GET', KEYS[2])
if not run or run == ARGV[3] then redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[2]) end
return 1
"""

# Finish a job: store its rows, add it to its fan-out's finished set and release its
# lease, atomically. KEYS: the step rows, the join set, the job's lease. ARGV: the job's
# path, its owner ("" when it was found done: nothing to store), the join set's ttl in
# seconds, then path/row pairs. Returns how many jobs of the fan-out are finished, or -1
# (nothing stored) if another owner took the job's lease.
_FINISH_JOB: Final = """
if ARGV[2] ~= '' then
  local held = redis.call('GET', KEYS[3])
  if held and held ~= ARGV[2] then return -1 end
  if held then redis.call('DEL', KEYS[3]) end
end
local n = #ARGV
for first = 4, n, 1000 do
  redis.call('HSET', KEYS[1], unpack(ARGV, first, math.min(first + 999, n)))
end
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return redis.call('SCARD', KEYS[2])
"""

_JOIN_TTL: Final = 7 * 24 * 3600
"""Seconds a fan-out's finished set is kept after its last job."""


@dataclass(frozen=True, slots=True)
class JobClaim:
    """What ``RedisStorage.claim_job`` found.

    Attributes:
        done: The job's result is stored finished: it must not run again.
        holder: Another owner holds the job's lease (nothing was taken).
        snapshot: The run's header (when the job was claimed), without its input.
        steps: The stored rows the job needs: the ones asked for, its own inner rows.
        load_input: Decodes the run's input (a foreach's may hold every item: it is
            decoded only if the job asks for it).
    """

    done: bool = False
    holder: str | None = None
    snapshot: RunSnapshot | None = None
    steps: dict[str, StepResult] = field(default_factory=dict)
    load_input: Callable[[], Any] | None = None



@final
class RedisStorage(AsyncResource, Storage):
    """A ``Storage`` on a Redis server (``redis.asyncio``; asyncio event loops only).

    Args:
        url: The server, e.g. ``"redis://:password@host:6379/0"``.
        prefix: Namespace of every key this storage writes.
        client: A ``redis.asyncio.Redis`` to use instead of connecting to ``url``; it is
            not closed by ``aclose()``.
        timeout: Seconds each command waits for the server's reply (``None``: no
            limit); a command past it raises ``StorageError``. Applies to a client made
            from ``url``; a given ``client`` keeps its own ``socket_timeout``.
        connect_timeout: Seconds to wait for a connection (a client made from ``url``).

    Example:
        ```python
        async with RedisStorage("redis://127.0.0.1:6379", prefix="myapp") as storage:
            run = wf.create_run(storage=storage)
        ```
    """

    persistent = True
    keeps_objects = False
    process_local = False
    keeps_streams = True

    def __init__(self, url: str = "redis://127.0.0.1:6379", *, prefix: str = "procflow",
                 client: aioredis.Redis | None = None,
                 timeout: float | None = OPERATION_TIMEOUT,
                 connect_timeout: float = CONNECT_TIMEOUT) -> None:
        self._prefix = prefix
        self._redis = RedisConnection(url, client=client, name="Redis storage",
                                      connect_timeout=connect_timeout, timeout=timeout)
        self._client = self._redis.client
        self._claim_job = self._client.register_script(_CLAIM_JOB)
        self._append_stream = self._client.register_script(_APPEND_STREAM)
        self._renew_job = self._client.register_script(_RENEW_JOB)
        self._finish_job = self._client.register_script(_FINISH_JOB)

    @property
    def prefix(self) -> str:
        """The key namespace."""
        return self._prefix

    @property
    def client(self) -> aioredis.Redis:
        """The ``redis.asyncio`` client (shared by ``RedisMemoryStore(storage)``, which
        leaves it open)."""
        return self._client

    def __repr__(self) -> str:
        return f"RedisStorage({self._redis.display!r}, prefix={self._prefix!r})"

    # ------------------------------------------------------------------ keys

    def _run_key(self, workflow_id: str, run_id: str) -> str:
        return f"{self._prefix}:run:{escape_key(workflow_id)}:{escape_key(run_id)}"

    def _steps_key(self, workflow_id: str, run_id: str) -> str:
        return f"{self._prefix}:steps:{escape_key(workflow_id)}:{escape_key(run_id)}"

    def _index_key(self, workflow_id: str | None) -> str:
        if workflow_id is None:
            return f"{self._prefix}:runs"
        return f"{self._prefix}:wfruns:{escape_key(workflow_id)}"

    def _stream_key(self, workflow_id: str, run_id: str) -> str:
        return f"{self._prefix}:stream:{escape_key(workflow_id)}:{escape_key(run_id)}"

    def _lease_key(self, workflow_id: str, run_id: str) -> str:
        return f"{self._prefix}:lease:{escape_key(workflow_id)}:{escape_key(run_id)}"

    def _join_key(self, workflow_id: str, run_id: str, join: str) -> str:
        return (f"{self._prefix}:join:{escape_key(workflow_id)}:{escape_key(run_id)}:"
                f"{escape_key(join)}")

    def _trace_key(self, run_id: str) -> str:
        return f"{self._prefix}:trace:{escape_key(run_id)}"

    def _trace_head_key(self, run_id: str) -> str:
        return f"{self._prefix}:tracehead:{escape_key(run_id)}"

    def _trace_index_key(self, workflow_id: str | None) -> str:
        if workflow_id is None:
            return f"{self._prefix}:traces"
        return f"{self._prefix}:wftraces:{escape_key(workflow_id)}"

    # ------------------------------------------------------------------ Storage

    async def save_snapshot(self, snapshot: RunSnapshot,
                            steps: Mapping[str, StepResult]) -> None:
        """Write the header, the given step results and the indexes in one MULTI/EXEC.

        Raises:
            StorageError: The server could not be reached or refused the write.
        """
        workflow_id, run_id = snapshot.workflow_id, snapshot.run_id
        queue_run = self._run_writes(snapshot, steps)
        with self._redis.translate(f"saving run {run_id!r} of workflow {workflow_id!r}"):
            async with self._client.pipeline(transaction=True) as pipe:
                queue_run(pipe)
                await pipe.execute()

    def _run_writes(self, snapshot: RunSnapshot,
                    steps: Mapping[str, StepResult]) -> Callable[[Any], None]:
        """Encode a run now; the returned function queues its writes (header, step rows,
        indexes) on a pipeline."""
        workflow_id, run_id = snapshot.workflow_id, snapshot.run_id
        header, rows = dump_run(snapshot, steps)
        fields: dict[FieldT, EncodableT] = dict(rows)
        member = json.dumps([workflow_id, run_id])

        def queue(pipe: Any) -> None:
            pipe.set(self._run_key(workflow_id, run_id), header)
            if fields:
                pipe.hset(self._steps_key(workflow_id, run_id), mapping=fields)
            pipe.zadd(self._index_key(None), {member: snapshot.updated_at})
            pipe.zadd(self._index_key(workflow_id), {member: snapshot.updated_at})

        return queue

    async def save_and_release(self, snapshot: RunSnapshot, steps: Mapping[str, StepResult],
                               *, trace: TraceRecord | None, owner: str | None) -> None:
        """Write the trace, the run and release ``owner``'s lease in one WATCH/MULTI/EXEC
        (see ``Storage.save_and_release``): one round trip to queue, one to execute.

        Raises:
            StorageError: The server could not be reached, refused the write, or the
                trace kept changing.
        """
        run_id = snapshot.run_id
        queue_run = self._run_writes(snapshot, steps)
        queue_trace = None if trace is None else self._trace_writes(trace)
        lease_key = self._lease_key(snapshot.workflow_id, run_id)

        async def queue(pipe: Any) -> None:
            if queue_trace is not None:
                await queue_trace(pipe)
            queue_run(pipe)
            if owner is not None:
                pipe.eval(_RELEASE, 1, lease_key, owner)

        await self._write_watched(
            f"saving run {run_id!r} of workflow {snapshot.workflow_id!r}", run_id, queue)

    async def _write_watched(self, operation: str, run_id: str,
                             queue: Callable[[Any], Awaitable[None]]) -> None:
        """Queue writes in a transaction (``queue`` may WATCH keys first) and execute it,
        again while a watched key changed in between (a trace saved meanwhile).

        Raises:
            StorageError: The server failed, or the trace kept changing.
        """
        with self._redis.translate(operation):
            async with self._client.pipeline(transaction=True) as pipe:
                for _ in range(_MAX_TRACE_SAVE_ATTEMPTS):
                    await queue(pipe)
                    try:
                        await pipe.execute()
                    except WatchError:
                        continue
                    return
        raise StorageError(f"Redis storage at {self._redis.display}: saving the trace of run "
                           f"{run_id!r} failed: the trace kept changing "
                           f"({_MAX_TRACE_SAVE_ATTEMPTS} attempts)")

    async def load_snapshot(self, workflow_id: str, run_id: str,
                            ) -> tuple[RunSnapshot, dict[str, StepResult]] | None:
        """Load the run's header and all its step results, or ``None`` if not stored.

        Raises:
            SnapshotCorruptedError: A stored value cannot be decoded (it is left as is).
            StorageError: The server could not be reached.
        """
        with self._redis.translate(f"loading run {run_id!r} of workflow {workflow_id!r}"):
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.get(self._run_key(workflow_id, run_id))
                pipe.hgetall(self._steps_key(workflow_id, run_id))
                header, fields = await pipe.execute()
        if header is None:
            return None
        rows = [(_field_name(raw_path, workflow_id=workflow_id, run_id=run_id), value)
                for raw_path, value in fields.items()]
        return load_run(header, rows, workflow_id=workflow_id, run_id=run_id)

    async def list_runs(self, *, workflow_id: str | None = None,
                        status: RunStatus | None = None,
                        limit: int | None = None) -> list[RunSnapshot]:
        """Stored headers, newest first by ``updated_at``.

        Raises:
            StorageError: The server could not be reached.
        """
        if limit is not None and limit <= 0:
            return []
        index = self._index_key(workflow_id)
        runs: list[RunSnapshot] = []
        rows = self._scan(index, "listing runs", self._member_ids,
                          lambda ids: self._run_key(*ids))
        async with aclosing(rows):
            async for (wf, run), header in rows:
                snapshot = listed_snapshot(header, workflow_id=wf, run_id=run)
                if status is None or snapshot.status == status:
                    runs.append(snapshot)
                    if limit is not None and len(runs) >= limit:
                        break
        return runs

    async def delete_run(self, workflow_id: str, run_id: str) -> None:
        """Delete the header, the step results, the lease, the index entries and the
        run's trace (when it is this workflow's), atomically (no error if unknown).

        Raises:
            StorageError: The server could not be reached, or the trace kept changing.
        """
        await self._delete(workflow_id, run_id)

    async def list_finished(self, *, before: float, workflow_id: str | None,
                            statuses: frozenset[str]) -> list[PrunedRun]:
        """Finished runs with a status in ``statuses`` last updated before ``before``,
        oldest first: the run index read up to ``before``, then those headers.

        Raises:
            StorageError: The server could not be reached.
        """
        index = self._index_key(workflow_id)
        found: list[PrunedRun] = []
        batches = self._scan_before(index, before, "listing finished runs", self._member_ids,
                                    lambda ids: self._run_key(*ids))
        async with aclosing(batches):
            async for batch in batches:
                for (wf, run), header in batch:
                    snapshot = listed_snapshot(header, workflow_id=wf, run_id=run)
                    if snapshot.status in statuses and snapshot.updated_at < before:
                        found.append(PrunedRun(wf, run, snapshot.status, snapshot.updated_at))
        return oldest_first(found)

    async def delete_finished(self, runs: Sequence[PrunedRun]) -> list[PrunedRun]:
        """Delete each of ``runs`` as ``delete_run`` does, atomically, if it is still as
        listed and holds no live lease (WATCH on its header, lease and trace header);
        return those deleted.

        Raises:
            StorageError: The server could not be reached, or a run kept changing.
        """
        return [run for run in runs if await self._delete_finished(run)]

    async def _delete_finished(self, run: PrunedRun) -> bool:
        workflow_id, run_id = run.workflow_id, run.run_id
        run_key = self._run_key(workflow_id, run_id)
        lease_key = self._lease_key(workflow_id, run_id)

        async def changed(pipe: Any) -> bool:
            header = await pipe.get(run_key)
            if header is None or await pipe.exists(lease_key):
                return True
            stored = listed_snapshot(header, workflow_id=workflow_id, run_id=run_id)
            return stored.status != run.status or stored.updated_at != run.updated_at

        return await self._delete(workflow_id, run_id, keep=changed,
                                  watch=(run_key, lease_key))

    async def _delete(self, workflow_id: str, run_id: str,
                      keep: Callable[[Any], Awaitable[bool]] | None = None,
                      watch: Sequence[str] = ()) -> bool:
        """Delete the run (its trace too, when it is this workflow's) in one MULTI,
        watching its trace header and ``watch``; ``False`` without deleting when ``keep``
        (reading through the watching pipeline) says the run must stay."""
        head_key = self._trace_head_key(run_id)
        with self._redis.translate(f"deleting run {run_id!r} of workflow {workflow_id!r}"):
            async with self._client.pipeline(transaction=True) as pipe:
                for _ in range(_MAX_TRACE_SAVE_ATTEMPTS):
                    await pipe.watch(*watch, head_key)
                    if keep is not None and await keep(pipe):
                        return False
                    owner = _head_workflow(await pipe.get(head_key))
                    pipe.multi()  # type: ignore[no-untyped-call]  # untyped in redis-py
                    self._queue_delete(pipe, workflow_id, run_id, trace=owner == workflow_id)
                    try:
                        await pipe.execute()
                    except WatchError:
                        continue
                    return True
        raise StorageError(f"Redis storage at {self._redis.display}: deleting run {run_id!r} "
                           f"of workflow {workflow_id!r} failed: it kept changing "
                           f"({_MAX_TRACE_SAVE_ATTEMPTS} attempts)")

    def _queue_delete(self, pipe: Any, workflow_id: str, run_id: str, *, trace: bool) -> None:
        """Queue in ``pipe`` what deleting a run deletes (its trace too when ``trace``)."""
        member = json.dumps([workflow_id, run_id])
        pipe.delete(self._run_key(workflow_id, run_id), self._steps_key(workflow_id, run_id),
                    self._lease_key(workflow_id, run_id), self._stream_key(workflow_id, run_id))
        pipe.zrem(self._index_key(None), member)
        pipe.zrem(self._index_key(workflow_id), member)
        if trace:
            pipe.delete(self._trace_key(run_id), self._trace_head_key(run_id))
            pipe.zrem(self._trace_index_key(None), run_id)
            pipe.zrem(self._trace_index_key(workflow_id), run_id)

    async def list_orphan_traces(self, *, before: float, workflow_id: str | None,
                                 statuses: frozenset[str] | None) -> list[PrunedRun]:
        """Traces with no run record that ended before ``before``, with a status in
        ``statuses`` (``None``: any), oldest first: the trace index read up to ``before``
        (a trace starts before it ends), then those headers and whether their run is
        stored. A header that cannot be decoded is left alone.

        Raises:
            StorageError: The server could not be reached.
        """
        index = self._trace_index_key(workflow_id)
        found: list[PrunedRun] = []
        batches = self._scan_before(index, before, "listing traces without a run",
                                    lambda member: self._trace_member(member, index),
                                    self._trace_head_key)
        async with aclosing(batches):
            async for batch in batches:
                rows: list[PrunedRun] = []
                for run_id, head in batch:
                    try:
                        trace = load_trace_json(head, run_id=run_id)
                    except SnapshotCorruptedError:
                        continue
                    at = trace_time(trace)
                    if at < before and (statuses is None or trace.status in statuses) \
                            and (workflow_id is None or trace.workflow_id == workflow_id):
                        rows.append(PrunedRun(trace.workflow_id, run_id, trace.status, at,
                                              trace_only=True))
                if rows:
                    with self._redis.translate("listing traces without a run"):
                        async with self._client.pipeline(transaction=False) as pipe:
                            for row in rows:
                                pipe.exists(self._run_key(row.workflow_id, row.run_id))
                            stored = await pipe.execute()
                    found += [row for row, exists in zip(rows, stored, strict=True)
                              if not exists]
        return oldest_first(found)

    async def delete_orphan_traces(self, traces: Sequence[PrunedRun]) -> list[PrunedRun]:
        """Delete each of ``traces`` (the trace, its header and index entries) that is
        still as listed and still has no run record (WATCH on the trace header and the
        run's header); return those deleted.

        Raises:
            StorageError: The server could not be reached, or a trace kept changing.
        """
        return [trace for trace in traces if await self._delete_orphan_trace(trace)]

    async def _delete_orphan_trace(self, listed: PrunedRun) -> bool:
        run_id = listed.run_id
        head_key = self._trace_head_key(run_id)
        run_key = self._run_key(listed.workflow_id, run_id)
        with self._redis.translate(f"deleting the trace of run {run_id!r}"):
            async with self._client.pipeline(transaction=True) as pipe:
                for _ in range(_MAX_TRACE_SAVE_ATTEMPTS):
                    await pipe.watch(head_key, run_key)
                    head = await pipe.get(head_key)
                    if head is None or await pipe.exists(run_key):
                        return False
                    try:
                        stored = load_trace_json(head, run_id=run_id)
                    except SnapshotCorruptedError:
                        return False
                    if (stored.workflow_id, stored.status, trace_time(stored)) != (
                            listed.workflow_id, listed.status, listed.updated_at):
                        return False
                    pipe.multi()  # type: ignore[no-untyped-call]  # untyped in redis-py
                    pipe.delete(self._trace_key(run_id), head_key)
                    pipe.zrem(self._trace_index_key(None), run_id)
                    pipe.zrem(self._trace_index_key(listed.workflow_id), run_id)
                    try:
                        await pipe.execute()
                    except WatchError:
                        continue
                    return True
        raise StorageError(f"Redis storage at {self._redis.display}: deleting the trace of "
                           f"run {run_id!r} failed: it kept changing "
                           f"({_MAX_TRACE_SAVE_ATTEMPTS} attempts)")

    async def claim_run(self, workflow_id: str, run_id: str, *, expected: RunStatus,
                        new: RunStatus) -> bool:
        """Atomically set the run's status to ``new`` if it is ``expected`` (WATCH/MULTI).

        Raises:
            SnapshotCorruptedError: The run's stored header cannot be decoded.
            StorageError: The server could not be reached, or the key kept changing.
        """
        key = self._run_key(workflow_id, run_id)
        with self._redis.translate(f"claiming run {run_id!r} of workflow {workflow_id!r}"):
            async with self._client.pipeline(transaction=True) as pipe:
                for _ in range(_MAX_CLAIM_ATTEMPTS):
                    await pipe.watch(key)
                    header = await pipe.get(key)
                    if header is None:
                        return False
                    snapshot = load_snapshot_json(header, workflow_id=workflow_id,
                                                  run_id=run_id)
                    if snapshot.status != expected:
                        return False
                    # Patch the stored JSON rather than re-encode the decoded snapshot,
                    # so that nothing but the status changes.
                    document = json.loads(header)
                    document["status"] = new
                    pipe.multi()  # type: ignore[no-untyped-call]  # untyped in redis-py
                    pipe.set(key, json.dumps(document, ensure_ascii=False,
                                             separators=(",", ":")))
                    try:
                        await pipe.execute()
                    except WatchError:
                        continue
                    return True
        raise StorageError(f"Redis storage at {self._redis.display}: claiming run {run_id!r} of "
                           f"workflow {workflow_id!r} failed: the run kept changing "
                           f"({_MAX_CLAIM_ATTEMPTS} attempts)")

    async def acquire_lease(self, workflow_id: str, run_id: str, *, owner: str,
                            ttl: float, steal_from: str | None = None) -> Lease | None:
        """Take or renew the run's lease in one server-side script (see
        ``Storage.acquire_lease``); the key expires by the server's clock.

        Raises:
            ValueError: ``ttl`` is not a finite number > 0.
            StorageError: The server could not be reached.
        """
        milliseconds = max(1, round(lease_ttl(ttl) * 1000))
        now = time.time()
        with self._redis.translate(f"taking the lease of run {run_id!r}"):
            taken = await self._client.eval(_ACQUIRE, 1, self._lease_key(workflow_id, run_id),
                                            owner, milliseconds, steal_from or "")
        return Lease(owner, now + milliseconds / 1000) if taken else None

    async def release_lease(self, workflow_id: str, run_id: str, *, owner: str) -> None:
        """Delete the lease key if ``owner`` holds it (one server-side script)."""
        with self._redis.translate(f"releasing the lease of run {run_id!r}"):
            await self._client.eval(_RELEASE, 1, self._lease_key(workflow_id, run_id), owner)

    async def get_lease(self, workflow_id: str, run_id: str) -> Lease | None:
        """The run's live lease (expiry from the key's remaining time), or ``None``."""
        key = self._lease_key(workflow_id, run_id)
        with self._redis.translate(f"reading the lease of run {run_id!r}"):
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.get(key)
                pipe.pttl(key)
                owner, remaining = await pipe.execute()
        if owner is None or remaining is None or remaining < 0:
            return None
        name = owner.decode(errors="replace") if isinstance(owner, bytes) else str(owner)
        return Lease(name, time.time() + remaining / 1000)

    async def append_stream(self, workflow_id: str, run_id: str, items: Sequence[str], *,
                            start: int) -> None:
        """Append to the run's stream list in one script (``start == 0`` first deletes
        the old log; a position already stored is kept).

        Raises:
            StorageError: The server could not be reached.
        """
        with self._redis.translate(f"appending to the stream log of run {run_id!r}"):
            await self._append_stream(keys=[self._stream_key(workflow_id, run_id)],
                                      args=[start, *items])

    async def read_stream(self, workflow_id: str, run_id: str, *, start: int = 0,
                          ) -> list[str]:
        """The run's stream list from position ``start`` on.

        Raises:
            StorageError: The server could not be reached.
        """
        with self._redis.translate(f"reading the stream log of run {run_id!r}"):
            items = await self._client.lrange(self._stream_key(workflow_id, run_id), start, -1)
        return [item.decode() if isinstance(item, bytes) else str(item) for item in items]

    async def save_trace(self, trace: TraceRecord) -> None:
        """Write the trace, its header and its index entries in one WATCH/MULTI/EXEC.

        A trace replacing one of another workflow leaves that workflow's index too.

        Raises:
            StorageError: The server could not be reached, refused the write, or the
                trace kept changing.
        """
        run_id = trace.run_id
        await self._write_watched(f"saving the trace of run {run_id!r}", run_id,
                                  self._trace_writes(trace))

    def _trace_writes(self, trace: TraceRecord) -> Callable[[Any], Awaitable[None]]:
        """Encode a trace now; the returned function watches its header key, then starts
        a pipeline's MULTI and queues the trace's writes (document, header, indexes; a
        trace replacing one of another workflow leaves that workflow's index)."""
        run_id = trace.run_id
        document = dump_trace(trace)
        head = dump_trace(dataclasses.replace(trace, spans=[]))
        head_key = self._trace_head_key(run_id)

        async def queue(pipe: Any) -> None:
            await pipe.watch(head_key)
            previous = _head_workflow(await pipe.get(head_key))
            pipe.multi()
            pipe.set(self._trace_key(run_id), document)
            pipe.set(head_key, head)
            if previous is not None and previous != trace.workflow_id:
                pipe.zrem(self._trace_index_key(previous), run_id)
            pipe.zadd(self._trace_index_key(None), {run_id: trace.started_at})
            pipe.zadd(self._trace_index_key(trace.workflow_id), {run_id: trace.started_at})

        return queue

    async def load_trace(self, run_id: str) -> TraceRecord | None:
        """The trace of the run, spans included, or ``None`` if none is stored.

        Raises:
            SnapshotCorruptedError: The stored trace cannot be decoded (it is left as is).
            StorageError: The server could not be reached.
        """
        with self._redis.translate(f"loading the trace of run {run_id!r}"):
            document = await self._client.get(self._trace_key(run_id))
        if document is None:
            return None
        return load_trace_json(document, run_id=run_id)

    async def list_traces(self, *, workflow_id: str | None = None, status: str | None = None,
                          limit: int | None = None) -> list[TraceRecord]:
        """Stored traces without their spans, newest first by ``started_at``; only the
        header documents are read.

        Raises:
            SnapshotCorruptedError: A listed trace's header cannot be decoded.
            StorageError: The server could not be reached.
        """
        if limit is not None and limit <= 0:
            return []
        index = self._trace_index_key(workflow_id)
        traces: list[TraceRecord] = []
        rows = self._scan(index, "listing traces", lambda m: self._trace_member(m, index),
                          self._trace_head_key)
        async with aclosing(rows):
            async for run_id, head in rows:
                trace = load_trace_json(head, run_id=run_id)
                if ((workflow_id is None or trace.workflow_id == workflow_id)
                        and (status is None or trace.status == status)):
                    traces.append(dataclasses.replace(trace, spans=[]))
                    if limit is not None and len(traces) >= limit:
                        break
        return traces

    # ------------------------------------------------------------------ distributed jobs

    async def claim_job(self, workflow_id: str, run_id: str, path: str, *, owner: str,
                        ttl: float, parked_owner: str, reads: Sequence[str] = (),
                        inner: bool = False, steal_from: str | None = None,
                        ) -> JobClaim | None:
        """Claim one job of a parked run's distributed fan-out, in one server-side script.

        A job whose row is stored finished is ``done`` (never run again); one whose
        lease another owner holds is returned with that ``holder``. Otherwise the job's
        lease (``{run_id}#{path}``) is taken for ``ttl`` seconds, the parked run's lease
        (held by ``parked_owner``, or free) is renewed, and the claim holds what the job
        needs: the run's header and the rows at ``reads`` (and, with ``inner``, the
        rows under the job's path: a nested workflow's steps), not the whole run.

        Returns:
            The claim, or ``None`` if the run is not stored.

        Raises:
            SnapshotCorruptedError: A stored value cannot be decoded.
            StorageError: The server could not be reached.
        """
        milliseconds = max(1, round(lease_ttl(ttl) * 1000))
        pattern = _glob_escape(path) + "[.[]*" if inner else ""
        keys = [self._run_key(workflow_id, run_id), self._steps_key(workflow_id, run_id),
                self._lease_key(workflow_id, f"{run_id}#{path}"),
                self._lease_key(workflow_id, run_id)]
        with self._redis.translate(f"claiming job {path!r} of run {run_id!r}"):
            reply = await self._claim_job(keys=keys, args=[
                path, owner, milliseconds, steal_from or "", parked_owner, pattern, *reads])
        status = _text(reply[0])
        if status == "done":
            return JobClaim(done=True)
        if status == "missing":
            return None
        if status == "busy":
            return JobClaim(holder=_text(reply[1]))
        rows = [(_field_name(reply[i], workflow_id=workflow_id, run_id=run_id), reply[i + 1])
                for i in range(2, len(reply), 2)]
        snapshot, steps, load_input = load_job_run(reply[1], rows, workflow_id=workflow_id,
                                                   run_id=run_id)
        return JobClaim(snapshot=snapshot, steps=steps, load_input=load_input)

    async def renew_job(self, workflow_id: str, run_id: str, path: str, *, owner: str,
                        ttl: float, parked_owner: str) -> bool:
        """Renew a claimed job's lease and its parked run's (a heartbeat).

        Returns:
            ``False`` if another owner took the job's lease.
        """
        milliseconds = max(1, round(lease_ttl(ttl) * 1000))
        keys = [self._lease_key(workflow_id, f"{run_id}#{path}"),
                self._lease_key(workflow_id, run_id)]
        with self._redis.translate(f"renewing the lease of job {path!r} of run {run_id!r}"):
            renewed = await self._renew_job(keys=keys, args=[owner, milliseconds,
                                                             parked_owner])
        return bool(renewed)

    async def save_steps(self, workflow_id: str, run_id: str,
                         steps: Mapping[str, StepResult]) -> None:
        """Write step results without the run's header (a job's inner steps)."""
        fields: dict[FieldT, EncodableT] = dict(dump_steps(steps))
        if not fields:
            return
        with self._redis.translate(f"saving steps of run {run_id!r}"):
            await self._client.hset(self._steps_key(workflow_id, run_id), mapping=fields)

    async def finish_job(self, workflow_id: str, run_id: str, path: str, *, join: str,
                         owner: str | None, steps: Mapping[str, StepResult]) -> int:
        """Store a job's results, count it finished in its fan-out ``join`` and release its
        lease, atomically (one server-side script).

        Args:
            owner: The claim's owner; ``None`` for a job found done (``steps`` empty).
            steps: The job's rows not stored yet (its own result among them).

        Returns:
            How many jobs of the fan-out are finished, or -1 if another owner took the
            job's lease (nothing was stored: that owner finishes the job).

        Raises:
            UnstorableValueError: A value cannot be stored.
            StorageError: The server could not be reached.
        """
        rows = [part for row in dump_steps(steps) for part in row]
        keys = [self._steps_key(workflow_id, run_id), self._join_key(workflow_id, run_id, join),
                self._lease_key(workflow_id, f"{run_id}#{path}")]
        with self._redis.translate(f"finishing job {path!r} of run {run_id!r}"):
            finished = await self._finish_job(keys=keys, args=[path, owner or "", _JOIN_TTL,
                                                               *rows])
        return int(finished)

    async def finished_jobs(self, workflow_id: str, run_id: str, join: str) -> int:
        """How many jobs of the fan-out ``join`` are finished (``finish_job``)."""
        with self._redis.translate(f"counting the finished jobs of run {run_id!r}"):
            return int(await self._client.scard(self._join_key(workflow_id, run_id, join)))

    async def release_job(self, workflow_id: str, run_id: str, path: str, *,
                          owner: str) -> None:
        """Release a claimed job's lease (it stopped unfinished: another may take it)."""
        await self.release_lease(workflow_id, f"{run_id}#{path}", owner=owner)

    async def aclose(self) -> None:
        """Close the connection pool (unless the client was given by the caller)."""
        await self._redis.aclose()

    # ------------------------------------------------------------------ helpers

    async def _scan_before(self, index: str, before: float, operation: str,
                           member_key: Callable[[object], _K],
                           document_key: Callable[[_K], str],
                           ) -> AsyncGenerator[list[tuple[_K, Any]]]:
        """Batches of ``(key, document)`` for the members of the ``index`` zset scored
        below ``before``, lowest first; a document missing (deleted since the index was
        read) is skipped."""
        start = 0
        while True:
            with self._redis.translate(operation):
                members = await self._client.zrangebyscore(index, "-inf", f"({before!r}",
                                                           start=start, num=_LIST_BATCH)
                keys = [member_key(member) for member in members]
                documents = (await self._client.mget([document_key(k) for k in keys])
                             if keys else [])
            yield [(key, document) for key, document in zip(keys, documents, strict=True)
                   if document is not None]
            if len(members) < _LIST_BATCH:
                return
            start += len(members)

    async def _scan(self, index: str, operation: str, member_key: Callable[[object], _K],
                    document_key: Callable[[_K], str]) -> AsyncGenerator[tuple[_K, Any]]:
        """``(key, document)`` for the members of the ``index`` zset, highest score first,
        read in batches; a document missing (deleted since the index was read, or a
        trace written without its header) is skipped, and so is a damaged member (it
        names no run; logged): the other runs stay listed."""
        start = 0
        while True:
            with self._redis.translate(operation):
                members = await self._client.zrevrange(index, start, start + _LIST_BATCH - 1)
                keys = _readable(members, member_key)
                documents = (await self._client.mget([document_key(k) for k in keys])
                             if keys else [])
            for key, document in zip(keys, documents, strict=True):
                if document is not None:
                    yield key, document
            if len(members) < _LIST_BATCH:
                return
            start += len(members)

    def _member_ids(self, member: object) -> tuple[str, str]:
        if isinstance(member, str | bytes):
            try:
                workflow_id, run_id = json.loads(member)
            except (ValueError, TypeError):
                pass
            else:
                if isinstance(workflow_id, str) and isinstance(run_id, str):
                    return workflow_id, run_id
        raise SnapshotCorruptedError(
            f"Redis storage at {self._redis.display}: the run index {self._index_key(None)!r} "
            f"holds a member that is not [workflow_id, run_id]: {member!r}")


    def _trace_member(self, member: object, index: str) -> str:
        if isinstance(member, str):
            return member
        if isinstance(member, bytes):
            try:
                return member.decode()
            except UnicodeDecodeError:
                pass
        raise SnapshotCorruptedError(
            f"Redis storage at {self._redis.display}: the trace index {index!r} holds a member "
            f"that is not a run id: {member!r}")


def _readable(members: list[Any], member_key: Callable[[object], _K]) -> list[_K]:
    """The keys of the index ``members``, a damaged member left out (logged)."""
    keys: list[_K] = []
    for member in members:
        try:
            keys.append(member_key(member))
        except SnapshotCorruptedError as exc:
            logging.getLogger("procflow").warning("%s; it is not listed", exc)
    return keys


def _head_workflow(head: object) -> str | None:
    """The workflow named by a stored trace header, if it can be read (best effort:
    a corrupted header must not stop a new trace from replacing it)."""
    if not isinstance(head, str | bytes):
        return None
    try:
        workflow_id = json.loads(head).get("workflow_id")
    except (ValueError, AttributeError):
        return None
    return workflow_id if isinstance(workflow_id, str) else None


def _text(raw: object) -> str:
    return raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)


def _glob_escape(text: str) -> str:
    """``text`` with the glob characters of a Redis pattern escaped."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def _field_name(raw: bytes | str, *, workflow_id: str, run_id: str) -> str:
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode()
    except UnicodeDecodeError as exc:
        raise SnapshotCorruptedError(
            f"Stored step results of run {run_id!r} of workflow {workflow_id!r} are "
            f"corrupted: a step path is not UTF-8 ({raw!r})",
            workflow_id=workflow_id, run_id=run_id) from exc
