"""PostgresStorage specifics: schema versions, several processes, claims, damaged rows."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import AsyncIterator
from functools import partial

import anyio
import psycopg
import pytest

from procflow._backends.postgres import SCHEMA_VERSION
from procflow.errors import SnapshotCorruptedError, StorageError
from procflow.runtime.results import RunSnapshot, StepResult
from procflow.storage import PostgresStorage
from procflow.storage.codec import dump_snapshot

pytestmark = pytest.mark.postgres


@pytest.fixture
async def storage(postgres_dsn: str, postgres_schema: str) -> AsyncIterator[PostgresStorage]:
    async with PostgresStorage(postgres_dsn, schema=postgres_schema) as instance:
        yield instance


def header(run_id: str = "run-1", status: str = "suspended") -> RunSnapshot:
    return RunSnapshot(workflow_id="wf", run_id=run_id, status=status,  # type: ignore[arg-type]
                       updated_at=1.0)


def raw(dsn: str, schema: str, sql: str, *params: object) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn, autocommit=True,
                         options=f"-c search_path={schema}") as connection:
        cursor = connection.execute(sql, params)  # type: ignore[arg-type]
        return cursor.fetchall() if cursor.description else []


# The tables as the first release created them, by hand, before the version table existed.
_V0 = (
    """CREATE TABLE procflow_runs (workflow_id TEXT NOT NULL, run_id TEXT NOT NULL,
        status TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL, seq BIGINT GENERATED ALWAYS AS IDENTITY,
        snapshot TEXT NOT NULL, PRIMARY KEY (workflow_id, run_id))""",
    """CREATE TABLE procflow_steps (workflow_id TEXT NOT NULL, run_id TEXT NOT NULL,
        path TEXT NOT NULL, result TEXT NOT NULL, PRIMARY KEY (workflow_id, run_id, path))""",
)
_V0_RUN = """INSERT INTO procflow_runs (workflow_id, run_id, status, created_at, updated_at,
    snapshot) VALUES ('wf', 'old', 'success', 1, 0.5, %s)"""


async def test_an_unversioned_schema_is_upgraded_in_place(postgres_dsn: str,
                                                          postgres_schema: str) -> None:
    raw(postgres_dsn, "public", f'CREATE SCHEMA "{postgres_schema}"')
    for statement in _V0:
        raw(postgres_dsn, postgres_schema, statement)
    raw(postgres_dsn, postgres_schema, _V0_RUN,
        dump_snapshot(RunSnapshot(workflow_id="wf", run_id="old", status="success",
                                  created_at=1.0, updated_at=0.5)))

    async with PostgresStorage(postgres_dsn, schema=postgres_schema) as storage:
        old = await storage.load_snapshot("wf", "old")
        await storage.save_snapshot(header("new"), {"s": StepResult(status="success")})
        runs = [run.run_id for run in await storage.list_runs()]

    assert old is not None and old[0].status == "success"
    assert runs == ["new", "old"]
    assert raw(postgres_dsn, postgres_schema,
               "SELECT version FROM procflow_schema") == [(SCHEMA_VERSION,)]
    assert raw(postgres_dsn, postgres_schema,
               "SELECT to_regclass('procflow_embeddings') IS NOT NULL") == [(True,)]


async def test_a_newer_schema_is_refused(postgres_dsn: str, postgres_schema: str) -> None:
    async with PostgresStorage(postgres_dsn, schema=postgres_schema) as storage:
        await storage.save_snapshot(header(), {})
    raw(postgres_dsn, postgres_schema, "UPDATE procflow_schema SET version = 99")

    async with PostgresStorage(postgres_dsn, schema=postgres_schema) as storage:
        with pytest.raises(StorageError, match=r"schema version 99, newer .*upgrade procflow"):
            await storage.load_snapshot("wf", "run-1")


async def test_concurrent_claims_let_exactly_one_win(storage: PostgresStorage) -> None:
    await storage.save_snapshot(header(), {})
    wins: list[bool] = []

    async def claim() -> None:
        wins.append(await storage.claim_run("wf", "run-1", expected="suspended",
                                            new="running"))

    async with anyio.create_task_group() as group:
        for _ in range(10):
            group.start_soon(claim)

    assert sorted(wins) == [False] * 9 + [True]
    loaded = await storage.load_snapshot("wf", "run-1")
    assert loaded is not None and loaded[0].status == "running"


async def test_corrupted_header_raises_and_is_kept(storage: PostgresStorage,
                                                   postgres_dsn: str,
                                                   postgres_schema: str) -> None:
    await storage.save_snapshot(header(), {})
    raw(postgres_dsn, postgres_schema, "UPDATE procflow_runs SET snapshot = '{garbage'")

    with pytest.raises(SnapshotCorruptedError, match="run 'run-1' of workflow 'wf'"):
        await storage.load_snapshot("wf", "run-1")
    with pytest.raises(SnapshotCorruptedError):
        await storage.claim_run("wf", "run-1", expected="suspended", new="running")
    assert raw(postgres_dsn, postgres_schema,
               "SELECT snapshot FROM procflow_runs") == [("{garbage",)]


async def test_an_unreachable_server_is_a_storage_error_without_the_password() -> None:
    storage = PostgresStorage("postgresql://app:s3cret@127.0.0.1:1/none?connect_timeout=1")
    with pytest.raises(StorageError, match=r"127\.0\.0\.1:1") as caught:
        await storage.list_runs()
    assert "s3cret" not in str(caught.value)
    # the connection's own reason, not the pool's "initialization incomplete after 10 sec"
    assert "refused" in str(caught.value).lower()
    await storage.aclose()


async def test_a_refused_login_names_the_servers_reason(postgres_dsn: str) -> None:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(postgres_dsn)
    params["user"] = "procflow_no_such_role"
    storage = PostgresStorage(make_conninfo(**params))
    with pytest.raises(StorageError, match='role "procflow_no_such_role" does not exist'):
        await storage.list_runs()
    await storage.aclose()


async def test_a_closed_storage_raises(postgres_dsn: str, postgres_schema: str) -> None:
    storage = PostgresStorage(postgres_dsn, schema=postgres_schema)
    await storage.list_runs()
    await storage.aclose()
    with pytest.raises(StorageError, match="closed"):
        await storage.list_runs()


def test_a_bad_schema_name_is_refused() -> None:
    with pytest.raises(ValueError, match="schema"):
        PostgresStorage("postgresql://127.0.0.1/x", schema="a; DROP TABLE x")


_WRITER = textwrap.dedent("""
    import sys, anyio
    from procflow.runtime.results import RunSnapshot, StepResult
    from procflow.storage import PostgresStorage

    async def main(dsn, schema, name):
        async with PostgresStorage(dsn, schema=schema) as storage:
            for i in range(50):
                step = {f"{name}-{i}": StepResult(status="success", output=i)}
                await storage.save_snapshot(
                    RunSnapshot(workflow_id="wf", run_id=f"{name}-{i}", status="success",
                                updated_at=float(i)), step)
                await storage.save_snapshot(
                    RunSnapshot(workflow_id="wf", run_id="shared", status="running"), step)

    anyio.run(main, *sys.argv[1:4])
