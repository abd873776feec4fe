"""One resolution of ``storage=`` for runs, memory and the command line
(``procflow.storage.locate``): explicit → ``PROCFLOW_DB`` → the project's
``.procflow/procflow.db`` walking up → the fallback (in memory for runs,
``.procflow/memory.db`` for memory, a new project database for ``procflow run``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from procflow import create_step, create_workflow
from procflow.memory import Memory, SQLiteMemoryStore
from procflow.storage import InMemoryStorage, SQLiteStorage, locate
from procflow.studio.cli import main

FLOW = '''
from procflow import create_step, create_workflow

wf = create_workflow(id="located").then(
    create_step(id="double", execute=lambda ctx: ctx.input_data * 2)).commit()
'''


@pytest.fixture(autouse=True)
def _fresh_lookup(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test looks its storage up anew and opens its own."""
    monkeypatch.delenv(locate.DB_ENV, raising=False)
    monkeypatch.setattr(locate, "_lookup", None)
    monkeypatch.setattr(locate, "_opened", {})
    monkeypatch.setattr(locate, "_default", None)
    yield


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with a database, ``PROCFLOW_DB`` naming another file, and the working
    directory two levels below the project's root."""
    (tmp_path / ".procflow").mkdir()
    (tmp_path / locate.PROJECT_DB).touch()
    (tmp_path / "flow.py").write_text(FLOW)
    deeper = tmp_path / "src" / "app"
    deeper.mkdir(parents=True)
    monkeypatch.chdir(deeper)
    return tmp_path


async def _run_ids(path: Path) -> list[str]:
    async with SQLiteStorage(path) as storage:
        return [run.run_id for run in await storage.list_runs()]


async def _has_thread(path: Path, thread_id: str) -> bool:
    async with SQLiteMemoryStore(path) as store:
        return await store.get_thread(thread_id) is not None


async def _run_in_python() -> str:
    wf = create_workflow(id="located").then(
        create_step(id="double", execute=lambda ctx: ctx.input_data * 2)).commit()
    run = wf.create_run()
    assert (await run.start(input_data=2)).result == 4
    return run.run_id


async def _remember(thread_id: str) -> None:
    async with Memory() as memory:
        await memory.create_thread(thread_id=thread_id)


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out + err


# -- rung 1: explicit ---------------------------------------------------------------


