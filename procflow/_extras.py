"""Optional packages: import one, or fail with one line naming the extra that installs it.

A bare ``pip install procflow`` has only the core dependencies. Whatever needs more is
imported where it is used, inside ``needs``, so a missing package reads::

    MissingExtraError: procflow.instrument() needs opentelemetry-sdk, which is not
    installed: pip install 'procflow[otel]'

(one line), not ``No module named 'opentelemetry'`` from deep inside procflow::

    with needs("otel", feature="procflow.instrument()"):
        from opentelemetry import trace

``EXTRAS`` lists the import names each extra of ``pyproject.toml`` brings;
``scripts/check_install.py`` installs each extra alone and checks it against this
table.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Final

__all__ = ["EXTRAS", "MissingExtraError", "install_hint", "needs", "require"]

EXTRAS: Final[dict[str, tuple[str, ...]]] = {
    "redis": ("redis",),
    "postgres": ("psycopg", "psycopg_pool"),
    "vector": ("numpy",),
    "ann": ("numpy", "hnswlib"),
    "otel": ("opentelemetry",),
    "re2": ("re2",),
    "onnx": ("onnxruntime", "tokenizers", "numpy"),
    "dramatiq": ("dramatiq",),
    "mcp": ("mcp",),
}
"""Extra -> the top-level modules it installs (the ``pyproject.toml`` extras)."""

_DISTRIBUTIONS: Final = {"psycopg_pool": "psycopg-pool", "opentelemetry": "opentelemetry-sdk",
                         "re2": "google-re2"}
"""Import name -> distribution name, where they differ."""


class MissingExtraError(ModuleNotFoundError):
    """A module of an extra is not installed; the message names the ``pip install`` to run.

    Attributes:
        extra: The extra that installs the missing module.
    """

    def __init__(self, message: str, *, name: str | None, extra: str) -> None:
        super().__init__(message, name=name)
        self.extra = extra


def install_hint(extra: str) -> str:
    """The command that installs ``extra``: ``pip install 'procflow[extra]'``.

    Raises:
        KeyError: ``extra`` is not one of ``EXTRAS``.
    """
    if extra not in EXTRAS:
        raise KeyError(f"no extra {extra!r}; the extras are {', '.join(sorted(EXTRAS))}")
    return f"pip install 'procflow[{extra}]'"


@contextmanager
def needs(extra: str, *, feature: str) -> Iterator[None]:
    """Turn a missing module of ``extra`` imported inside the block into one line naming
    the install command. Any other import error (a broken install, a missing module of
    another package) passes through unchanged.

    Args:
        extra: The extra the block's imports come from (a key of ``EXTRAS``).
        feature: What needs them, for the message (``"PostgreSQL storage"``).

    Raises:
        MissingExtraError: A module of ``extra`` is not installed; the message says
            which and how to install it, and ``name`` is the missing module.
    """
    hint = install_hint(extra)
    try:
        yield
    except ModuleNotFoundError as exc:
        top = (exc.name or "").partition(".")[0]
        if top not in EXTRAS[extra]:
            raise
        package = _DISTRIBUTIONS.get(top, top)
        raise MissingExtraError(f"{feature} needs {package}, which is not installed: {hint}",
                                name=exc.name, extra=extra) from None


def require(module: str, *, extra: str, feature: str) -> ModuleType:
    """Import ``module`` (a module of ``extra``), or fail as ``needs`` says.

    Args:
        module: The dotted module name (``"onnxruntime"``).
        extra: The extra that installs it.
        feature: What needs it, for the message.

    Returns:
        The module.

    Raises:
        MissingExtraError: ``module`` is not installed (one line naming the extra).
    """
    with needs(extra, feature=feature):
        found = importlib.import_module(module)
    return found
