"""``RequestContext``: per-request values shared by an agent, its processors and its steps.

A request context lives in memory. A workflow run's snapshot keeps only the entries
marked for it (``set(key, value, persist=True)``) and the well-known resource and thread
ids, so an API key passed in a request context never reaches storage; after a restart
the caller passes the others again (``run.resume(request_context=...)``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

__all__ = ["RESOURCE_ID_KEY", "THREAD_ID_KEY", "RequestContext"]

RESOURCE_ID_KEY = "procflow__resourceId"
"""The key holding the request's resource id (the user or tenant), set from ``memory=``."""

THREAD_ID_KEY = "procflow__threadId"
"""The key holding the request's thread id, set from ``memory=``."""


class RequestContext(MutableMapping[str, Any]):
    """A dict-like holder of per-request values, keyed by str.

    Args:
        mapping: Initial entries (copied), e.g. another ``RequestContext`` or a dict.
        **values: More initial entries; they win over ``mapping``.

    Entries are kept in memory only; a run's stored snapshot holds just the entries
    marked with ``set(..., persist=True)`` (plus ``RESOURCE_ID_KEY`` and
    ``THREAD_ID_KEY``). Marks are copied with the context (``RequestContext(other)``,
    ``copy()``, ``update(other)``).

    Example::

        ctx = RequestContext({"tokenLimit": 4000}, locale="en")
        ctx.set(RESOURCE_ID_KEY, "user-1")
        ctx.set("plan", "pro", persist=True)     # kept in the run's snapshot
        ctx.set("api_key", key)                  # never stored
        ctx.get("tokenLimit", 1000)
    """

    __slots__ = ("_persist", "_values")

    def __init__(self, mapping: Mapping[str, Any] | None = None, /, **values: Any) -> None:
        self._values: dict[str, Any] = {}
        self._persist: set[str] = set()
        if mapping is not None:
            self.update(mapping)
        for key, value in values.items():
            self[key] = value

    @classmethod
    def restored(cls, entries: Mapping[str, Any]) -> RequestContext:
        """A context of entries read back from a snapshot, every one marked to persist."""
        ctx = cls(entries)
        ctx._persist.update(ctx._values)
        return ctx

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(key, str):
            raise TypeError(f"RequestContext keys must be str, got {type(key).__name__}: {key!r}")
        self._values[key] = value

    def __delitem__(self, key: str) -> None:
        del self._values[key]
        self._persist.discard(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __repr__(self) -> str:
        return f"RequestContext({self._values!r})"

    def set(self, key: str, value: Any, *, persist: bool = False) -> None:
        """Set ``key`` to ``value``, replacing any value it had.

        Args:
            key: The entry's key.
            value: Its value.
            persist: Keep this entry in the stored snapshot of the runs it is passed to
                (it must be JSON data; others are left out). Without it the entry is
                never written anywhere. A key stays marked until it is deleted.

        Raises:
            TypeError: ``key`` is not a str.
        """
        self[key] = value
        if persist:
            self._persist.add(key)

    def update(self, other: Any = (), /, **values: Any) -> None:
        """Set many entries (a mapping, pairs, or keywords); the persistence marks of
        another ``RequestContext`` come along."""
        pairs = other.items() if isinstance(other, Mapping) else other
        for key, value in pairs:
            self[key] = value
        if isinstance(other, RequestContext):
            self._persist.update(other._persist)
        for key, value in values.items():
            self[key] = value

    @property
    def persisted_keys(self) -> frozenset[str]:
        """The keys marked with ``set(..., persist=True)``."""
        return frozenset(self._persist)

    def has(self, key: str) -> bool:
        """Whether ``key`` is set."""
        return key in self._values

    def delete(self, key: str) -> bool:
        """Remove ``key``; return whether it was set (a missing key is not an error)."""
        self._persist.discard(key)
        return self._values.pop(key, _MISSING) is not _MISSING

    def to_dict(self) -> dict[str, Any]:
        """A shallow copy of the entries as a plain dict."""
        return dict(self._values)

    def copy(self) -> RequestContext:
        """A shallow copy (persistence marks included)."""
        return RequestContext(self)

    def json_safe(self) -> dict[str, Any]:
        """The entries whose values are strict JSON (no NaN/Infinity).

        Values that ``json.dumps`` rejects (objects, functions, circular data...) are left out.
        """
        return {key: value for key, value in self._values.items() if _is_json(value)}

    def persisted(self) -> dict[str, Any]:
        """What a run's snapshot stores: the marked entries and the resource and thread
        ids, those whose values are strict JSON."""
        return {key: value for key, value in self._values.items()
                if (key in self._persist or key in _ALWAYS_PERSISTED) and _is_json(value)}

    @property
    def resource_id(self) -> str | None:
        """The value of ``RESOURCE_ID_KEY``, or ``None`` when unset.

        Raises:
            TypeError: The stored value is not a str.
        """
        return self._str_entry(RESOURCE_ID_KEY)

    @resource_id.setter
    def resource_id(self, value: str | None) -> None:
        self._set_str_entry(RESOURCE_ID_KEY, value)

    @property
    def thread_id(self) -> str | None:
        """The value of ``THREAD_ID_KEY``, or ``None`` when unset.

        Raises:
            TypeError: The stored value is not a str.
        """
        return self._str_entry(THREAD_ID_KEY)

    @thread_id.setter
    def thread_id(self, value: str | None) -> None:
        self._set_str_entry(THREAD_ID_KEY, value)

    def _str_entry(self, key: str) -> str | None:
        value = self._values.get(key)
        if value is None or isinstance(value, str):
            return value
        # Never coerce silently: a wrong id would mix one tenant's data with another's.
        raise TypeError(f"request context entry {key!r} must be a str, got "
                        f"{type(value).__name__}: {value!r}")

    def _set_str_entry(self, key: str, value: str | None) -> None:
        if value is None:
            self._values.pop(key, None)
        elif isinstance(value, str):
            self._values[key] = value
        else:
            raise TypeError(f"{key!r} must be a str or None, got {type(value).__name__}")


_MISSING = object()
_ALWAYS_PERSISTED = frozenset({RESOURCE_ID_KEY, THREAD_ID_KEY})


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return False
    return True
