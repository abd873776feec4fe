"""Loading the object a ``procflow`` command works on: ``path/to/file.py:name`` or
``package.module:name``, naming a committed ``Workflow`` or an ``Agent``."""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from procflow.workflows.workflow import Workflow

if TYPE_CHECKING:
    from procflow.agent.agent import Agent

__all__ = ["TargetError", "is_agent", "load_attribute", "load_target", "module_name_for"]

_SYNTAX = "TARGET must look like path/to/file.py:name or package.module:name"
_MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_DEBUG_HINT = " (set PROCFLOW_DEBUG=1 for the traceback)"


class TargetError(Exception):
    """The TARGET of a command cannot be loaded; the message is one line for the user."""


def is_agent(obj: object) -> bool:
    """Whether ``obj`` is an ``Agent`` (imports the agent package only when needed)."""
    if isinstance(obj, Workflow) or "procflow.agent.agent" not in sys.modules:
        return False
    from procflow.agent.agent import Agent

    return isinstance(obj, Agent)


def load_target(spec: str) -> Workflow | Agent:
    """The workflow or agent a TARGET names.

    Args:
        spec: ``path/to/file.py:name`` (the file is imported by path, its directory on
            ``sys.path`` while it loads) or ``package.module:name`` (imported with the
            working directory on ``sys.path``).

    Returns:
        A committed ``Workflow`` or an ``Agent``.

    Raises:
        TargetError: The spec is malformed, the file or module is missing or fails to
            import, the name is missing, or it names something else.
    """
    return _check_kind(load_attribute(spec), spec.rpartition(":")[2])


def load_attribute(spec: str, *, defines: Callable[[ModuleType], str] | None = None) -> Any:
    """The object ``path/to/file.py:name`` or ``package.module:name`` names, of any kind
    (``load_target`` checks it is a workflow or an agent).

    Args:
        spec: As for ``load_target``.
        defines: What a module missing the name offers instead, for the error (default:
            its workflows and agents).

    Raises:
        TargetError: The spec is malformed, the module is missing or fails to import, or
            the name is missing.
    """
    source, _, name = spec.rpartition(":")
    if not source or not name.isidentifier():
        raise TargetError(f"{_SYNTAX}, got {spec!r}")
    if source.endswith(".py") or "/" in source or "\\" in source:
        module, where = _import_file(Path(source)), source
    elif _MODULE.fullmatch(source):
        module, where = _import_module(source), f"module {source}"
    else:
        raise TargetError(f"{_SYNTAX}, got {spec!r}")
    if not hasattr(module, name):
        raise TargetError(f"{where} has no attribute {name!r} "
                          f"({(defines or _defines)(module)})")
    return getattr(module, name)


def module_name_for(path: Path) -> str:
    """A module name derived from a file path ("flows/my-flow.py" → "my_flow")."""
    stem = re.sub(r"\W", "_", path.stem) or "target"
    return stem if not stem[0].isdigit() else f"_{stem}"


def _import_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise TargetError(f"no such file: {path}" if not path.exists()
                          else f"not a file: {path}")
    if path.suffix != ".py":
        raise TargetError(f"{path} is not a Python file (.py); {_SYNTAX}")
    resolved = path.resolve()
    name = module_name_for(resolved)
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise TargetError(f"cannot import {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    previous = sys.modules.get(name)
    sys.modules[name] = module  # dataclasses and pydantic look the module up while it runs
    try:
        with _on_sys_path(resolved.parent):
            spec.loader.exec_module(module)
    except BaseException as exc:
        _restore(name, previous)
        raise _import_failed(str(path), exc) from exc
    return module


def _import_module(name: str) -> ModuleType:
    try:
        with _on_sys_path(Path.cwd()):
            return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            raise TargetError(f"no module named {name!r} (looked in the working directory "
                              "and the installed packages)") from exc
        raise _import_failed(f"module {name}", exc) from exc
    except BaseException as exc:
        raise _import_failed(f"module {name}", exc) from exc


def _import_failed(where: str, exc: BaseException) -> BaseException:
    if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit: not ours to hide
        return exc
    line = ""
    if isinstance(exc, SyntaxError) and exc.lineno is not None:
        line = f" (line {exc.lineno})"
    message = " ".join(str(exc).split()) or "(no message)"
    return TargetError(f"importing {where} failed: {type(exc).__name__}: {message}{line}"
                       f"{_DEBUG_HINT}")


@contextmanager
def _on_sys_path(directory: Path) -> Iterator[None]:
    entry = str(directory)
    added = entry not in sys.path
    if added:
        sys.path.insert(0, entry)
    try:
        yield
    finally:
        if added and entry in sys.path:
            sys.path.remove(entry)


def _restore(name: str, previous: ModuleType | None) -> None:
    if previous is None:
        sys.modules.pop(name, None)
    else:
        sys.modules[name] = previous


def _defines(module: ModuleType) -> str:
    found = [k for k, v in vars(module).items()
             if not k.startswith("_") and (isinstance(v, Workflow) or is_agent(v))]
    if found:
        return f"it defines: {', '.join(found)}"
    return "it defines no Workflow or Agent"


def _check_kind(obj: Any, name: str) -> Workflow | Agent:
    if isinstance(obj, Workflow):
        if not obj.committed:
            raise TargetError(f"{name!r} is a Workflow that is not committed; call .commit() "
                              "on it in its module")
        return obj
    if is_agent(obj):
        agent: Agent = obj
        return agent
    raise TargetError(f"{name!r} is {_kind_of(obj)}, not a Workflow or an Agent")


def _kind_of(obj: object) -> str:
    if isinstance(obj, type):
        kind = "class"
    elif isinstance(obj, ModuleType):
        kind = "module"
    elif callable(obj) and type(obj).__name__ in ("function", "builtin_function_or_method"):
        kind = "function"
    else:
        kind = type(obj).__name__
    article = "an" if kind[:1].lower() in "aeiou" else "a"
    return f"{article} {kind}"
