"""The process-wide default storage, and how a run picks its storage."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from procflow.runtime.execution import PlanUnit
    from procflow.storage.base import Storage

__all__ = ["get_default_storage", "resolve_storage", "set_default_storage"]

FALLBACK_MAX_RUNS = 100
"""How many runs (and traces) the in-memory fallback keeps before forgetting the oldest."""

_default: Storage | None = None
_fallback: Storage | None = None


def set_default_storage(storage: Storage | None) -> None:
    """Set the storage runs use when neither the run nor its workflow names one.

    Args:
        storage: The storage, or ``None`` to go back to the in-memory fallback.
    """
    global _default
    _default = storage


def get_default_storage() -> Storage | None:
    """The storage set with ``set_default_storage``, if any."""
    return _default


def resolve_storage(given: Storage | None, wf: PlanUnit) -> Storage:
    """The storage for a run: the given one, the workflow's, the default, or a
    process-wide in-memory store keeping the last ``FALLBACK_MAX_RUNS`` runs."""
    global _fallback
    if given is not None:
        return given
    if wf.storage is not None:
        return wf.storage
    if _default is not None:
        return _default
    if _fallback is None:
        from procflow.storage.memory import InMemoryStorage

        _fallback = InMemoryStorage(max_runs=FALLBACK_MAX_RUNS)
    return _fallback
