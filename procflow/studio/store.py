"""Where a ``procflow`` command finds its runs, and run ids given as unique prefixes.

The order is ``procflow.storage.locate``'s (documented in docs/storage.md): ``--db`` →
the target workflow's own ``storage=`` (``run`` only) → ``PROCFLOW_DB`` (a path, a
``redis://`` or a ``postgresql://`` URL) → the project's ``.procflow/procflow.db`` found
walking up from the working directory → for ``run``, a new ``.procflow/procflow.db`` in
the working directory. Read-only commands never create a database: with none found they
say so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from procflow.errors import RunNotFoundError
from procflow.storage.locate import DB_ENV, PROJECT_DB, configured_location, storage_for

if TYPE_CHECKING:
    from procflow.storage.base import Storage

__all__ = ["MIN_ID_CHARS", "NoStoreError", "Store", "find_store", "resolve_run_id",
           "short_ids"]

MIN_ID_CHARS = 8
"""The fewest characters a shortened run id shows."""

_ALL = 100_000


class NoStoreError(Exception):
    """No database exists for a read-only command (the message says where it looked)."""


@dataclass(slots=True)
class Store:
    """An opened storage and how the command line names it.

    Attributes:
        storage: The storage.
        location: What the user sees: a path or a (password-free) URL.
        source: ``"--db"``, ``"workflow"``, ``"PROCFLOW_DB"``, ``"project"`` or ``"new"``.
        owned: Whether the command opened it (and closes it).
    """

    storage: Storage
    location: str
    source: str
    owned: bool = True

    def db_words(self) -> list[str]:
        """The ``--db`` words a printed command needs to find this store again."""
        return ["--db", self.location] if self.source in ("--db", DB_ENV) else []


def find_store(db: str | None, *, create: bool, own: Storage | None = None) -> Store:
    """The store a command uses.

    Args:
        db: ``--db`` (a path, a ``redis://`` or a ``postgresql://`` URL), if given.
        create: Whether the command writes (``run``): with nothing found it creates
            ``.procflow/procflow.db`` in the working directory.
        own: The target workflow's own storage, if any.

    Raises:
        NoStoreError: Nothing found and ``create`` is false.
    """
    if db is not None:
        if not create and "://" not in db and not Path(db).is_file():
            raise NoStoreError(f"no database at {db} (it is created by 'procflow run')")
        return Store(storage_for(db, create=create), _display(db), "--db")
    if own is not None:
        return Store(own, _describe(own), "workflow", owned=False)
    found = configured_location()
    if found is not None:
        location, source = found.where, found.source
        if not create and source == DB_ENV and "://" not in location \
                and not Path(location).is_file():
            raise NoStoreError(f"no database at {location} (from {DB_ENV}; it is created "
                               "by 'procflow run')")
        return Store(storage_for(location, create=create), _display(location), source)
    if not create:
        raise NoStoreError(f"no runs stored yet: no {PROJECT_DB} in this directory or its "
                           f"parents, and {DB_ENV} is not set (a 'procflow run' creates one)")
    return Store(storage_for(str(PROJECT_DB)), str(PROJECT_DB), "new")


def _display(location: str) -> str:
    if "://" in location and "@" in location:
        scheme, rest = location.split("://", 1)
        return f"{scheme}://***@{rest.rsplit('@', 1)[1]}"
    return location


def _describe(storage: Storage) -> str:
    from procflow.storage.sqlite import SQLiteStorage

    return str(storage.path) if isinstance(storage, SQLiteStorage) else repr(storage)


async def _all_ids(storage: Storage) -> list[str]:
    ids = {t.run_id for t in await storage.list_traces(limit=_ALL)}
    ids.update(s.run_id for s in await storage.list_runs(limit=_ALL))
    return sorted(ids)


async def resolve_run_id(storage: Storage, given: str, where: str) -> str:
    """The full run id ``given`` names: itself, or the one stored id it is a prefix of.

    Raises:
        RunNotFoundError: No stored run id starts with ``given``.
        ValueError: Several do (the message lists some of them).
    """
    if await storage.load_trace(given) is not None:
        return given
    ids = await _all_ids(storage)
    if given in ids:
        return given
    matches = [i for i in ids if i.startswith(given)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise RunNotFoundError(f"no run '{given}' in {where} (see 'procflow runs')",
                               run_id=given)
    listed = ", ".join(matches[:5]) + (", …" if len(matches) > 5 else "")
    raise ValueError(f"run id prefix '{given}' is ambiguous in {where}: {len(matches)} runs "
                     f"start with it ({listed}); give more characters")


async def short_ids(storage: Storage, shown: list[str]) -> dict[str, str]:
    """Each shown id → its shortest prefix (at least ``MIN_ID_CHARS``) that no other
    stored run id shares, like git's abbreviated hashes."""
    ids = await _all_ids(storage)
    ids = sorted(set(ids) | set(shown))
    position = {run_id: n for n, run_id in enumerate(ids)}
    result: dict[str, str] = {}
    for run_id in shown:
        n = position[run_id]
        common = 0
        for other in (ids[n - 1] if n else "", ids[n + 1] if n + 1 < len(ids) else ""):
            k = 0
            while k < min(len(run_id), len(other)) and run_id[k] == other[k]:
                k += 1
            common = max(common, k)
        result[run_id] = run_id[:max(MIN_ID_CHARS, common + 1)]
    return result
