"""Required literals: strings one of which every match of a pattern contains.

"ignore (?:all )?previous instructions" cannot match a text holding none of "ignore",
"previous", "instructions": each is a *required* literal set of the pattern (here of
one string each). ``required`` reads a pattern's parse tree once and picks its most
selective such set (longest shortest string, then fewest strings). A text holding no
string of that set needs no further look for that pattern: one pass of all the
tables' literals (an RE2 set of plain strings, whose DFA stays small) rules out most
patterns of a table at once, and tells which views of a text are worth building (a
ROT13 view can only match where the text holds a ROT13'd literal).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from procflow.textscan._prefilter import _options, _set, load_re2, proxy
from procflow.textscan._syntax import (
    At,
    Atomic,
    Branch,
    Char,
    CharClass,
    Group,
    Look,
    Node,
    Range,
    Repeat,
    Seq,
    parse,
)

__all__ = ["LiteralGate", "literal_gate", "required"]

_MAX_STRINGS = 64  # an exact set larger than this is given up (the cross products grow)
_MAX_CLASS = 4  # a character class of more members is not spelled out

_Exact = frozenset[str] | None  # every string an item can match, when few and known


_Needs = tuple[frozenset[str], ...]  # every match holds a string of each set


class _Reader:
    """Walks a parse tree: for each item the set of strings it matches exactly (when
    small), and the sets of strings every match of it holds one of."""

    def __init__(self, flags: int) -> None:
        self.ignore_case = bool(flags & re.IGNORECASE)

    def sequence(self, items: Seq) -> tuple[_Exact, _Needs]:
        """``(exact, needs)`` of a sequence of items: a run of items with exact sets is
        one exact set (their product), required when it cannot be empty."""
        needs: list[frozenset[str]] = []
        run: _Exact = frozenset({""})
        whole: _Exact = frozenset({""})
        for node in items:
            exact, inner = self.item(node)
            if exact is not None and run is not None:
                run = _product(run, exact)
            else:
                if run is not None and _usable(run):
                    needs.append(run)
                run = exact
            needs.extend(inner)
            whole = _product(whole, exact) if whole is not None and exact is not None else None
        if run is not None and _usable(run):
            needs.append(run)
        return whole, tuple(needs)

    def item(self, node: Node) -> tuple[_Exact, _Needs]:
        """``(exact, needs)`` of one item (``exact`` holds "" when it may be empty)."""
        match node:
            case Char(code):
                return (None, ()) if self.ignore_case else (frozenset({chr(code)}), ())
            case CharClass():
                return self.members(node), ()
            case At() | Look():
                return frozenset({""}), ()  # zero width: a literal runs on across it
            case Branch(alternatives):
                return self.branch(alternatives)
            case Group(_, add_flags, del_flags, body):
                saved = self.ignore_case
                if add_flags & re.IGNORECASE or del_flags & re.IGNORECASE:
                    self.ignore_case = bool(add_flags & re.IGNORECASE)
                try:
                    return self.sequence(body)
                finally:
                    self.ignore_case = saved
            case Atomic(body):
                return self.sequence(body)
            case Repeat(lo, hi, _, body):
                exact, needs = self.sequence(body)
                if lo == 0:
                    return (exact | {""} if exact is not None and hi == 1 else None), ()
                if lo == hi == 1:
                    return exact, needs
                return None, (*needs, exact) if exact is not None and _usable(exact) else needs
        return None, ()  # any character, categories, back references...

    def branch(self, alternatives: tuple[Seq, ...]) -> tuple[_Exact, _Needs]:
        parts = [self.sequence(alternative) for alternative in alternatives]
        exact: _Exact = None
        if all(e is not None for e, _ in parts):
            exact = frozenset().union(*(e for e, _ in parts if e is not None))
            exact = exact if len(exact) <= _MAX_STRINGS else None
        # one string of one alternative's best set: their union is required
        bests = [_best((*needs, e) if e is not None else needs) for e, needs in parts]
        if all(b is not None for b in bests):
            return exact, (frozenset().union(*(b for b in bests if b is not None)),)
        return exact, ()

    def members(self, node: CharClass) -> _Exact:
        if self.ignore_case or node.negate:
            return None
        out: set[str] = set()
        for item in node.items:
            if isinstance(item, Char):
                out.add(chr(item.code))
            elif isinstance(item, Range) and item.hi - item.lo < _MAX_CLASS:
                out.update(chr(c) for c in range(item.lo, item.hi + 1))
            else:
                return None
        return frozenset(out) if len(out) <= _MAX_CLASS else None


def _product(left: frozenset[str], right: frozenset[str]) -> _Exact:
    if len(left) * len(right) > _MAX_STRINGS:
        return None
    return frozenset(a + b for a in left for b in right)


def _usable(strings: frozenset[str] | None) -> bool:
    return strings is not None and "" not in strings


def _selectivity(strings: frozenset[str]) -> tuple[int, int]:
    """How selective a required set is: longest shortest string, then fewest strings."""
    return min(map(len, strings)), -len(strings)


def _best(sets: Iterable[frozenset[str] | None]) -> frozenset[str] | None:
    """The most selective usable set."""
    return max((s for s in sets if s is not None and _usable(s)), key=_selectivity,
               default=None)


def required(pattern: re.Pattern[str]) -> _Needs:
    """Sets of strings (non-empty) such that every match of ``pattern`` holds one string
    of each, as far as the parse tree shows (``()``: it shows none)."""
    try:
        exact, needs = _Reader(pattern.flags).sequence(parse(pattern))
    except (RecursionError, ValueError):
        return ()
    if exact is not None and _usable(exact):
        needs = (*needs, exact)
    return tuple(dict.fromkeys(needs))


_GATE_MEM = 16 << 20
# a pattern's other sets holding a string shorter than this are not checked (the gate
# answers a superset): "e" or "he" is in nearly every text, and looking for them cost
# more than they ruled out
_CONJUNCTION_MIN = 3


class LiteralGate:
    """Which patterns of a table may match a text, told by their required literals in
    one pass of an RE2 set of plain strings (``google-re2``).

    Args:
        patterns: The table.
        re2: The ``re2`` module.
        transform: Applied to each literal first: the gate then answers for the text
            read that way (``codecs.encode(s, "rot13")``: which patterns may match the
            ROT13 reading of the text; ``s[::-1]``: its reversal), without making it.
        also: Further readings, each answered by ``possible_each`` from the same pass
            (one RE2 set holds the literals of every reading).

    Raises:
        ValueError: RE2 could not compile the set.
    """

    __slots__ = ("_match", "_match_others", "_readings", "_sentinel", "_sentinel_others",
                 "always")

    def __init__(self, patterns: Sequence[re.Pattern[str]], re2: Any, *,
                 transform: Callable[[str], str] = str,
                 also: Sequence[Callable[[str], str]] = ()) -> None:
        triggers: dict[bytes, int] = {}
        others: dict[bytes, int] = {}
        needed = [required(pattern) for pattern in patterns]
        self.always = tuple(index for index, needs in enumerate(needed) if not needs)
        # per reading: the patterns each trigger literal (a string of the most selective
        # set of a pattern) may start, and each pattern's other sets. The triggers and
        # the other sets' strings are two RE2 sets: the other sets hold short, common
        # strings ("e", "he") found in nearly every text, looked for only in a text
        # where a trigger started a pattern (most texts have none)
        readings: list[tuple[dict[int, set[int]], list[tuple[frozenset[int], ...]]]] = []
        for read in (transform, *also):
            by_literal: dict[int, set[int]] = {}
            conjunctions: list[tuple[frozenset[int], ...]] = []
            for index, needs in enumerate(needed):
                ordered = sorted(needs, key=_selectivity, reverse=True)
                for string in ordered[0] if ordered else ():
                    # the proxy of a literal: 0x80 stands for any non-ASCII character
                    key = triggers.setdefault(proxy(read(string)), len(triggers))
                    by_literal.setdefault(key, set()).add(index)
                conjunctions.append(tuple(
                    frozenset(others.setdefault(proxy(read(string)), len(others))
                              for string in need)
                    for need in ordered[1:] if min(map(len, need)) >= _CONJUNCTION_MIN))
            readings.append((by_literal, conjunctions))
        self._readings = [(tuple(tuple(sorted(by_literal.get(k, ())))
                                 for k in range(len(triggers))), conjunctions)
                          for by_literal, conjunctions in readings]
        try:
            self._match, _, self._sentinel = _literal_set(re2, triggers)
            self._match_others, _, self._sentinel_others = _literal_set(re2, others)
        except re2.error as exc:
            raise ValueError(f"RE2 could not compile the literal gate: {exc}") from exc

    def possible(self, data: bytes) -> list[int] | None:
        """The indexes (ascending) of the patterns that may match the text whose
        ``proxy`` is ``data`` (read through ``transform``); ``None`` when the set could
        not answer."""
        each = self.possible_each(data)
        return None if each is None else each[0]

    def possible_each(self, data: bytes) -> list[list[int]] | None:
        """``possible`` for each reading (``transform``, then those of ``also``), from
        one pass over ``data`` (two when a trigger started a pattern with other sets)."""
        found = self._match(data)
        if not found or self._sentinel not in found:
            return None
        if len(found) == 1:  # no trigger (most texts): only the patterns without any literal
            return [list(self.always) for _ in self._readings]
        present: set[int] | None = None  # the other sets' strings in the text
        out: list[list[int]] = []
        for by_literal, needs in self._readings:
            touched = set(self.always)
            for k in found:
                if k != self._sentinel:
                    touched.update(by_literal[k])
            kept: list[int] = []
            for i in sorted(touched):
                if needs[i]:  # each of its other sets needs a string in the text
                    if present is None:
                        others = self._match_others(data)
                        if not others or self._sentinel_others not in others:
                            return None
                        present = set(others)
                    if any(need.isdisjoint(present) for need in needs[i]):
                        continue
                kept.append(i)
            out.append(kept)
        return out


def _literal_set(re2: Any, literals: dict[bytes, int]) -> tuple[Any, tuple[int, ...], int]:
    """An RE2 set of plain strings (``_set``): which of them occur in a text."""
    members = [(k, b"".join(b"\\x%02x" % c for c in literal))
               for literal, k in literals.items()]
    return _set(re2, _options(re2, _GATE_MEM), members)


def literal_gate(patterns: Sequence[re.Pattern[str]], *,
                 transform: Callable[[str], str] = str,
                 also: Sequence[Callable[[str], str]] = ()) -> LiteralGate | None:
    """A ``LiteralGate`` of ``patterns``, or ``None`` without ``google-re2`` (or when
    RE2 cannot compile it)."""
    re2 = load_re2()
    if re2 is None:
        return None
    try:
        return LiteralGate(patterns, re2, transform=transform, also=also)
    except ValueError:
        return None