async def test_explicit_storage_wins_for_runs_and_memory(
        project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(locate.DB_ENV, str(tmp_path / "env.db"))
    chosen = tmp_path / "chosen.db"
    async with SQLiteStorage(chosen) as storage:
        locate.set_default_storage(storage)
        run_id = await _run_in_python()
        await _remember("t-default")
        locate.set_default_storage(None)
        async with Memory(storage=storage) as memory:
            await memory.create_thread(thread_id="t-given")
    assert await _run_ids(chosen) == [run_id]
    assert await _has_thread(chosen, "t-default")
    assert await _has_thread(chosen, "t-given")
    assert not (tmp_path / "env.db").exists()


def test_db_option_wins_for_the_cli(project: Path, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(locate.DB_ENV, str(tmp_path / "env.db"))
    chosen = str(tmp_path / "chosen.db")
    assert _cli(capsys, "run", str(project / "flow.py:wf"), "--input", "2",
                "--db", chosen)[0] == 0
    code, listed = _cli(capsys, "runs", "--db", chosen)
    assert code == 0 and "located" in listed
    assert not (tmp_path / "env.db").exists()


# -- rung 2: PROCFLOW_DB ------------------------------------------------------------


async def test_procflow_db_is_used_by_runs_and_memory(
        project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = tmp_path / "env.db"
    monkeypatch.setenv(locate.DB_ENV, str(env))
    run_id = await _run_in_python()
    await _remember("t-env")
    assert await _run_ids(env) == [run_id]
    assert await _has_thread(env, "t-env")
    assert await _run_ids(project / locate.PROJECT_DB) == []  # rung 3 not reached


def test_procflow_db_is_used_by_the_cli(project: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    env = tmp_path / "env.db"
    monkeypatch.setenv(locate.DB_ENV, str(env))
    assert _cli(capsys, "run", str(project / "flow.py:wf"), "--input", "2")[0] == 0
    monkeypatch.delenv(locate.DB_ENV)
    assert "located" not in _cli(capsys, "runs")[1]  # not in the project's database
    monkeypatch.setenv(locate.DB_ENV, str(env))
    code, listed = _cli(capsys, "runs")
    assert code == 0 and "located" in listed


# -- rung 3: the project's database, walking up -------------------------------------


async def test_the_project_database_is_found_walking_up(project: Path) -> None:
    run_id = await _run_in_python()
    await _remember("t-project")
    assert await _run_ids(project / locate.PROJECT_DB) == [run_id]
    assert await _has_thread(project / locate.PROJECT_DB, "t-project")
    assert not (project / "src" / "app" / ".procflow").exists()  # none made here


def test_the_cli_finds_the_project_database_walking_up(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli(capsys, "run", str(project / "flow.py:wf"), "--input", "2")[0] == 0
    code, listed = _cli(capsys, "runs")
    assert code == 0 and "located" in listed
    assert not Path(".procflow").exists()


async def test_memory_kept_beside_the_project_database_stays_there(project: Path) -> None:
    kept = project / locate.MEMORY_DB
    async with Memory(storage=kept) as before:  # what Memory() wrote before
        await before.create_thread(thread_id="t-old")
    async with Memory() as memory:
        assert await memory.get_thread("t-old") is not None
        assert isinstance(memory.storage, SQLiteMemoryStore)
        assert memory.storage.path == kept


# -- rung 4: nothing found ------------------------------------------------------------


async def test_with_nothing_found_runs_stay_in_memory_and_memory_in_a_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    wf = create_workflow(id="located").then(create_step(id="one", execute=lambda ctx: 1))
    run = wf.commit().create_run()
    assert isinstance(run.storage, InMemoryStorage)
    assert not (tmp_path / ".procflow").exists()

    await _remember("t-fallback")
    assert await _has_thread(tmp_path / locate.MEMORY_DB, "t-fallback")
    assert not (tmp_path / locate.PROJECT_DB).exists()


def test_with_nothing_found_the_cli_run_creates_the_project_database(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "flow.py").write_text(FLOW)
    code, said = _cli(capsys, "runs")
    assert code == 0 and "no runs stored yet" in said
    assert not (tmp_path / ".procflow").exists()  # a read-only command creates nothing

    assert _cli(capsys, "run", "flow.py:wf", "--input", "2")[0] == 0
    assert (tmp_path / locate.PROJECT_DB).is_file()
    code, listed = _cli(capsys, "runs")
    assert code == 0 and "located" in listed


async def test_procflow_db_names_a_postgres_database_for_runs_and_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, postgres_dsn: str,
        postgres_schema: str) -> None:
    from psycopg.conninfo import conninfo_to_dict

    from procflow.memory import PostgresMemoryStore
    from procflow.storage import PostgresStorage

    info = conninfo_to_dict(postgres_dsn)
    monkeypatch.setenv(locate.DB_ENV, f"postgresql://{info.get('user', 'postgres')}@"
                       f"{info.get('host', '127.0.0.1')}:{info.get('port', 5432)}/"
                       f"{info['dbname']}?schema={postgres_schema}")
    monkeypatch.chdir(tmp_path)
    try:
        run_id = await _run_in_python()
        async with Memory() as memory:
            assert isinstance(memory.storage, PostgresMemoryStore)
            await memory.create_thread(thread_id="t-pg")
    finally:
        for opened in locate._opened.values():
            await opened.aclose()
    async with PostgresStorage(postgres_dsn, schema=postgres_schema) as storage, \
            PostgresMemoryStore(storage) as store:
        assert [run.run_id for run in await storage.list_runs()] == [run_id]
        assert await store.get_thread("t-pg") is not None
    assert not (tmp_path / ".procflow").exists()
