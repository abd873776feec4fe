"""Distributed fan-out jobs on one worker, in process: ``WorkerApp.job`` called directly
(as Dramatiq would deliver it) on a real Redis server, the messages it sends read back
from the broker's queues.

A job never writes its run's header and loads only what it reads; its result is stored
with the join in one script; a job stored finished is never run again, even when it is
delivered again before its worker could send the run on.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import anyio
import pytest
import redis.asyncio as aioredis
from pydantic import BaseModel

pytest.importorskip("dramatiq")

from procflow import create_step, create_workflow
from procflow.records import StepResult
from procflow.runtime.distributed import Job
from procflow.runtime.step_context import StepContext
from procflow.storage.codec import BLOB_SIZE
from procflow.workers import WorkerSettings
from procflow.workers.app import WorkerApp
from procflow.workflows.workflow import Workflow

pytestmark = [pytest.mark.redis, pytest.mark.timeout(60)]

BIG = BLOB_SIZE + 1


class Recorder:
    """A ``Distributor`` keeping the jobs a parked run sends (the test delivers them)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int, list[Job]]] = []

    async def dispatch(self, workflow_id: str, run_id: str, join: str, jobs: Sequence[Job],
                       total: int) -> None:
        self.sent.append((join, total, list(jobs)))


class Order(BaseModel):
    name: str
    items: list[int]


