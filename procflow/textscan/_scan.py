"""The public entry of the text engine: ``Scanner(rules).scan(text)``.

A ``Scanner`` is a table of named ``Rule``s read over one or more views of a text
(``Reading``); ``scan`` gives every match as a ``Match`` whose ``start``/``end`` are
offsets into the text passed in, whatever view the rule matched. The anchor passes
and the RE2 prefilter behind it live in ``_anchors`` (``PatternTable``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, NamedTuple, TypeVar, final

from procflow.textscan._anchors import PatternTable
from procflow.textscan._prefilter import DEFAULT_ENGINE, Engine, Prefilter, check_engine
from procflow.textscan._views import View, normalise, views_for_matching

__all__ = ["Match", "Reading", "Rule", "ScanResult", "Scanner"]

DataT = TypeVar("DataT")

Reading = Literal["text", "normalised", "folded", "deobfuscated"]
"""Which views of a text a ``Scanner`` reads:

- ``"text"``: the text as given.
- ``"normalised"``: the PII guard's view (``normalise``): NFKC, zero-width and bidi
  controls dropped, Unicode digits and spaces as ASCII, case kept.
- ``"folded"``: the moderation guard's views: Unicode folded, confusables mapped,
  lower case, then (each only when it differs) spaced letters joined, typos fixed and
  two leetspeak readings.
- ``"deobfuscated"``: the injection guard's views: ``"folded"``'s, then the squashed,
  ROT13 and reversed readings.
