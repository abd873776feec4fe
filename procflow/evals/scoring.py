"""The scorer contract: ``Scorer``, what it is given (``ScoreContext``), what it gives
back (``Score``), and ``@scorer`` for a function of the case and the output.

A score is a number in [0, 1]; ``True``/``False`` count as 1 and 0. A ``Score`` whose
value is ``None`` is a skip (the scorer could not apply, its reason says why) and does
not count in averages. A scorer that raises, or returns something else, is reported as
that scorer's error for that case; the experiment goes on.
"""

from __future__ import annotations

import inspect
import math
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias, overload

if TYPE_CHECKING:
    from procflow.evals.dataset import Case
    from procflow.records import ToolCallRecord, Usage

__all__ = ["Score", "ScoreContext", "ScoreValue", "Scorer", "ScorerFunction",
           "run_scorer", "scorer", "to_score"]

ScoreValue: TypeAlias = "Score | float | bool"
"""What a scorer may return: a ``Score``, a number in [0, 1], or a bool."""


@dataclass(frozen=True, slots=True)
class Score:
    """A scorer's verdict on one case.

    Attributes:
        value: In [0, 1]; ``None`` when the scorer did not apply (a skip).
        reason: Why, in a few words (shown in reports).
    """

    value: float | None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class ScoreContext:
    """What a scorer sees of one case's run.

    Attributes:
        case: The case (``case.input``, ``case.expected``, ``case.metadata``).
        output: What the target gave: an agent's structured ``output`` or its text, a
            workflow's result, a function's return value.
        text: The output as text (an agent's final text; ``str(output)`` otherwise).
        duration: Seconds the target took.
        usage: Tokens spent (agents and workflows that called a model), else ``None``.
        cost: US dollars spent, when the usage carries a cost, else ``None``.
        tool_calls: The tool calls an agent made.
        run_id: The case's own stored run (an agent's or a workflow's), if any.
    """

    case: Case[Any, Any]
    output: Any
    text: str
    duration: float = 0.0
    usage: Usage | None = None
    cost: float | None = None
    tool_calls: tuple[ToolCallRecord, ...] = field(default_factory=tuple)
    run_id: str | None = None

    @property
    def input(self) -> Any:
        """The case's input."""
        return self.case.input

    @property
    def expected(self) -> Any:
        """The case's expected answer (``None`` when it has none)."""
        return self.case.expected


class Scorer(ABC):
    """Grades one case's output. Subclass it and implement ``score``.

    Args:
        name: The score's name in reports (default: the class's name).
    """

    def __init__(self, *, name: str | None = None) -> None:
        self.name: str = name or type(self).__name__

    @abstractmethod
    async def score(self, ctx: ScoreContext) -> ScoreValue:
        """The score of ``ctx.output`` for ``ctx.case``."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


ScorerFunction: TypeAlias = Callable[[Any, Any], "Awaitable[ScoreValue] | ScoreValue"]
"""A ``@scorer`` function: ``fn(case, output)``, sync or async."""


class _FunctionScorer(Scorer):
    def __init__(self, fn: ScorerFunction, *, name: str | None) -> None:
        super().__init__(name=name or getattr(fn, "__name__", None) or "scorer")
        self.fn = fn

    async def score(self, ctx: ScoreContext) -> ScoreValue:
        value = self.fn(ctx.case, ctx.output)
        if inspect.isawaitable(value):
            value = await value
        return value


@overload
def scorer(fn: ScorerFunction, /) -> Scorer: ...


@overload
def scorer(*, name: str | None = None) -> Callable[[ScorerFunction], Scorer]: ...


def scorer(fn: ScorerFunction | None = None, /, *,
           name: str | None = None) -> Scorer | Callable[[ScorerFunction], Scorer]:
    """Make a scorer of a function of the case and the output (sync or async), which
    returns a bool, a number in [0, 1] or a ``Score``::

        @scorer
        def short(case: Case, output: str) -> bool:
            return len(output) < 200

    Args:
        fn: The function (``@scorer`` without parentheses).
        name: The score's name (default: the function's name).
    """
    if fn is not None:
        return _FunctionScorer(fn, name=name)

    def wrap(f: ScorerFunction) -> Scorer:
        return _FunctionScorer(f, name=name)

    return wrap


def to_score(value: object, *, scorer_name: str) -> Score:
    """``value`` as a ``Score``: bools become 1/0, numbers must be in [0, 1].

    Raises:
        TypeError: Not a ``Score``, a number or a bool.
        ValueError: A number outside [0, 1].
    """
    if isinstance(value, Score):
        if value.value is None:
            return value
        return Score(_in_range(value.value, scorer_name), value.reason)
    if isinstance(value, bool):
        return Score(1.0 if value else 0.0)
    if isinstance(value, int | float):
        return Score(_in_range(value, scorer_name))
    raise TypeError(f"scorer {scorer_name!r} returned {value!r}; return a bool, a number "
                    "in [0, 1] or a Score")


def _in_range(value: float, scorer_name: str) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if not isinstance(value, int | float) or math.isnan(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"scorer {scorer_name!r} returned {value!r}, not a number in [0, 1]")
    return float(value)


async def run_scorer(one: Scorer, ctx: ScoreContext) -> tuple[Score | None, str | None]:
    """Run one scorer: its ``Score``, or ``None`` and the error it raised (one line)."""
    try:
        return to_score(await one.score(ctx), scorer_name=one.name), None
    except Exception as exc:
        message = " ".join(str(exc).split()) or "(no message)"
        return None, f"{type(exc).__name__}: {message}"
