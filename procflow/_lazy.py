"""Names a package loads on first use (PEP 562), so importing the package stays cheap.

A package names what it loads lazily once, as imports under ``if TYPE_CHECKING:``
(what mypy and a reader see); that block, read from the package's source
(``declared_exports``), is the table of what to import on first use::

    from procflow.cache.base import ServerCache

    if TYPE_CHECKING:
        from procflow.cache.redis import RedisCache

    __all__ = ["RedisCache", "ServerCache"]

    __getattr__, __dir__ = lazy_exports(__name__, globals())

A name is imported the first time it is read and then kept in the module's globals,
so later reads are plain attribute lookups.

A package whose every export is lazy lists each name only there, written ``Name as
Name`` (so mypy sees it re-exported), and derives ``__all__`` from the block::

    _EXPORTS = declared_exports(__name__, globals())
    __all__ = sorted(_EXPORTS)
    __getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)

A renamed public name keeps working for a release as a *deprecated alias*: reading it
warns (``DeprecationWarning``, naming the new name) every time, and it is not listed
in ``__all__`` or ``dir()``::

    __getattr__, __dir__ = lazy_exports(__name__, globals(), deprecated={
        "TripWire": ("procflow.errors", "TripwireError"),
    })
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import warnings
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

__all__ = ["declared_exports", "lazy_exports"]


def lazy_exports(
    package: str, namespace: MutableMapping[str, Any],
    names: Mapping[str, str] | None = None, *,
    deprecated: Mapping[str, tuple[str, str]] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` that import ``names`` on first use.

    Args:
        package: The package's ``__name__`` (relative module paths resolve against it).
        namespace: The package's ``globals()``; a loaded name is stored there.
        names: Public name -> the module defining it (``".sub.module"`` relative to
            ``package``, or an absolute dotted path); default: the package's
            ``TYPE_CHECKING`` imports (``declared_exports``).
        deprecated: Old name -> (the module defining its replacement, the new name).

    Returns:
        ``(__getattr__, __dir__)`` to assign in the package.
    """
    table = dict(names) if names is not None else declared_exports(package, namespace)
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


def declared_exports(package: str, namespace: Mapping[str, Any]) -> dict[str, str]:
    """The names a package imports under ``if TYPE_CHECKING:``, each with its module.

    The block is read from the package's source (it does not run at run time), so the
    imports mypy checks are the one list of what the package exports lazily.

    Args:
        package: The package's ``__name__``.
        namespace: The package's ``globals()`` (its loader gives the source).

    Returns:
        Name -> the absolute module it is imported from, in the block's order.

    Raises:
        ImportError: The package's source cannot be read (an install without sources).
    """
    loader = namespace.get("__loader__")
    get_source = getattr(loader, "get_source", None)
    source = get_source(package) if callable(get_source) else None
    if not isinstance(source, str):
        raise ImportError(f"{package}: its exports are declared in its source, which "
                          "cannot be read (install procflow with its .py files)")
    exports: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) \
                and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom):
                    module = importlib.util.resolve_name(
                        "." * statement.level + (statement.module or ""), package)
                    exports.update((alias.asname or alias.name, module)
                                   for alias in statement.names)
    return exports
