"""The process-wide default storage, and how a run picks its storage.

Resolution order (the same for every ``procflow`` command and for Python code):

1. the ``storage=`` given to ``create_run``/``get_run`` (``--db`` on the command line),
   then the workflow's own ``storage=``, then ``set_default_storage(...)``;
2. ``PROCFLOW_DB``: a SQLite file path, a ``redis://`` or a ``postgresql://`` URL;
3. the project's ``.procflow/procflow.db``, found by walking up from the current
   directory (like git finds ``.git``); it is never created here;
4. for Python code only, an in-memory store keeping the last ``FALLBACK_MAX_RUNS`` finished
   runs (and every run that can still go on: see ``InMemoryStorage``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from procflow.runtime.execution import PlanUnit
    from procflow.storage.base import Storage

__all__ = ["DB_ENV", "FALLBACK_MAX_RUNS", "PROJECT_DB", "current_storage", "find_project_db",
           "get_default_storage", "located_storage", "resolve_storage", "set_default_storage",
           "storage_for", "storage_location"]

FALLBACK_MAX_RUNS = 20
"""How many finished runs (and traces) the in-memory fallback keeps before forgetting
the oldest. Few on purpose: it is for looking at the last runs in process (nothing else
can see it), and every kept run is ~150 objects an agent call's allocations then miss in
the cache (keeping 100 made a traced ``generate()`` ~5 % slower than keeping 20). Set a
storage (``set_default_storage``, ``PROCFLOW_DB``) to keep more."""

DB_ENV = "PROCFLOW_DB"
"""The environment variable naming where runs are stored: a path, a ``redis://`` or a
``postgresql://`` URL."""

PROJECT_DB = Path(".procflow") / "procflow.db"
"""The project's database, relative to the project's root directory."""

_default: Storage | None = None
_fallback: Storage | None = None
_opened: dict[str, Storage] = {}
_lookup: tuple[str | None, str, str | None] | None = None  # (env, cwd, location)


def set_default_storage(storage: Storage | None) -> None:
    """Set the storage runs use when neither the run nor its workflow names one.

    Args:
        storage: The storage, or ``None`` to go back to ``PROCFLOW_DB``, the project's
            database or the in-memory fallback.
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


def storage_location() -> tuple[str, str] | None:
    """Where runs go when nothing is given: ``(location, source)`` from ``PROCFLOW_DB``
    or the project's database (source ``"PROCFLOW_DB"`` or ``"project"``), else ``None``."""
    env = os.environ.get(DB_ENV)
    if env:
        return env, DB_ENV
    found = find_project_db()
    return (str(found), "project") if found is not None else None


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


def located_storage() -> Storage | None:
    """The storage ``PROCFLOW_DB`` or the project's database names (one per location,
    kept for the process), else ``None``. The lookup is remembered per working directory
    and ``PROCFLOW_DB`` value."""
    global _lookup
    env, cwd = os.environ.get(DB_ENV), os.getcwd()
    if _lookup is None or _lookup[0] != env or _lookup[1] != cwd:
        found = storage_location()
        _lookup = (env, cwd, None if found is None else found[0])
    location = _lookup[2]
    if location is None:
        return None
    storage = _opened.get(location)
    if storage is None:
        storage = _opened[location] = storage_for(location)
    return storage


def resolve_storage(given: Storage | None, wf: PlanUnit) -> Storage:
    """The storage for a run: the given one, the workflow's, the default, the one
    ``PROCFLOW_DB`` or the project's ``.procflow/procflow.db`` names, or a process-wide
    in-memory store keeping the last ``FALLBACK_MAX_RUNS`` runs."""
    if given is not None:
        return given
    if wf.storage is not None:
        return wf.storage
    return current_storage()


def current_storage() -> Storage:
    """The storage a run that names none uses: the default, the one ``PROCFLOW_DB`` or
    the project's ``.procflow/procflow.db`` names, or a process-wide in-memory store
    keeping the last ``FALLBACK_MAX_RUNS`` runs."""
    global _fallback
    if _default is not None:
        return _default
    located = located_storage()
    if located is not None:
        return located
    if _fallback is None:
        from procflow.storage.memory import InMemoryStorage

        _fallback = InMemoryStorage(max_runs=FALLBACK_MAX_RUNS)
    return _fallback
