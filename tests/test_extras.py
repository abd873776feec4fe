"""Using a feature whose extra is not installed says, in one line, what to install.

Each test hides the extra's package (``sys.modules[name] = None`` makes ``import name``
fail as if it were not installed) and uses the feature the way a user would.
``scripts/check_install.py`` checks the same against real installs of the wheel.
"""

from __future__ import annotations

import importlib
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import procflow
from procflow._extras import EXTRAS, MissingExtraError, install_hint, needs, require
from procflow.errors import StorageError

ROOT = Path(__file__).resolve().parent.parent


def _assert_names(error: BaseException, extra: str) -> None:
    message = str(error)
    assert f"pip install 'procflow[{extra}]'" in message
    assert "\n" not in message


def _postgres() -> None:
    from procflow.storage import PostgresStorage

    PostgresStorage("postgresql://nobody@127.0.0.1:5432/none")


def _vector() -> None:
    from procflow.memory.search import MessageIndex

    MessageIndex(object(), object())  # type: ignore[arg-type]  # fails before using them


def _ann() -> None:
    from procflow.memory.search import MessageIndex

    MessageIndex(object(), object(), approximate=True)  # type: ignore[arg-type]


def _onnx(tmp_path: Path) -> None:
    from procflow.processors.builtin import OnnxTextClassifier

    OnnxTextClassifier(tmp_path / "model.onnx", tmp_path / "tokenizer.json")


def _dramatiq() -> None:
    import procflow.workers

    _ = procflow.workers.WorkerApp


CASES = [
    pytest.param("postgres", "psycopg", lambda _: _postgres(), StorageError, id="postgres"),
    pytest.param("vector", "numpy", lambda _: _vector(), MissingExtraError, id="vector"),
    pytest.param("ann", "hnswlib", lambda _: _ann(), MissingExtraError, id="ann"),
    pytest.param("otel", "opentelemetry", lambda _: procflow.instrument(), MissingExtraError,
                 id="otel"),
    pytest.param("onnx", "onnxruntime", _onnx, MissingExtraError, id="onnx"),
    pytest.param("dramatiq", "dramatiq", lambda _: _dramatiq(), MissingExtraError,
                 id="dramatiq"),
]


@pytest.mark.parametrize(("extra", "module", "use", "error"), CASES)
def test_a_missing_extra_names_its_install_command(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, extra: str, module: str,
        use: Callable[[Path], Any], error: type[Exception]) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    for loaded in [name for name in sys.modules if name.startswith("procflow.workers.")]:
        monkeypatch.delitem(sys.modules, loaded)  # imported again, without dramatiq
    with pytest.raises(error) as caught:
        use(tmp_path)
    _assert_names(caught.value, extra)


def test_the_message_says_what_needs_which_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg_pool", None)
    with pytest.raises(StorageError) as caught:
        _postgres()
    assert str(caught.value) == ("PostgreSQL storage needs psycopg-pool, which is not "
                                 "installed: pip install 'procflow[postgres]'")


def test_a_module_of_a_worker_says_so_when_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "dramatiq", None)
    for name in ("procflow.workers.app", "procflow.workers.broker", "procflow.workers.waking"):
        monkeypatch.delitem(sys.modules, name, raising=False)
        with pytest.raises(MissingExtraError) as caught:
            importlib.import_module(name)
        assert caught.value.extra == "dramatiq"
        assert caught.value.name == "dramatiq"
        _assert_names(caught.value, "dramatiq")


def test_require_returns_the_module_when_installed() -> None:
    assert require("redis", extra="redis", feature="test") is importlib.import_module("redis")


def test_other_missing_modules_pass_through_unchanged() -> None:
    with pytest.raises(ModuleNotFoundError) as caught, needs("postgres", feature="test"):
        import procflow_no_such_module  # type: ignore[import-not-found]  # noqa: F401
    assert type(caught.value) is ModuleNotFoundError
    assert caught.value.name == "procflow_no_such_module"


def test_an_unknown_extra_is_refused() -> None:
    with pytest.raises(KeyError, match="the extras are"):
        install_hint("nosuch")
    assert install_hint("re2") == "pip install 'procflow[re2]'"


def test_the_table_matches_pyproject() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = set(pyproject["project"]["optional-dependencies"]) - {"all", "dev", "docs"}
    assert set(EXTRAS) == extras
