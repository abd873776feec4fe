"""Where runs, traces and memory are kept: one resolution of ``storage=`` and ``--db``.

Runs, ``Memory`` (and the memory processors) and every ``procflow`` command find their
storage by the same order; the first rung that names one wins:

1. **Explicit.** The ``storage=`` given: to ``create_run``/``get_run``, then the
   workflow's own ``create_workflow(storage=...)``; to ``Memory``; ``--db`` on the
   command line (then, for ``procflow run``, the target workflow's own ``storage=``).
   In Python, the process default set with ``set_default_storage(...)`` comes next (a
   ``procflow run`` sets it to its own store while it runs).
2. **``PROCFLOW_DB``**: a SQLite file path, a ``redis://`` or a ``postgresql://`` URL.
3. **The project's database**: the nearest ``.procflow/procflow.db`` in the working
   directory or one of its parents (like git finds ``.git``). This lookup never
   creates it.
4. **Nothing found**:

   - a run made in Python goes to an in-memory store keeping the last few finished runs
     (``procflow.runtime.defaults.FALLBACK_MAX_RUNS``): nothing is written to disk
     unless asked;
   - ``Memory`` goes to ``.procflow/memory.db`` in the working directory, a SQLite file
     created on first write. Memory is what an agent must still know after a restart,
     so it is kept on disk, where ``Memory()`` has always kept it;
   - ``procflow run`` creates ``.procflow/procflow.db`` in the working directory (which
     rung 3 then finds for every later command, run and ``Memory``); the read-only
     commands (``runs``, ``trace``, ...) create nothing and say where they looked.

Memory kept by ``Memory()`` before it followed this order stays where it is: when rung 3
finds a project whose ``.procflow/`` directory holds a ``memory.db`` beside
``procflow.db``, ``Memory`` keeps using that file (pass ``storage=`` to choose).

A location (rungs 2 and 3) is opened once per process and shared by the runs and the
memory that resolve to it (``located_storage``); the lookup is remembered per working
directory and ``PROCFLOW_DB`` value.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from procflow.storage.base import Storage

__all__ = ["DB_ENV", "MEMORY_DB", "PROJECT_DB", "Location", "configured_location",
           "current_location",
           "find_project_db", "get_default_storage", "located_storage",
           "set_default_storage", "storage_for"]

DB_ENV = "PROCFLOW_DB"
"""The environment variable naming where runs and memory are stored: a path, a
``redis://`` or a ``postgresql://`` URL."""

PROJECT_DB = Path(".procflow") / "procflow.db"
"""The project's database, relative to the project's root directory."""

MEMORY_DB = Path(".procflow") / "memory.db"
"""Where ``Memory`` keeps its data when nothing is configured (rung 4), and the file it
keeps using beside a project's database (see the module docstring)."""

_default: Storage | None = None
_opened: dict[str, Storage] = {}
_lookup: tuple[str | None, str, Location | None] | None = None  # (env, cwd, found)


@dataclass(frozen=True, slots=True)
class Location:
    """A storage named by configuration rather than by code (rungs 2 and 3).

    Attributes:
        where: A SQLite file path, a ``redis://`` or a ``postgresql://`` URL.
        source: ``"PROCFLOW_DB"`` (rung 2) or ``"project"`` (rung 3: the nearest
            ``.procflow/procflow.db``).
    """

    where: str
    source: Literal["PROCFLOW_DB", "project"]


def set_default_storage(storage: Storage | None) -> None:
    """Set the storage runs and memory use when none is given to them.

    Args:
        storage: The storage, or ``None`` to go back to ``PROCFLOW_DB``, the project's
            database or the fallback (see the module docstring).
    """
    global _default
    _default = storage


def get_default_storage() -> Storage | None:
    """The storage set with ``set_default_storage``, if any."""
    return _default


def find_project_db(start: str | os.PathLike[str] | None = None) -> Path | None:
    """The nearest existing ``.procflow/procflow.db`` in ``start`` (default: the current
    directory) or one of its parents, like git finds ``.git``; ``None`` when none exists."""
    here = Path(start if start is not None else os.getcwd()).resolve()
    for directory in (here, *here.parents):
        candidate = directory / PROJECT_DB
        if candidate.is_file():
            return candidate
    return None


def configured_location() -> Location | None:
    """The storage configuration names (rungs 2 and 3): ``PROCFLOW_DB``, else the
    project's database; ``None`` when neither exists."""
    env = os.environ.get(DB_ENV)
    if env:
        return Location(env, "PROCFLOW_DB")
    found = find_project_db()
    return Location(str(found), "project") if found is not None else None


def storage_for(location: str, *, create: bool = True) -> Storage:
    """A storage for a location: ``redis://``/``rediss://`` URLs give a ``RedisStorage``,
    ``postgresql://``/``postgres://`` URLs a ``PostgresStorage`` (its tables in the schema
    a ``schema=`` query parameter names, default ``public``; procflow takes that
    parameter off the URL), anything else a ``SQLiteStorage`` file (created on first
    write, not here). With ``create`` false a ``PostgresStorage`` never creates its tables
    (a read-only command).

    Raises:
        ValueError: A PostgreSQL URL names an empty ``schema=``, or several.
    """
    if location.startswith(("redis://", "rediss://", "unix://")):
        from procflow.storage.redis import RedisStorage

        return RedisStorage(location)
    if location.startswith(("postgresql://", "postgres://")):
        from procflow.storage.postgres import PostgresStorage

        dsn, schema = _postgres_schema(location)
        return PostgresStorage(dsn, schema=schema, create=create)
    from procflow.storage.sqlite import SQLiteStorage

    return SQLiteStorage(location)


def _postgres_schema(url: str) -> tuple[str, str]:
    """The URL without procflow's own ``schema=`` parameter, and that schema."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    named = [value for key, value in query if key == "schema"]
    if len(named) > 1 or (named and not named[0]):
        raise ValueError(f"a PostgreSQL URL takes one non-empty schema= parameter, got "
                         f"{named!r}")
    rest = urlencode([(key, value) for key, value in query if key != "schema"])
    return urlunsplit(parts._replace(query=rest)), named[0] if named else "public"


def current_location() -> Location | None:
    """``configured_location()``, remembered per working directory and ``PROCFLOW_DB``
    value (a run made in a loop does not walk the tree each time)."""
    global _lookup
    env, cwd = os.environ.get(DB_ENV), os.getcwd()
    if _lookup is None or _lookup[0] != env or _lookup[1] != cwd:
        _lookup = (env, cwd, configured_location())
    return _lookup[2]


def located_storage() -> Storage | None:
    """The storage of rungs 1 to 3 when none is given: the process default, else the one
    ``PROCFLOW_DB`` or the project's database names (opened once per location and kept
    for the process), else ``None``."""
    if _default is not None:
        return _default
    found = current_location()
    if found is None:
        return None
    storage = _opened.get(found.where)
    if storage is None:
        storage = _opened[found.where] = storage_for(found.where)
    return storage
