"""Names a package loads on first use (PEP 562), so importing the package stays cheap.

Usage, at the end of a package's ``__init__.py``::

    __getattr__, __dir__ = lazy_exports(__name__, globals(), {
        "RedisCache": ".redis",             # relative to this package
    })

A name is imported the first time it is read and then kept in the module's globals,
so later reads are plain attribute lookups.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, namespace: MutableMapping[str, Any], names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` that import ``names`` on first use.

    Args:
        package: The package's ``__name__`` (relative module paths resolve against it).
        namespace: The package's ``globals()``; a loaded name is stored there.
        names: Public name -> the module defining it (``".sub.module"`` relative to
            ``package``, or an absolute dotted path).

    Returns:
        ``(__getattr__, __dir__)`` to assign in the package.
    """
    table = dict(names)

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *table})

    return __getattr__, __dir__