class Flows:
    """The test's workflows and what their steps ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.hold = True

        async def base(ctx: StepContext) -> list[str]:
            return ["a", "b" * BIG, "c"]  # a large value: stored as a blob

        async def item(ctx: StepContext) -> dict[str, Any]:
            self.ran.append(f"item:{ctx.input_data[:1]}")
            return {"item": ctx.input_data[:1], "size": len(ctx.input_data),
                    "base": len(ctx.get_step_result("base") or []),
                    "init": len(ctx.get_init_data())}

        self.fan: Workflow = (create_workflow(id="jobs-fan")
                              .then(create_step(id="base", execute=base))
                              .foreach(create_step(id="item", execute=item), distribute=True)
                              .commit())
        outer = (create_workflow(id="outer").then(create_step(id="base", execute=base))
                 .foreach(create_step(id="item", execute=item), distribute=True).commit())
        async def tagged(ctx: StepContext) -> str:
            order = ctx.get_init_data()
            assert isinstance(order, Order)  # the stored input, checked again
            return f"{order.name}:{ctx.input_data}"

        self.typed: Workflow = (create_workflow(id="jobs-typed", input_schema=Order)
                                .map(lambda ctx: ctx.input_data.items)
                                .foreach(create_step(id="tag", execute=tagged),
                                         distribute=True).commit())
        self.deep: Workflow = (create_workflow(id="jobs-deep")
                               .then(create_step(id="base", execute=base))
                               .then(create_step(id="pass", execute=lambda ctx: "init"))
                               .then(outer).commit())

        async def first(ctx: StepContext) -> int:
            self.ran.append(f"first:{ctx.input_data}")
            return int(ctx.input_data) + 1

        async def second(ctx: StepContext) -> int:
            self.ran.append(f"second:{ctx.input_data}")
            if ctx.input_data == 2 and self.hold:  # item 1: waits until cancelled
                await anyio.sleep(30)
            return int(ctx.input_data) * 10

        inner = (create_workflow(id="inner").then(create_step(id="first", execute=first))
                 .then(create_step(id="second", execute=second)).commit())
        self.nested: Workflow = create_workflow(id="jobs-nested").foreach(
            inner, distribute=True).commit()


@pytest.fixture
def flows() -> Flows:
    return Flows()


class EagerWorker(WorkerApp):
    """A worker whose sent jobs run at once, before the run that sent them is parked
    (as when other workers are quicker than this one's end of the execution)."""

    async def dispatch(self, workflow_id: str, run_id: str, join: str, jobs: Sequence[Job],
                       total: int) -> None:
        await super().dispatch(workflow_id, run_id, join, jobs, total)
        for job in jobs:
            await self.job(workflow_id, run_id, join, total, job.unit_path, job.path,
                           job.data, list(job.reads))


@pytest.fixture(params=[WorkerApp])
async def app(request: pytest.FixtureRequest, flows: Flows, redis_url: str,
              redis_prefix: str) -> AsyncIterator[WorkerApp]:
    settings = WorkerSettings(redis_url=redis_url, prefix=redis_prefix,
                              namespace=f"{redis_prefix}:dramatiq", lease_ttl=3)
    worker = request.param([flows.fan, flows.nested, flows.deep, flows.typed], settings)
    try:
        yield worker
    finally:
        await worker.storage.aclose()
        if worker._redis is not None:  # made by runs (cancel flags, settled notices)
            await worker._redis.aclose()
        worker.broker.close()
        if worker._listener is not None:
            worker._listener.close()


async def _parked(app: WorkerApp, wf: Workflow, input_data: Any,
                  ) -> tuple[str, str, int, list[Job]]:
    """Submit a run and execute it up to its fan-out: (run id, join, total, jobs)."""
    recorder = Recorder()
    run = wf.create_run(storage=app.storage)
    await run.prepare(input_data)
    run.distributor = recorder
    parked = await run.run_submitted()
    assert parked.status == "running"
    ((join, total, jobs),) = recorder.sent
    return run.run_id, join, total, jobs


async def _deliver(app: WorkerApp, wf: Workflow, run_id: str, join: str, total: int,
                   job: Job) -> None:
    await app.job(wf.id, run_id, join, total, job.unit_path, job.path, job.data,
                  list(job.reads))


async def _sent(raw: aioredis.Redis, app: WorkerApp, *, delayed: bool = False,
                ) -> list[tuple[str, list[Any]]]:
    """The messages waiting in the worker's queue (or its delay queue): (actor, args)."""
    queue = app.settings.queue + (".DQ" if delayed else "")
    stored = await raw.hgetall(f"{app.settings.namespace}:{queue}.msgs")
    messages = [json.loads(text) for text in stored.values()]
    return [(m["actor_name"], m["args"]) for m in messages]


async def _continue(app: WorkerApp, wf: Workflow, run_id: str) -> Any:
    run = wf.create_run(run_id, storage=app.storage)
    run.distributor = Recorder()
    return await run.run_submitted()


async def test_jobs_write_only_their_rows_read_earlier_results_and_join_in_order(
        app: WorkerApp, flows: Flows, raw: aioredis.Redis) -> None:
    run_id, join, total, jobs = await _parked(app, flows.fan, "i" * BIG)
    header_key = f"{app.settings.prefix}:run:jobs-fan:{run_id}"
    header = await raw.get(header_key)

    for job in reversed(jobs):  # out of order
        assert await _sent(raw, app) == []  # the run is sent on by the last job only
        await _deliver(app, flows.fan, run_id, join, total, job)

    assert await raw.get(header_key) == header  # no job wrote the run's header
    assert jobs[0].reads == ("base",)
    assert await _sent(raw, app) == [("procflow_run", ["jobs-fan", run_id])]
    result = await _continue(app, flows.fan, run_id)
    assert result.status == "success"
    assert result.result == [{"item": c, "size": n, "base": 3, "init": BIG}
                             for c, n in (("a", 1), ("b", BIG), ("c", 1))]
    assert sorted(flows.ran) == ["item:a", "item:b", "item:c"]


async def test_a_job_inside_a_nested_workflow_reads_the_results_of_its_own_scope(
        app: WorkerApp, flows: Flows, raw: aioredis.Redis) -> None:
    run_id, join, total, jobs = await _parked(app, flows.deep, "init")
    assert (join, total) == ("outer.item", 3)
    assert {job.reads for job in jobs} == {("outer.base",)}

    for job in jobs:
        await _deliver(app, flows.deep, run_id, join, total, job)

    result = await _continue(app, flows.deep, run_id)
    assert result.status == "success"
    assert [r["base"] for r in result.result] == [3, 3, 3]
    assert [r["init"] for r in result.result] == [4, 4, 4]  # len("init")


async def test_a_job_asking_for_the_runs_input_gets_it_checked_by_the_input_schema(
        app: WorkerApp, flows: Flows) -> None:
    run_id, join, total, jobs = await _parked(app, flows.typed, {"name": "o1", "items": [4, 5]})
    for job in jobs:
        await _deliver(app, flows.typed, run_id, join, total, job)

    result = await _continue(app, flows.typed, run_id)
    assert (result.status, result.result) == ("success", ["o1:4", "o1:5"])


async def test_a_job_delivered_again_after_its_result_was_stored_is_not_run_again(
        app: WorkerApp, flows: Flows, raw: aioredis.Redis) -> None:
    run_id, join, total, jobs = await _parked(app, flows.fan, "init")
    for job in jobs[:-1]:
        await _deliver(app, flows.fan, run_id, join, total, job)
    # The last job's worker stores its result, then is lost before it sends the run on.
    last = jobs[-1]
    run = flows.fan.create_run(run_id, storage=app.storage)
    claim = await app.storage.claim_job("jobs-fan", run_id, last.path, owner="lost",
                                        ttl=3, parked_owner="parked:item",
                                        reads=last.reads)
    assert claim is not None and claim.snapshot is not None and claim.load_input is not None

    async def save(rows: Mapping[str, StepResult]) -> None:
        # a step job has no inner rows: only its "running" mark is written ahead
        assert {path: r.status for path, r in rows.items()} == {last.path: "running"}

    rows = await run.run_claimed_job(last, claim.snapshot, claim.steps, save, claim.load_input)
    assert await app.storage.finish_job("jobs-fan", run_id, last.path, join=join,
                                        owner="lost", steps=rows) == total
    assert await _sent(raw, app) == []
    ran = list(flows.ran)

    await _deliver(app, flows.fan, run_id, join, total, last)  # Dramatiq delivers it again
    await _deliver(app, flows.fan, run_id, join, total, jobs[0])  # and a finished one

    assert flows.ran == ran  # neither ran again
    assert await _sent(raw, app) == [("procflow_run", ["jobs-fan", run_id])] * 2
    result = await _continue(app, flows.fan, run_id)
    assert [r["item"] for r in result.result] == ["a", "b", "c"]


async def test_a_job_leased_by_a_live_worker_is_sent_again_later_and_a_dead_ones_taken_over(
        app: WorkerApp, flows: Flows, raw: aioredis.Redis) -> None:
    run_id, join, total, jobs = await _parked(app, flows.fan, "init")
    alive = f"{socket.gethostname()}:{os.getpid()}:other"
    claim = await app.storage.claim_job("jobs-fan", run_id, jobs[0].path, owner=alive,
                                        ttl=30, parked_owner="parked:item")
    assert claim is not None and claim.holder is None

    await _deliver(app, flows.fan, run_id, join, total, jobs[0])

    assert flows.ran == []
    assert [actor for actor, _ in await _sent(raw, app, delayed=True)] == ["procflow_job"]

    async with await anyio.open_process([sys.executable, "-c", "pass"]) as gone:
        await gone.wait()  # reaped: its pid names no live process
    dead = f"{socket.gethostname()}:{gone.pid}:lost"
    claim = await app.storage.claim_job("jobs-fan", run_id, jobs[1].path, owner=dead,
                                        ttl=30, parked_owner="parked:item")
    assert claim is not None and claim.holder is None

    await _deliver(app, flows.fan, run_id, join, total, jobs[1])

    assert flows.ran == ["item:b"]


async def test_a_job_whose_lease_was_taken_stores_nothing(app: WorkerApp, flows: Flows,
                                                          raw: aioredis.Redis) -> None:
    run_id, join, _, jobs = await _parked(app, flows.fan, "init")
    storage = app.storage
    claim = await storage.claim_job("jobs-fan", run_id, jobs[0].path, owner="slow", ttl=3,
                                    parked_owner="parked:item")
    assert claim is not None and claim.holder is None
    # The slow owner's lease expired and another owner took the job.
    await raw.set(f"{app.settings.prefix}:lease:jobs-fan:{run_id}#{jobs[0].path}", "new")

    done = StepResult("success", "late")
    assert await storage.finish_job("jobs-fan", run_id, jobs[0].path, join=join,
                                    owner="slow", steps={jobs[0].path: done}) == -1
    assert not await storage.renew_job("jobs-fan", run_id, jobs[0].path, owner="slow",
                                       ttl=3, parked_owner="parked:item")
    assert await raw.hget(f"{app.settings.prefix}:steps:jobs-fan:{run_id}",
                          jobs[0].path) is None
    assert await raw.scard(f"{app.settings.prefix}:join:jobs-fan:{run_id}:{join}") == 0


async def test_a_claim_renews_the_parked_runs_lease_but_not_a_live_executions(
        app: WorkerApp, flows: Flows, raw: aioredis.Redis) -> None:
    run_id, join, _, jobs = await _parked(app, flows.fan, "init")
    lease = f"{app.settings.prefix}:lease:jobs-fan:{run_id}"
    assert await raw.get(lease) == f"parked:{join}"
    await raw.pexpire(lease, 100)

    await app.storage.claim_job("jobs-fan", run_id, jobs[0].path, owner="w1", ttl=3,
                                parked_owner=f"parked:{join}")
    assert await raw.pttl(lease) > 1000  # renewed for the job's ttl

    await raw.set(lease, "continuing-worker", px=100_000)  # the run continues elsewhere
    await app.storage.claim_job("jobs-fan", run_id, jobs[1].path, owner="w2", ttl=3,
                                parked_owner=f"parked:{join}")
    assert await raw.get(lease) == "continuing-worker"


async def test_a_nested_job_cancelled_midway_resumes_without_rerunning_its_finished_steps(
        app: WorkerApp, flows: Flows, raw: aioredis.Redis) -> None:
    run_id, join, total, jobs = await _parked(app, flows.nested, [0, 1, 2])
    await _deliver(app, flows.nested, run_id, join, total, jobs[0])
    with anyio.move_on_after(1):  # the worker stops while item 1's second step runs
        await _deliver(app, flows.nested, run_id, join, total, jobs[1])
    stored = await raw.hkeys(f"{app.settings.prefix}:steps:jobs-nested:{run_id}")
    assert "inner[1].first" in stored and "inner[1]" not in stored
    assert await raw.get(f"{app.settings.prefix}:lease:jobs-nested:{run_id}#inner[1]") is None

    flows.ran.remove("second:2")
    flows.hold = False
    await _deliver(app, flows.nested, run_id, join, total, jobs[2])
    await _deliver(app, flows.nested, run_id, join, total, jobs[1])

    assert sorted(flows.ran) == sorted(["first:0", "second:1", "first:1", "first:2",
                                        "second:3", "second:2"])
    result = await _continue(app, flows.nested, run_id)
    assert (result.status, result.result) == ("success", [10, 20, 30])


async def test_a_batch_of_messages_is_sent_whole_and_wakes_as_many_consumers(
        app: WorkerApp, raw: aioredis.Redis) -> None:
    from procflow.workers.broker import enqueue, job_message
    from procflow.workers.waking import wake_key

    messages = [job_message(app.settings, "jobs-fan", "r1", "item", 300, "item",
                            f"item[{i}]", i) for i in range(300)]
    await enqueue(app.broker, messages)

    sent = await _sent(raw, app)
    assert sorted(args[5] for _, args in sent) == sorted(f"item[{i}]" for i in range(300))
    # A token per message, at most 256: enough to wake every idle consumer.
    assert await raw.llen(wake_key(app.settings.namespace, app.settings.queue)) == 256


@pytest.mark.parametrize("app", [EagerWorker], indirect=True)
async def test_a_run_whose_jobs_finished_before_it_was_parked_continues_at_once(
        app: WorkerApp, flows: Flows, raw: aioredis.Redis) -> None:
    run = flows.fan.create_run(storage=app.storage)
    await run.prepare("init")

    await app.run("jobs-fan", run.run_id)  # parks, its jobs finish, it continues

    stored = await flows.fan.get_run(run.run_id, storage=app.storage)
    assert stored.status == "success"
    assert [r["item"] for r in stored.last_result.result] == ["a", "b", "c"]
    # The last job's message to send the run on came while the run still held its
    # lease; delivered now, it finds the run settled and runs nothing again.
    assert [args for actor, args in await _sent(raw, app) if actor == "procflow_run"] == [
        ["jobs-fan", run.run_id]]
    await app.run("jobs-fan", run.run_id)
    assert sorted(flows.ran) == ["item:a", "item:b", "item:c"]


async def test_a_run_delivered_while_a_live_worker_holds_it_is_sent_again_later(
        app: WorkerApp, flows: Flows, raw: aioredis.Redis) -> None:
    run = flows.fan.create_run(storage=app.storage)
    await run.prepare("init")
    holder = f"{socket.gethostname()}:{os.getpid()}:other"
    assert await app.storage.acquire_lease("jobs-fan", run.run_id, owner=holder, ttl=30)

    await app.run("jobs-fan", run.run_id)  # returns: no error for Dramatiq to retry

    assert flows.ran == []
    assert await _sent(raw, app, delayed=True) == [("procflow_run", ["jobs-fan", run.run_id])]


async def test_closing_the_broker_closes_its_redis_connections(
        app: WorkerApp, raw: aioredis.Redis) -> None:
    """Dramatiq's ``RedisBroker.close`` leaves its connections open (redis-py 8.2 then
    reports unclosed sockets when they are collected); ``WakingRedisBroker`` closes
    them."""
    from procflow.workers.broker import make_broker

    broker = make_broker(app.settings)
    client_id = await anyio.to_thread.run_sync(broker.client.client_id)
    assert f"id={client_id} " in await raw.execute_command("CLIENT", "LIST", "ID", client_id)
    await anyio.to_thread.run_sync(broker.close)
    for _ in range(50):  # the server drops the client once it reads the close
        if not await raw.execute_command("CLIENT", "LIST", "ID", client_id):
            break
        await anyio.sleep(0.02)
    assert not await raw.execute_command("CLIENT", "LIST", "ID", client_id)


async def test_a_job_run_again_after_its_worker_was_lost_is_noted_in_the_trace(
        app: WorkerApp, flows: Flows) -> None:
    run_id, join, total, jobs = await _parked(app, flows.fan, "init")
    # A worker claims the first job, marks it running (as every job is marked before
    # its step runs) and is lost: its lease ends, its mark stays.
    first = jobs[0]
    claim = await app.storage.claim_job("jobs-fan", run_id, first.path, owner="lost",
                                        ttl=3, parked_owner="parked:item",
                                        reads=first.reads)
    assert claim is not None and not claim.done
    await app.storage.save_steps("jobs-fan", run_id, {
        first.path: StepResult("running", started_at=1.0, attempts=1)})
    await app.storage.release_job("jobs-fan", run_id, first.path, owner="lost")

    for job in jobs:  # delivered again (the first) and for the first time (the others)
        await _deliver(app, flows.fan, run_id, join, total, job)
    result = await _continue(app, flows.fan, run_id)
    trace = await app.storage.load_trace(run_id)

    assert result.status == "success"
    assert trace is not None
    notes = {span["path"]: span["attributes"] for span in trace.spans
             if (span.get("attributes") or {}).get("note")}
    assert notes == {first.path: {"attempt": 2, "note": "attempt 2 after worker loss"}}
    assert result.steps[first.path].lost == 1 and result.steps[first.path].attempts == 2
