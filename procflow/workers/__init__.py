"""Runs on Dramatiq workers sharing Redis (the extra ``procflow[dramatiq]``).

``DramatiqExecutor`` submits runs (``await run.submit(..., executor=executor)``,
``await agent.submit(..., executor=executor)``); ``procflow worker TARGET...`` starts the
workers (``WorkerApp`` in each process). ``WorkerSettings`` holds the safe defaults.
Dramatiq is imported only when ``DramatiqExecutor`` or ``WorkerApp`` is first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from procflow.workers.settings import WorkerSettings

if TYPE_CHECKING:
    from procflow.workers.app import WorkerApp
    from procflow.workers.executor import DramatiqExecutor

__all__ = ["DramatiqExecutor", "WorkerApp", "WorkerSettings"]

_LAZY = ("DramatiqExecutor", "WorkerApp")


def __getattr__(name: str) -> Any:
    if name == "DramatiqExecutor":
        from procflow.workers.executor import DramatiqExecutor

        return DramatiqExecutor
    if name == "WorkerApp":
        from procflow.workers.app import WorkerApp

        return WorkerApp
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
