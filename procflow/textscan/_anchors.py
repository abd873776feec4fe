"""One scan per text for a whole table of patterns: literal anchors, then matches.

Running 150 patterns over a text is 150 passes, and a pattern that starts with a
look-behind (every word-edged rule does) gives ``re`` no literal to skip ahead on, so
each pass steps through every position. ``PatternTable`` reads each pattern's parse
tree once and works out the literal strings a match can start with (its first up to
three characters: ``"ign"``, ``"dis"``, ``"you"``...). One compiled trie of those
anchors, tried only at word starts, finds every position where some pattern could
match; only the patterns whose anchor is there are then tried, at that position. The
result is exactly what ``pattern.finditer`` would give for each pattern (the same
matches, non-overlapping per pattern, in the same order); patterns with no usable
anchor are run in full.

With ``google-re2`` installed (a core dependency on CPython) a table first asks its
RE2 prefilter (``_prefilter.Prefilter``) which patterns can match the text at all, in
a few linear passes of RE2 sets, and tries only those, only where their RE2 form
matches; the matches are the same. Where a set leaves many candidates (attack prompts
back to back), the places where any of them starts are found in one pass for all of
them (``_prefilter.GroupStarts``) instead of a pass per candidate.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Generator, Iterator, Sequence
from itertools import pairwise
from typing import Final

from procflow.textscan._prefilter import (
    DEFAULT_ENGINE,
    Engine,
    Prefilter,
    load_re2,
    proxy,
)
from procflow.textscan._syntax import (
    At,
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

__all__ = ["JointScan", "PatternTable", "literal_prefixes"]

OnMatch = Callable[[int, re.Match[str]], bool]
"""Shown a match (its pattern's index in the table, the match) as it is found; ``True``
stops the search (see ``PatternTable.matches_steps``)."""

_K = 3
_MAX_STATES = 4_000
_MAX_CLASS = 12
_WORD_EDGE = "(?<![a-z0-9])"
# RE2 finds where a pattern may start next by reading on until its form can no longer
# match, and a loosened gap (any characters up to a sentence mark) reads to the end of a
# text that has none: from each match again, quadratic in a run of attack phrases. A
# pattern followed past ``_HOPS`` matches in one text goes on with ``re`` searching from
# each match to the next (linear)
_HOPS = 32
# a set of the prefilter with this many candidates for a text or more has their starts
# found together (``PatternTable._joint_steps``), with a step every ``_JOINT_STEP``
# starts. Attack prompts back to back make 10-22 candidates a set; ordinary text rarely
# more than a few, and for those the search per candidate costs less on text RE2 has
# not read before (its DFA of one form builds fewer states than the joint search's of
# forty: with 4 here, new text cost 9 % more instructions; with 8, 1 %)
_JOINT_MIN = 8
_JOINT_STEP = 32
# the steps of a set hand over to its candidates alone once they have read (by
# ``_joint_steps``'s count) this many times the text per candidate
_JOINT_BUDGET = 1
# ``matches_steps`` reads a text longer than this with a step per set of the prefilter
# (a set over a short text takes about a microsecond: no step of its own)
_SETS_IN_STEPS = 4_000


class _TooBroad(Exception):
    pass


_State = tuple[str, bool]  # (prefix so far, complete)


def _class_chars(node: CharClass) -> set[str]:
    if node.negate:
        raise _TooBroad
    out: set[str] = set()
    for item in node.items:
        if isinstance(item, Char):
            out.add(chr(item.code))
        elif isinstance(item, Range):
            if item.hi - item.lo > _MAX_CLASS:
                raise _TooBroad
            out.update(chr(c) for c in range(item.lo, item.hi + 1))
        else:
            raise _TooBroad
    if len(out) > _MAX_CLASS:
        raise _TooBroad
    return out


def _extend(states: set[_State], chars: set[str] | list[str], edged: bool) -> set[_State]:
    out: set[_State] = set()
    for prefix, done in states:
        if done:
            out.add((prefix, True))
            continue
        for ch in chars:
            longer = prefix + ch
            # an anchor stops after its first non-alphanumeric character: then no
            # word-edged match can start inside it (see PatternTable)
            out.add((longer, len(longer) >= _K or (edged and not ch.isalnum())))
    return out


def _close(states: set[_State]) -> set[_State]:
    return {(prefix, True) for prefix, _ in states}


def _sequence(items: Seq, states: set[_State], edged: bool) -> set[_State]:
    for node in items:
        if all(done for _, done in states):
            return states
        states = _item(node, states, edged)
        if len(states) > _MAX_STATES:
            raise _TooBroad
    return states


def _item(node: Node, states: set[_State], edged: bool) -> set[_State]:
    match node:
        case Char(code):
            return _extend(states, [chr(code)], edged)
        case CharClass():
            try:
                return _extend(states, _class_chars(node), edged)
            except _TooBroad:
                return _close(states)
        case Branch(alternatives):
            out: set[_State] = set()
            for alternative in alternatives:
                out |= _sequence(alternative, states, edged)
            return out
        case Group(add_flags=add_flags, body=body):
            return _close(states) if add_flags & re.IGNORECASE else _sequence(body, states, edged)
        case Repeat(lo, hi, _, body):
            out = set(states) if lo == 0 else set()
            current = states
            for n in range(1, (_K + 1 if hi is None else min(hi, _K + 1)) + 1):
                current = _sequence(body, current, edged)
                if n >= lo:
                    out |= current
                if all(done for _, done in current):
                    break
            return out if lo <= _K + 1 else _close(current)
        case At() | Look():
            return states  # zero width: skipping it only widens the anchor set
    return _close(states)


def literal_prefixes(pattern: re.Pattern[str], *, edged: bool = False
                     ) -> frozenset[str] | None:
    """The strings (up to three characters) every match of ``pattern`` starts with
    one of, or ``None`` when no such set is small and non-empty. Case-insensitive
    parts end an anchor; with ``edged``, so does a non-alphanumeric character."""
    if pattern.flags & re.IGNORECASE:
        return None
    try:
        states = _sequence(parse(pattern), {("", False)}, edged)
    except (_TooBroad, RecursionError, ValueError):
        return None
    prefixes = frozenset(prefix for prefix, _ in states)
    if not prefixes or "" in prefixes:
        return None
    return prefixes


def _trie(words: Sequence[str]) -> str:
    root: dict[str, dict] = {}  # type: ignore[type-arg]
    for word in words:
        node = root
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict) -> str:  # type: ignore[type-arg]
        branches = [re.escape(ch) + emit(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        # greedy: the longest anchor present wins; its own prefixes are looked up too
        return f"(?:{body})?" if "" in node else body

    return emit(root)


class PatternTable:
    """Every match of each pattern in a table, found with one anchor pass.

    Args:
        patterns: The table. A pattern compiled with a leading ``(?<![a-z0-9])``
            (a word-edged rule pattern) is tried only where one of its anchors starts
            a word, any other pattern where one of its anchors occurs; a pattern
            without a small anchor set is run in full.
        whole_max: Passed to the RE2 prefilter (``Prefilter``): up to how long a text
            one RE2 set of the whole table reads.
        group: Passed to the RE2 prefilter: how many patterns each of its other sets
            holds.
    """

    __slots__ = ("_edged", "_full", "_loose", "_prefilter", "patterns")

    def __init__(self, patterns: Sequence[re.Pattern[str]], *,
                 whole_max: int = Prefilter.SHORT, group: int = Prefilter.GROUP) -> None:
        self.patterns = tuple(patterns)
        edged: dict[str, list[int]] = {}
        loose: dict[str, list[int]] = {}
        full: list[int] = []
        for index, pattern in enumerate(self.patterns):
            is_edged = pattern.pattern.startswith(_WORD_EDGE)
            prefixes = literal_prefixes(pattern, edged=is_edged)
            if prefixes is None:
                full.append(index)
                continue
            for prefix in prefixes:
                (edged if is_edged else loose).setdefault(prefix, []).append(index)
        self._full = tuple(full)
        # word-edged patterns: anchors tried at word starts only, consuming (an anchor
        # ends at its first non-alphanumeric, so no word start hides inside one);
        # the others: a zero-width look-ahead at every position
        self._edged = _Finder(edged, _WORD_EDGE + "(?:{})", self.patterns)
        self._loose = _Finder(loose, "(?=({}))", self.patterns)
        self._prefilter = _make_prefilter(self.patterns, whole_max, group)

    @property
    def prefiltered(self) -> bool:
        """Whether the table has an RE2 prefilter (``google-re2`` is installed and RE2
        took its patterns): ``matches`` on engine ``"re2"`` reads texts with it;
        ``verify`` needs it."""
        return self._prefilter is not None

    def matches(self, text: str, data: bytes | None = None, *,
                engine: Engine = DEFAULT_ENGINE) -> list[tuple[int, re.Match[str]]]:
        """``(pattern index, match)`` for every non-empty match, ordered by pattern
        index, then position: what ``finditer`` of each pattern in turn would give.
        ``data``: ``proxy(text)``, when the caller has it; ``engine``: ``"re"`` leaves
        the prefilter aside."""
        if self._prefilter is not None and engine == "re2":
            if data is None:
                data = proxy(text)
            candidates = self._prefilter.candidates(data)
            if candidates is not None:
                return self.verify(text, data, candidates)
        return self._plain_matches(text)

    def matches_steps(self, text: str, found: list[tuple[int, re.Match[str]]],
                      data: bytes | None = None, *, on_match: OnMatch | None = None,
                      engine: Engine = DEFAULT_ENGINE) -> Iterator[None]:
        """``matches``, a step at a time: adds them to ``found`` and, with the RE2
        prefilter, yields after each of its sets read a text longer than
        ``_SETS_IN_STEPS`` and after each pattern it tried (one pass of its searcher
        over the text): a caller that runs other work between steps holds it up for
        one set's or one pattern's time, not the table's.

        ``on_match(index, match)`` is shown the matches that candidates stepped through
        together find (``_joint_steps``), as they are found, in the text's order rather
        than the table's, before they reach ``found``; when it returns ``True`` the
        steps end there, with ``found`` incomplete (a caller that has what it needs)."""
        prefilter = self._prefilter
        if prefilter is not None and engine == "re2":
            if data is None:
                data = proxy(text)
            if len(data) > _SETS_IN_STEPS:
                candidates = yield from prefilter.candidates_steps(data)
            else:
                candidates = prefilter.candidates(data)
            if candidates is not None:
                yield from self._verify_steps(text, data, candidates, prefilter, found,
                                              on_match)
                return
        found.extend(self._plain_matches(text))

    def _plain_matches(self, text: str) -> list[tuple[int, re.Match[str]]]:
        """``matches`` without the prefilter: the anchor passes."""
        found: list[tuple[int, re.Match[str]]] = []
        for index in self._full:
            found.extend((index, m) for m in self.patterns[index].finditer(text)
                         if m.end() > m.start())
        for finder in (self._edged, self._loose):
            if finder.pattern is None:
                continue
            resume: dict[int, int] = {}
            patterns = self.patterns
            by_anchor = finder.by_anchor
            quick = finder.quick
            for anchor in finder.pattern.finditer(text):
                pos = anchor.start()
                key = anchor.group(anchor.lastindex or 0)
                either = quick.get(key, _UNBUILT)
                if either is _UNBUILT:
                    either = finder.either(key)
                if either is not None and either.match(text, pos) is None:
                    continue  # none of the anchor's patterns matches here
                for index in by_anchor[key]:
                    if pos < resume.get(index, 0):
                        continue
                    m = patterns[index].match(text, pos)
                    if m is not None and m.end() > pos:
                        resume[index] = m.end()
                        found.append((index, m))
        found.sort(key=lambda pair: (pair[0], pair[1].start()))
        return found

    def verify(self, text: str, data: bytes, candidates: list[int],
               ) -> list[tuple[int, re.Match[str]]]:
        """``matches(text)``, given ``data`` (``proxy(text)``) and ``candidates``: the
        table indexes (ascending) of at least every pattern that can match ``text``, as
        a ``JointScan`` finds them. Only for a table with a prefilter."""
        assert self._prefilter is not None
        found: list[tuple[int, re.Match[str]]] = []
        deque(self._verify_steps(text, data, candidates, self._prefilter, found), maxlen=0)
        return found

    def verify_steps(self, text: str, data: bytes, candidates: list[int],
                     found: list[tuple[int, re.Match[str]]]) -> Iterator[None]:
        """``verify``, a step at a time (as ``matches_steps``): adds the matches to
        ``found``, yields after each candidate tried."""
        assert self._prefilter is not None
        return self._verify_steps(text, data, candidates, self._prefilter, found)

    def _verify_steps(self, text: str, data: bytes, candidates: list[int],
                      prefilter: Prefilter, found: list[tuple[int, re.Match[str]]],
                      on_match: OnMatch | None = None) -> Iterator[None]:
        """``matches`` for the patterns the prefilter left, each tried only where its
        RE2 form finds a match (in the order ``matches`` gives), added to ``found``;
        yields after each pattern, and in ``_joint_steps``."""
        patterns = self.patterns
        whole = self._full
        end = len(text)
        # the candidates of a set holding several of them: stepped through together,
        # up to where each goes on alone (-1: done)
        ahead: dict[int, tuple[list[re.Match[str]], int]] = {}
        if prefilter.groups and len(candidates) >= _JOINT_MIN:
            by_set: dict[int, list[int]] = {}
            group_of = prefilter.group_of
            for index in candidates:
                number = group_of.get(index)
                if number is not None and index not in whole:  # those run in full
                    by_set.setdefault(number, []).append(index)
            wanted = {number: members for number, members in by_set.items()
                      if len(members) >= _JOINT_MIN}
            if wanted:
                stopped = yield from self._joint_steps(text, data, prefilter, wanted, ahead,
                                                       on_match)
                if stopped:
                    return
        for index in candidates:
            pattern = patterns[index]
            known = ahead.get(index)
            if known is None:
                pos = prefilter.starts(index, data, 0)
            else:
                earlier, pos = known
                found.extend((index, m) for m in earlier)
                if pos < 0:
                    continue
                pos = prefilter.starts(index, data, pos)
            if pos < 0:
                yield
                continue
            if index in whole or index in prefilter.always:
                found.extend((index, m) for m in pattern.finditer(text, pos)
                             if m.end() > m.start())
                yield
                continue
            hops = _HOPS
            while pos >= 0:
                m = pattern.match(text, pos)
                if m is not None and m.end() > pos:
                    found.append((index, m))
                    pos = m.end()
                else:
                    pos += 1
                if pos > end:
                    break
                hops -= 1
                if not hops:
                    _search_on(index, pattern, text, pos, found)
                    break
                pos = prefilter.starts(index, data, pos)
            yield

    def _joint_steps(self, text: str, data: bytes, prefilter: Prefilter,
                     wanted: dict[int, list[int]],
                     ahead: dict[int, tuple[list[re.Match[str]], int]],
                     on_match: OnMatch | None = None) -> Generator[None, None, bool]:
        """For each set of the prefilter (by number) and its candidates in ``wanted``:
        step through the places where one of its patterns' forms starts
        (``GroupStarts``), trying there the candidates whose form starts there, as
        ``_verify_steps`` tries each alone (the same places, the same matches). Sets
        ``ahead[index]`` to each one's matches and where it goes on alone (-1:
        nowhere, done).

        The forms read past their starts (a loosened gap reads to the next sentence
        mark), so a text that makes the steps read more than a search per candidate
        would, or take more than ``_HOPS`` steps per candidate, leaves the rest of it
        to each (``_verify_steps``, linear). Yields after each set and every
        ``_JOINT_STEP`` starts. Returns ``True`` when ``on_match`` ended the steps."""
        patterns = self.patterns
        view = memoryview(data)
        size = len(data)
        for number, members in wanted.items():
            group = prefilter.groups[number]
            if not group.ready():
                continue
            resume = dict.fromkeys(members, 0)
            matches: dict[int, list[re.Match[str]]] = {index: [] for index in members}
            steps = _HOPS * len(members)
            budget = _JOINT_BUDGET * size * len(members)
            pos = 0
            while True:
                start, stop = group.next_start(data, pos)
                if start < 0:
                    pos = -1
                    break
                which = group.at(view, start)
                if which is None:
                    pos = start
                    break
                for index in which:
                    after = resume.get(index)
                    if after is not None and start >= after:
                        m = patterns[index].match(text, start)
                        if m is not None and m.end() > start:
                            matches[index].append(m)
                            resume[index] = m.end()
                            if on_match is not None and on_match(index, m):
                                return True
                # what the search read, and a guess at what the reverse search and
                # the set at the start read
                budget -= start - pos + 3 * (stop - start)
                pos = start + 1
                steps -= 1
                if pos > size:
                    pos = -1
                    break
                if budget < 0 or not steps:
                    break
                if not steps % _JOINT_STEP:
                    yield
            for index in members:
                ahead[index] = (matches[index], -1 if pos < 0 else max(pos, resume[index]))
            yield
        return False


def _search_on(index: int, pattern: re.Pattern[str], text: str, pos: int,
               found: list[tuple[int, re.Match[str]]]) -> None:
    """Add the matches of ``pattern`` (table index ``index``) from ``pos`` on, as
    ``PatternTable._verify_steps`` finds them: ``search`` tries the places it tries (the first
    where ``match`` succeeds), but reads on from a match only to the next one."""
    end = len(text)
    while pos <= end:
        m = pattern.search(text, pos)
        if m is None:
            return
        if m.end() > m.start():
            found.append((index, m))
            pos = m.end()
        else:
            pos = m.start() + 1


def _make_prefilter(patterns: Sequence[re.Pattern[str]], whole_max: int = Prefilter.SHORT,
                    group: int = Prefilter.GROUP) -> Prefilter | None:
    re2 = load_re2()
    if re2 is None:
        return None
    try:
        return Prefilter(patterns, re2, whole_max=whole_max, group=group)
    except ValueError:
        return None


class JointScan:
    """Several tables read over the same text: one RE2 prefilter of all their patterns
    answers, in one pass over the text, which patterns of each table can match it
    (each table then ``verify``-es its own). Without ``google-re2``, when a table has
    no prefilter of its own or on engine ``"re"``, ``candidates`` answers
    ``None`` and the caller uses ``PatternTable.matches``.

    Args:
        tables: The tables.
        whole_max: Up to how long a text the set of all their patterns reads (longer
            texts, and a set that gives up, go to the sets of ``group`` patterns).
        group: How many patterns each of those sets holds.
    """

    __slots__ = ("_bounds", "_prefilter")

    def __init__(self, tables: Sequence[PatternTable], *,
                 whole_max: int = Prefilter.SHORT, group: int = Prefilter.GROUP) -> None:
        re2 = load_re2()
        self._prefilter: Prefilter | None = None
        bounds = [0]
        for table in tables:
            bounds.append(bounds[-1] + len(table.patterns))
        self._bounds = tuple(bounds)
        if re2 is None or any(table._prefilter is None for table in tables):
            return
        try:
            self._prefilter = Prefilter([p for table in tables for p in table.patterns], re2,
                                        whole_max=whole_max, group=group,
                                        searchers=False)
        except ValueError:
            return

    def candidates(self, text: str, *, engine: Engine = DEFAULT_ENGINE,
                   ) -> tuple[bytes, list[list[int]]] | None:
        """``(proxy(text), candidates of each table)``: the indexes in each table
        (ascending) of at least every pattern that can match ``text``; ``None`` when
        the prefilter is not there, is left aside (``engine="re"``) or could not
        answer."""
        prefilter = self._prefilter
        if prefilter is None or engine != "re2":
            return None
        data = proxy(text)
        found = prefilter.candidates(data)
        if found is None:
            return None
        bounds = self._bounds
        if not found:
            return data, [[] for _ in bounds[1:]]
        return data, [[i - lo for i in found if lo <= i < hi]
                      for lo, hi in pairwise(bounds)]


_UNBUILT: Final = re.compile("")
"""Stands for an alternation not compiled yet (``_Finder.quick``)."""


class _Finder:
    __slots__ = ("_patterns", "by_anchor", "pattern", "quick")

    def __init__(self, by_prefix: dict[str, list[int]], template: str,
                 patterns: Sequence[re.Pattern[str]]) -> None:
        # an anchor found stands for itself and each of its prefixes in the table
        self.by_anchor: dict[str, tuple[int, ...]] = {
            anchor: tuple(sorted({i for n in range(1, len(anchor) + 1)
                                  for i in by_prefix.get(anchor[:n], ())}))
            for anchor in by_prefix}
        self.pattern = (re.compile(template.format(_trie(sorted(by_prefix))))
                        if by_prefix else None)
        self._patterns = patterns
        # where an anchor starts several patterns, one alternation of them all first
        # rules out (in one call) the common case that none matches there; compiled
        # the first time its anchor is met (all of them up front took ~3 s at import)
        self.quick: dict[str, re.Pattern[str] | None] = {}

    def either(self, anchor: str) -> re.Pattern[str] | None:
        """The alternation of ``anchor``'s patterns (compiled on first use, then kept)."""
        either = self.quick[anchor] = _either(
            [self._patterns[i] for i in self.by_anchor[anchor]])
        return either


def _either(patterns: list[re.Pattern[str]]) -> re.Pattern[str] | None:
    if len(patterns) < 2 or any(p.groups for p in patterns):
        return None  # a single pattern, or numbered groups an alternation would renumber
    flags = {p.flags for p in patterns}
    if len(flags) != 1:
        return None
    return re.compile("|".join(f"(?:{p.pattern})" for p in patterns), flags.pop())