""")


async def test_writers_in_two_processes_all_land(postgres_dsn: str,
                                                 postgres_schema: str) -> None:
    with anyio.fail_after(50):
        async with anyio.create_task_group() as group:
            for name in ("p1", "p2"):
                group.start_soon(partial(anyio.run_process, stdout=None, stderr=None),
                                 [sys.executable, "-c", _WRITER, postgres_dsn,
                                  postgres_schema, name])

    async with PostgresStorage(postgres_dsn, schema=postgres_schema) as storage:
        runs = await storage.list_runs()
        shared = await storage.load_snapshot("wf", "shared")

    assert len(runs) == 101
    assert shared is not None and len(shared[1]) == 100


def _url(dsn: str, schema: str) -> str:
    from psycopg.conninfo import conninfo_to_dict

    info = conninfo_to_dict(dsn)
    user = f"{info['user']}@" if info.get("user") else ""
    port = f":{info['port']}" if info.get("port") else ""
    return (f"postgresql://{user}{info.get('host', '127.0.0.1')}{port}/{info['dbname']}"
            f"?schema={schema}")


async def test_the_command_line_reads_and_prunes_a_postgres_store(
        storage: PostgresStorage, postgres_dsn: str, postgres_schema: str) -> None:
    from procflow import create_step, create_workflow

    wf = create_workflow(id="pg-wf").then(create_step(id="s", execute=lambda ctx: 42)).commit()
    done = await wf.create_run("pg-1", storage=storage).start()
    assert done.status == "success"
    url = _url(postgres_dsn, postgres_schema)

    async def procflow(*args: str) -> tuple[int, str, str]:
        result = await anyio.run_process([sys.executable, "-m", "procflow", "--db", url, *args],
                                         check=False)
        return result.returncode, result.stdout.decode(), result.stderr.decode()

    code, out, _ = await procflow("runs")
    assert code == 0 and out.startswith("pg-1\tpg-wf\tsuccess\t")
    code, out, _ = await procflow("trace", "pg-1")
    assert code == 0 and "run: pg-wf" in out
    code, out, err = await procflow("prune", "--older-than", "0")
    assert code == 0 and out.startswith("pg-1\tpg-wf\tsuccess")
    assert f"?schema={postgres_schema} (success 1)" in err
    assert await storage.load_snapshot("pg-wf", "pg-1") is None
    code, _, err = await procflow("runs", "--db", url.replace(f"schema={postgres_schema}",
                                                              "schema="))
    assert code == 2 and "one non-empty schema= parameter" in err


async def test_read_commands_create_no_tables_in_a_new_schema(
        postgres_dsn: str, postgres_schema: str) -> None:
    import psycopg

    url = _url(postgres_dsn, postgres_schema)
    for command in (["runs"], ["trace", "abc12345"], ["prune", "--older-than", "1d"]):
        result = await anyio.run_process([sys.executable, "-m", "procflow", *command,
                                          "--db", url], check=False)
        err = result.stderr.decode()
        assert result.returncode == 1, (command, err)
        assert f"no procflow tables in schema {postgres_schema!r}" in err, (command, err)
    with psycopg.connect(postgres_dsn, autocommit=True) as connection:
        found = connection.execute("SELECT count(*) FROM information_schema.schemata "
                                   "WHERE schema_name = %s", (postgres_schema,)).fetchone()
    assert found == (0,)  # not even the schema
    # a storage that may create them (the default) does, as before, and the commands
    # then read the empty store
    async with PostgresStorage(postgres_dsn, schema=postgres_schema) as storage:
        assert await storage.list_runs() == []
    result = await anyio.run_process([sys.executable, "-m", "procflow", "runs", "--db", url],
                                     check=False)
    assert result.returncode == 0, result.stderr.decode()


def test_storage_for_takes_the_schema_off_the_url() -> None:
    from procflow.storage.locate import storage_for

    made = storage_for("postgresql://app@db:5433/app?sslmode=disable&schema=tenant_a")
    assert isinstance(made, PostgresStorage)
    assert made.pool.schema == "tenant_a"
    assert made.pool.dsn == "postgresql://app@db:5433/app?sslmode=disable"
    assert isinstance(storage_for("postgres://app@db/app"), PostgresStorage)
    with pytest.raises(ValueError, match="one non-empty schema="):
        storage_for("postgresql://db/app?schema=a&schema=b")
