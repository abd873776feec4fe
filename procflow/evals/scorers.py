"""Built-in scorers that need no model: comparisons, patterns, types, tool calls, limits."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, final

from pydantic import TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

from procflow.evals.scoring import Score, ScoreContext, Scorer

__all__ = ["Contains", "ExactMatch", "IsInstance", "MatchesSchema", "MaxCost", "MaxLatency",
           "Regex", "ToolArgs", "ToolCalled"]


class _Unset:
    def __repr__(self) -> str:
        return "the case's expected answer"


_EXPECTED: Final = _Unset()


def _wanted(value: object, ctx: ScoreContext) -> tuple[bool, Any]:
    """The value to compare with: the scorer's own, else the case's expected answer."""
    if value is not _EXPECTED:
        return True, value
    return ctx.expected is not None, ctx.expected


_NO_EXPECTED = Score(None, "the case has no expected answer")


@final
class ExactMatch(Scorer):
    """1 when the output equals the expected answer (or ``value``), else 0. Pydantic
    models compare by their fields, so a model output matches a dict expected.

    Args:
        value: What the output must equal (default: each case's ``expected``).
        name: The score's name (default ``"ExactMatch"``).
    """

    def __init__(self, value: object = _EXPECTED, *, name: str | None = None) -> None:
        super().__init__(name=name)
        self.value = value

    async def score(self, ctx: ScoreContext) -> Score:
        known, wanted = _wanted(self.value, ctx)
        if not known:
            return _NO_EXPECTED
        if ctx.output == wanted or _plain(ctx.output) == _plain(wanted):
            return Score(1.0)
        return Score(0.0, f"expected {_short(wanted)}, got {_short(ctx.output)}")


@final
class Contains(Scorer):
    """1 when the output contains the expected answer (or ``value``), else 0: a
    substring of text output, an item of a list, a key of a dict.

    Args:
        value: What the output must contain (default: each case's ``expected``).
        case_sensitive: Whether text must match in case (default ``True``).
        name: The score's name (default ``"Contains"``).
    """

    def __init__(self, value: object = _EXPECTED, *, case_sensitive: bool = True,
                 name: str | None = None) -> None:
        super().__init__(name=name)
        self.value = value
        self.case_sensitive = case_sensitive

    async def score(self, ctx: ScoreContext) -> Score:
        known, wanted = _wanted(self.value, ctx)
        if not known:
            return _NO_EXPECTED
        output = ctx.output
        if isinstance(output, list | tuple | set | frozenset | dict):
            found = wanted in output
        else:
            text, part = ctx.text, str(wanted)
            if not self.case_sensitive:
                text, part = text.casefold(), part.casefold()
            found = part in text
        return Score(1.0) if found else Score(0.0, f"{_short(wanted)} not in the output")


@final
class Regex(Scorer):
    """1 when the pattern matches the output's text (anywhere; ``full=True``: all of it).

    Args:
        pattern: A regular expression (a ``str`` or a compiled pattern).
        full: Whether the whole text must match.
        name: The score's name (default ``"Regex"``).
    """

    def __init__(self, pattern: str | re.Pattern[str], *, full: bool = False,
                 name: str | None = None) -> None:
        super().__init__(name=name)
        self.pattern = re.compile(pattern)
        self.full = full

    async def score(self, ctx: ScoreContext) -> Score:
        match = (self.pattern.fullmatch if self.full else self.pattern.search)(ctx.text)
        if match is not None:
            return Score(1.0)
        return Score(0.0, f"/{self.pattern.pattern}/ does not match")


@final
class IsInstance(Scorer):
    """1 when the output is an instance of ``type_`` (a class or a tuple of them).

    Args:
        type_: The class(es).
        name: The score's name (default ``"IsInstance"``).
    """

    def __init__(self, type_: type | tuple[type, ...], *, name: str | None = None) -> None:
        super().__init__(name=name)
        self.type_ = type_

    async def score(self, ctx: ScoreContext) -> Score:
        if isinstance(ctx.output, self.type_):
            return Score(1.0)
        return Score(0.0, f"the output is a {type(ctx.output).__name__}")


@final
class MatchesSchema(Scorer):
    """1 when the output validates as ``schema`` (a pydantic model or any type pydantic
    validates; JSON text is parsed first), else 0 with the first error.

    Args:
        schema: The type.
        name: The score's name (default ``"MatchesSchema"``).
    """

    def __init__(self, schema: Any, *, name: str | None = None) -> None:
        super().__init__(name=name)
        self.adapter: TypeAdapter[Any] = TypeAdapter(schema)

    async def score(self, ctx: ScoreContext) -> Score:
        try:
            if isinstance(ctx.output, str):
                self.adapter.validate_json(ctx.output)
            else:
                self.adapter.validate_python(_plain(ctx.output))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "the output"
            return Score(0.0, f"{where}: {first['msg']}")
        return Score(1.0)


@final
class ToolCalled(Scorer):
    """1 when the agent called the tool ``tool`` (``times``: exactly so many times).

    Args:
        tool: The tool's name.
        times: How many calls are wanted (default: at least one).
        name: The score's name (default ``"ToolCalled"``).
    """

    def __init__(self, tool: str, *, times: int | None = None,
                 name: str | None = None) -> None:
        super().__init__(name=name)
        self.tool = tool
        self.times = times

    async def score(self, ctx: ScoreContext) -> Score:
        calls = sum(1 for c in ctx.tool_calls if c.tool_name == self.tool)
        ok = calls > 0 if self.times is None else calls == self.times
        if ok:
            return Score(1.0)
        made = sorted({c.tool_name for c in ctx.tool_calls})
        return Score(0.0, f"{self.tool} called {calls} time(s); tools called: "
                          f"{', '.join(made) or 'none'}")


@final
class ToolArgs(Scorer):
    """1 when some call of the tool ``tool`` had at least the arguments ``args``.

    Args:
        tool: The tool's name.
        args: Argument name -> the value it must have (other arguments may be present).
        name: The score's name (default ``"ToolArgs"``).
    """

    def __init__(self, tool: str, args: Mapping[str, Any], *, name: str | None = None) -> None:
        super().__init__(name=name)
        self.tool = tool
        self.args = dict(args)

    async def score(self, ctx: ScoreContext) -> Score:
        calls = [c for c in ctx.tool_calls if c.tool_name == self.tool]
        for call in calls:
            if all(k in call.args and call.args[k] == v for k, v in self.args.items()):
                return Score(1.0)
        if not calls:
            return Score(0.0, f"{self.tool} was not called")
        return Score(0.0, f"{self.tool} was called with {_short(dict(calls[0].args))}")


@final
class MaxLatency(Scorer):
    """1 when the target took at most ``seconds``, else 0.

    Args:
        seconds: The limit.
        name: The score's name (default ``"MaxLatency"``).
    """

    def __init__(self, seconds: float, *, name: str | None = None) -> None:
        super().__init__(name=name)
        self.seconds = seconds

    async def score(self, ctx: ScoreContext) -> Score:
        if ctx.duration <= self.seconds:
            return Score(1.0)
        return Score(0.0, f"took {ctx.duration:.3g}s, over {self.seconds:g}s")


@final
class MaxCost(Scorer):
    """1 when the case cost at most ``usd`` US dollars, else 0; a skip when the usage
    carries no cost (offline models, providers without a price).

    Args:
        usd: The limit.
        name: The score's name (default ``"MaxCost"``).
    """

    def __init__(self, usd: float, *, name: str | None = None) -> None:
        super().__init__(name=name)
        self.usd = usd

    async def score(self, ctx: ScoreContext) -> Score:
        if ctx.cost is None:
            return Score(None, "no cost known for this case's usage")
        if ctx.cost <= self.usd:
            return Score(1.0)
        return Score(0.0, f"cost ${ctx.cost:.4g}, over ${self.usd:g}")


def _plain(value: object) -> Any:
    return to_jsonable_python(value, fallback=repr)


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"
