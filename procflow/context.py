"""``RequestContext``: per-request values shared by an agent, its processors and its steps."""

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

    Example::

        ctx = RequestContext({"tokenLimit": 4000}, locale="en")
        ctx.set(RESOURCE_ID_KEY, "user-1")
        ctx.get("tokenLimit", 1000)
    """

    __slots__ = ("_values",)

    def __init__(self, mapping: Mapping[str, Any] | None = None, /, **values: Any) -> None:
        self._values: dict[str, Any] = {}
        if mapping is not None:
            for key, value in mapping.items():
                self[key] = value
        for key, value in values.items():
            self[key] = value

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(key, str):
            raise TypeError(f"RequestContext keys must be str, got {type(key).__name__}: {key!r}")
        self._values[key] = value

    def __delitem__(self, key: str) -> None:
        del self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __repr__(self) -> str:
        return f"RequestContext({self._values!r})"

    def set(self, key: str, value: Any) -> None:
        """Set ``key`` to ``value``, replacing any value it had.

        Raises:
            TypeError: ``key`` is not a str.
        """
        self[key] = value

    def has(self, key: str) -> bool:
        """Whether ``key`` is set."""
        return key in self._values

    def delete(self, key: str) -> bool:
        """Remove ``key``; return whether it was set (a missing key is not an error)."""
        return self._values.pop(key, _MISSING) is not _MISSING

    def to_dict(self) -> dict[str, Any]:
        """A shallow copy of the entries as a plain dict."""
        return dict(self._values)

    def copy(self) -> RequestContext:
        """A shallow copy."""
        return RequestContext(self._values)

    def json_safe(self) -> dict[str, Any]:
        """The entries whose values are strict JSON (no NaN/Infinity), for snapshots.

        Values that ``json.dumps`` rejects (objects, functions, circular data...) are left out.
        """
        return {key: value for key, value in self._values.items() if _is_json(value)}

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


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return False
    return True
