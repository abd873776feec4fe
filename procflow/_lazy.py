"""Names a package loads on first use (PEP 562), so importing the package stays cheap.

Usage, at the end of a package's ``__init__.py``::

    __getattr__, __dir__ = lazy_exports(__name__, globals(), {
        "RedisCache": ".redis",             # relative to this package
    })

A name is imported the first time it is read and then kept in the module's globals,
so later reads are plain attribute lookups.

A renamed public name keeps working for a release as a *deprecated alias*: reading it
warns (``DeprecationWarning``, naming the new name) every time, and it is not listed
in ``__all__`` or ``dir()``::

    __getattr__, __dir__ = lazy_exports(__name__, globals(), {}, deprecated={
        "TripWire": ("procflow.errors", "TripwireError"),
    })
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, namespace: MutableMapping[str, Any], names: Mapping[str, str], *,
    deprecated: Mapping[str, tuple[str, str]] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` that import ``names`` on first use.

    Args:
        package: The package's ``__name__`` (relative module paths resolve against it).
        namespace: The package's ``globals()``; a loaded name is stored there.
        names: Public name -> the module defining it (``".sub.module"`` relative to
            ``package``, or an absolute dotted path).
        deprecated: Old name -> (the module defining its replacement, the new name).

    Returns:
        ``(__getattr__, __dir__)`` to assign in the package.
    """
    table = dict(names)
    renamed = dict(deprecated or {})

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            if name in renamed:
                return _renamed(package, name, *renamed[name])
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *table})

    return __getattr__, __dir__


def _renamed(package: str, old: str, module: str, new: str) -> Any:
    """The value ``old`` was renamed to, with a ``DeprecationWarning`` (the caller's line)."""
    warnings.warn(f"{package}.{old} is deprecated: use {new} (from {module}) instead",
                  DeprecationWarning, stacklevel=3)
    return getattr(importlib.import_module(module), new)