"""


@final
@dataclass(frozen=True, slots=True)
class Rule(Generic[DataT]):
    """A named pattern and what its owner wants back with each of its matches.

    Attributes:
        name: Names the rule in matches and in errors.
        pattern: A ``re`` pattern (a string is compiled with no flags).
        data: Anything the owner weighs a match by (a weight, a category, a
            replacement); handed back on each ``Match``.
    """

    name: str
    pattern: str | re.Pattern[str]
    data: DataT | None = None


class Match(NamedTuple, Generic[DataT]):
    """One match of a rule (a named tuple: a scan makes one per match, and a tuple is
    made several times faster than a frozen dataclass).

    Attributes:
        rule: The rule that matched.
        start: Where the match starts in the original text.
        end: Where it ends in the original text (exclusive).
        view: The name of the view it matched in (``"text"``, ``"normalised"``,
            ``"base"``, ``"joined"``, ``"leet"``, ``"rot13"``...).
        match: The ``re.Match`` in the view's own coordinates (``match.string`` is
            the view's text): for groups, and for looking around the match as the
            rule saw it.
        rule_index: The rule's position in the scanner's ``rules``.
    """

    rule: Rule[DataT]
    start: int
    end: int
    view: str
    match: re.Match[str]
    rule_index: int

    @property
    def text(self) -> str:
        """The matched characters as the rule read them (in the view)."""
        return self.match.group()


@final
@dataclass(frozen=True, slots=True)
class ScanResult(Generic[DataT]):
    """What ``Scanner.scan`` found.

    Attributes:
        matches: The matches, view by view; within a view, rule by rule (in the
            table's order), then by position: per rule and view, what
            ``pattern.finditer`` gives (non-overlapping, non-empty).
        complete: ``False`` when ``stop_at`` ended the scan early; ``matches`` then
            ends with the match that stopped it.
    """

    matches: tuple[Match[DataT], ...]
    complete: bool

    def __iter__(self) -> Iterator[Match[DataT]]:
        return iter(self.matches)

    def __len__(self) -> int:
        return len(self.matches)


_NOTHING: ScanResult[Any] = ScanResult((), complete=True)


def _compile(rule: Rule[DataT]) -> re.Pattern[str]:
    if isinstance(rule.pattern, re.Pattern):
        return rule.pattern
    try:
        return re.compile(rule.pattern)
    except re.error as exc:
        raise ValueError(f"rule {rule.name!r}: its pattern {rule.pattern!r} does not compile "
                         f"({exc}); fix the pattern or escape it with re.escape") from exc


def _as_rules(rules: Iterable[Rule[DataT]] | Mapping[str, str | re.Pattern[str]]
              ) -> tuple[Rule[DataT], ...]:
    if isinstance(rules, Mapping):
        return tuple(Rule(name, pattern) for name, pattern in rules.items())
    return tuple(rules)


def _views(text: str, reading: Reading, engine: Engine) -> Iterator[View]:
    match reading:
        case "text":
            yield View("text", text, range(len(text)), range(1, len(text) + 1))
        case "normalised":
            yield normalise(text)
        case "folded":
            yield from views_for_matching(text, deep=False, engine=engine)
        case "deobfuscated":
            yield from views_for_matching(text, deep=True, engine=engine)


@final
class Scanner(Generic[DataT]):
    """A table of rules, read over a text in one anchored pass per view.

    Every pattern's parse tree is read once, at construction, for the literal
    strings its matches can start with; a scan then finds, per view, where any rule
    can start and tries only those rules there. On engine ``"re2"`` an RE2
    prefilter first tells which rules can match the view at all. Both engines give
    the same matches: what ``finditer`` of each pattern gives.

    Args:
        rules: The ``Rule``s, or a mapping of names to patterns.
        engine: ``"re2"`` (RE2 sets first; needs ``google-re2``) or ``"re"``
            (``re`` alone). Defaults to ``"re2"`` when ``google-re2`` imports.
        reading: Which views of a text to read (see ``Reading``).

    Raises:
        ValueError: A rule's pattern does not compile (the message names the
            rule), two rules share a name, there are no rules, or ``engine`` is
            not one of the two (or is ``"re2"`` without ``google-re2``).

    Examples:
        >>> scanner = Scanner([Rule("ignore", r"ignore (?:all )?previous")],
        ...                   reading="folded")
        >>> [(m.rule.name, m.start, m.end) for m in scanner.scan("ＩＧＮＯＲＥ previous")]
        [('ignore', 0, 15)]
    """

    __slots__ = ("_table", "engine", "reading", "rules")

    def __init__(self, rules: Iterable[Rule[DataT]] | Mapping[str, str | re.Pattern[str]], *,
                 engine: Engine | None = None, reading: Reading = "text") -> None:
        self.rules = _as_rules(rules)
        if not self.rules:
            raise ValueError("Scanner: no rules; pass at least one Rule(name, pattern)")
        names = [rule.name for rule in self.rules]
        if len(set(names)) != len(names):
            twice = sorted({name for name in names if names.count(name) > 1})
            raise ValueError(f"Scanner: rule names must be unique; given twice: {twice}")
        if reading not in ("text", "normalised", "folded", "deobfuscated"):
            raise ValueError(f"Scanner: reading must be 'text', 'normalised', 'folded' or "
                             f"'deobfuscated', got {reading!r}")
        self.engine: Engine = check_engine(DEFAULT_ENGINE if engine is None else engine,
                                           "Scanner")
        self.reading: Reading = reading
        # a table of one RE2 set's size or less reads every text with that set: a copy
        # of it for short texts would build its own lazily made DFA states
        whole_max = 0 if len(self.rules) <= Prefilter.GROUP else Prefilter.SHORT
        self._table = PatternTable([_compile(rule) for rule in self.rules],
                                   whole_max=whole_max)

    def __repr__(self) -> str:
        return (f"Scanner({len(self.rules)} rules, engine={self.engine!r}, "
                f"reading={self.reading!r})")

    def scan(self, text: str, *,
             stop_at: Callable[[Match[DataT]], bool] | None = None) -> ScanResult[DataT]:
        """Every match of every rule in ``text``'s views, spans into ``text``.

        Args:
            text: The text to read.
            stop_at: Shown each match as it is found (once each); when it returns
                ``True`` the scan ends there, with ``complete=False``. Matches are
                shown in the order they are found: on engine ``"re2"`` a view with
                many candidate rules is read for all of them at once, in the text's
                order, so the match that settles a verdict can end the scan before
                the others are looked for; otherwise (and always on engine
                ``"re"``) a view's matches are shown once its table has been read,
                and stopping saves the views after it.

        Returns:
            The matches and whether the scan read everything.
        """
        if stop_at is None and self.reading == "text":
            # the common case, without a view: a scan of a text with no match costs
            # about what the table's own pass does
            found = self._table.matches(text, engine=self.engine)
            if not found:
                return _NOTHING
            rules = self.rules
            return ScanResult(tuple([Match(rules[i], m.start(), m.end(), "text", m, i)
                                     for i, m in found]), True)
        matches: list[Match[DataT]] = []
        for view in _views(text, self.reading, self.engine):
            if stop_at is None:
                found = self._table.matches(view.text, engine=self.engine)
                if found:
                    matches += self._matches(view, found)
            elif not self._scan_view(view, stop_at, matches):
                return ScanResult(tuple(matches), complete=False)
        return ScanResult(tuple(matches), complete=True)

    def _matches(self, view: View, found: Iterable[tuple[int, re.Match[str]]]
                 ) -> Iterator[Match[DataT]]:
        rules, name = self.rules, view.name
        if view.keeps_indices:
            return (Match(rules[i], m.start(), m.end(), name, m, i) for i, m in found)
        return (Match(rules[i], *view.span(m.start(), m.end()), name, m, i) for i, m in found)

    def _scan_view(self, view: View, stop_at: Callable[[Match[DataT]], bool],
                   matches: list[Match[DataT]]) -> bool:
        """Adds ``view``'s matches to ``matches``; ``False`` when ``stop_at`` stopped
        the scan."""
        found: list[tuple[int, re.Match[str]]] = []
        shown: set[tuple[int, int, int]] = set()  # the matches ``probe`` showed
        stopper: list[Match[DataT]] = []

        def probe(index: int, m: re.Match[str]) -> bool:
            shown.add((index, m.start(), m.end()))
            match, = self._matches(view, ((index, m),))
            if stop_at(match):
                stopper.append(match)
                return True
            return False

        seen = 0
        steps = self._table.matches_steps(view.text, found, on_match=probe,
                                          engine=self.engine)
        for _ in _chain(steps):
            for (index, m), match in zip(found[seen:], self._matches(view, found[seen:]),
                                         strict=True):
                seen += 1
                matches.append(match)
                if (index, m.start(), m.end()) not in shown and stop_at(match):
                    return False
            if stopper:
                if not any(match.match is stopper[0].match for match in matches[-seen:]):
                    matches.append(stopper[0])
                return False
        return True


def _chain(steps: Iterator[None]) -> Iterator[None]:
    """The steps, then one more: the matches added after the last step are read too."""
    yield from steps
    yield None
