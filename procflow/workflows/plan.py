"""The declarative plan a workflow builder records: one entry per builder call."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

if TYPE_CHECKING:
    from procflow.steps.step import Step
    from procflow.workflows.workflow import Workflow

__all__ = [
    "BranchEntry",
    "Condition",
    "Entry",
    "ForeachEntry",
    "LoopEntry",
    "MapEntry",
    "ParallelEntry",
    "SleepEntry",
    "SleepUntilEntry",
    "StepEntry",
    "StepLike",
    "entry_steps",
]

StepLike: TypeAlias = "Step | Workflow"
Condition: TypeAlias = Callable[[Any], Any]
"""A function of a ``StepContext`` returning a truth value (sync or async)."""


@dataclass(frozen=True, slots=True)
class StepEntry:
    """``.then(step)``."""

    step: StepLike


@dataclass(frozen=True, slots=True)
class ParallelEntry:
    """``.parallel([...])``: all run concurrently; output keyed by step id."""

    steps: tuple[StepLike, ...]


@dataclass(frozen=True, slots=True)
class BranchEntry:
    """``.branch([(cond, step), ...])``: every step whose condition holds runs."""

    branches: tuple[tuple[Condition, StepLike], ...]
    labels: tuple[str | None, ...] = ()


@dataclass(frozen=True, slots=True)
class MapEntry:
    """``.map(fn)``: reshape the data; no step result of its own."""

    id: str
    fn: Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class ForeachEntry:
    """``.foreach(step, concurrency=n)``: the step over each item of a list."""

    step: StepLike
    concurrency: int


@dataclass(frozen=True, slots=True)
class LoopEntry:
    """``.dowhile`` / ``.dountil``: the body runs, then the condition decides."""

    step: StepLike
    condition: Condition
    mode: Literal["dowhile", "dountil"]
    max_iterations: int | None
    label: str | None = None


@dataclass(frozen=True, slots=True)
class SleepEntry:
    """``.sleep(seconds)``: wait, passing the data through."""

    id: str
    seconds: float | Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class SleepUntilEntry:
    """``.sleep_until(when)``: wait until a moment, passing the data through."""

    id: str
    until: datetime | Callable[[Any], Any]


Entry: TypeAlias = (StepEntry | ParallelEntry | BranchEntry | MapEntry | ForeachEntry
                    | LoopEntry | SleepEntry | SleepUntilEntry)


def entry_steps(entry: Entry) -> tuple[StepLike, ...]:
    """The steps an entry runs (none for map and sleeps)."""
    if isinstance(entry, StepEntry | ForeachEntry | LoopEntry):
        return (entry.step,)
    if isinstance(entry, ParallelEntry):
        return entry.steps
    if isinstance(entry, BranchEntry):
        return tuple(s for _, s in entry.branches)
    return ()
