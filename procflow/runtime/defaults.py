"""How a run picks its storage: the order of ``procflow.storage.locate``, then a
process-wide in-memory store.

A run uses the ``storage=`` given to ``create_run``/``get_run``, then its workflow's
own ``storage=``, then what ``located_storage()`` finds (``set_default_storage``,
``PROCFLOW_DB``, the project's ``.procflow/procflow.db``), else an in-memory store
keeping the last ``FALLBACK_MAX_RUNS`` finished runs (and every run that can still go
on: see ``InMemoryStorage``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from procflow.storage.locate import located_storage

if TYPE_CHECKING:
    from procflow.runtime.execution import PlanUnit
    from procflow.storage.base import Storage

__all__ = ["FALLBACK_MAX_RUNS", "current_storage", "resolve_storage"]

FALLBACK_MAX_RUNS = 20
"""How many finished runs (and traces) the in-memory fallback keeps before forgetting
the oldest. Few on purpose: it is for looking at the last runs in process (nothing else
can see it), and every kept run is ~150 objects an agent call's allocations then miss in
the cache (keeping 100 made a traced ``generate()`` ~5 % slower than keeping 20). Set a
storage (``set_default_storage``, ``PROCFLOW_DB``) to keep more."""

_fallback: Storage | None = None


def resolve_storage(given: Storage | None, wf: PlanUnit) -> Storage:
    """The storage for a run: the given one, the workflow's, else ``current_storage()``."""
    if given is not None:
        return given
    if wf.storage is not None:
        return wf.storage
    return current_storage()


def current_storage() -> Storage:
    """The storage a run that names none uses: the one ``located_storage()`` finds, or a
    process-wide in-memory store keeping the last ``FALLBACK_MAX_RUNS`` runs."""
    global _fallback
    located = located_storage()
    if located is not None:
        return located
    if _fallback is None:
        from procflow.storage.memory import InMemoryStorage

        _fallback = InMemoryStorage(max_runs=FALLBACK_MAX_RUNS)
    return _fallback
