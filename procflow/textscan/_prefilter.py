"""A one-pass prefilter for a rule table, on RE2 when ``google-re2`` is installed.

RE2 reads a *proxy* of the text: one Latin-1 byte per character, the character
itself when it is ASCII, 0x80 for any other. Each table pattern is translated (from
its ``re`` parse tree) into an RE2 pattern that matches the proxy *at least* where
the ``re`` pattern matches the text: look-arounds and ``\\b`` are dropped, except the
word edges ``(?<![a-z0-9])`` / ``(?![a-z0-9])`` that open and close a rule pattern,
which become a consuming ``(?:\\A|[^a-z0-9])`` / ``(?:[^a-z0-9]|\\z)``; a character
class keeps its ASCII members (Python's meaning of ``\\w``, ``\\s``, ``\\d``) and
accepts 0x80 when it accepts any non-ASCII character. One ``re2.Set`` of them
answers, in one linear pass, which patterns can match a text at all; each of those
then finds its matches with the original ``re`` pattern, tried only at the positions
where its RE2 form (without the leading edge, so that a match starts where the ``re``
match would) matches. The matches are those of the ``re`` pattern: RE2 only decides
where not to look.

Without ``google-re2`` (a core dependency on CPython; not on PyPy) the caller keeps
its own scan.
"""

from __future__ import annotations

import codecs
import importlib
import re
from collections.abc import Callable, Generator, Iterable, Sequence
from functools import lru_cache
from typing import Any, Final, Literal

from procflow.textscan._syntax import (
    AnyChar,
    At,
    Atomic,
    Backref,
    Branch,
    Category,
    Char,
    CharClass,
    ClassItem,
    Group,
    Look,
    Node,
    NotChar,
    Range,
    Repeat,
    Seq,
    parse,
)

__all__ = ["DEFAULT_ENGINE", "Engine", "GroupStarts", "Prefilter", "check_engine", "load_re2",
           "proxy", "re2_form", "word_finder"]

# RE2 memory budgets (program and DFA cache): below ~32 MB the sets' DFAs thrash on
# long texts, and the set of a whole table (short texts only) wants more
_MAX_MEM = 32 << 20  # a set of GROUP patterns
_WHOLE_MEM = 64 << 20  # the set of the whole table
_SEARCHER_MEM = 8 << 20  # one pattern (RE2's default)
_AHEAD_MEM = 64 << 20  # the search for the next start of any pattern of a set
_OTHER = 0x80
# repetitions up to this many are written as they are (more are loosened, see
# ``_Writer``): a word gap of up to 6 or 8 words loosened to "any number" kept a
# partly matched rule alive to the end of the text, and on text not read before the
# sets built a DFA state for each mix of such rules (8 instead of 4: -6 % on new text;
# 16: +17 %, the counters' states outweigh it)
_EXACT_REPEAT = 8
_LOWER_WORD = re.compile(r"[a-z]+")
_EDGE_CHARS = frozenset(range(ord("a"), ord("z") + 1)) | frozenset(range(ord("0"), ord("9") + 1))


class _Unsupported(Exception):
    pass


def load_re2() -> Any:
    """The ``re2`` module of ``google-re2``, or ``None`` where it is not installed."""
    try:
        return importlib.import_module("re2")
    except ImportError:
        return None


Engine = Literal["re2", "re"]
"""Which engine a guard's scans run on: ``"re2"`` reads each text first with RE2 sets
(``google-re2``) to tell which rules can match and where, then confirms with ``re``;
``"re"`` runs the rules' anchor passes with ``re`` alone. The verdicts are the same."""

DEFAULT_ENGINE: Final[Engine] = "re2" if load_re2() is not None else "re"
"""``"re2"`` when ``google-re2`` can be imported, else ``"re"``."""


def check_engine(engine: object, owner: str) -> Engine:
    """``engine`` checked (``None``: ``DEFAULT_ENGINE``).

    Raises:
        ValueError: Not ``"re2"``, ``"re"`` or ``None``, or ``"re2"`` without
            ``google-re2`` installed.
    """
    if engine is None:
        return DEFAULT_ENGINE
    if engine == "re":
        return "re"
    if engine == "re2":
        if load_re2() is None:
            raise ValueError(f"{owner}: engine='re2' needs the google-re2 package "
                             "(pip install google-re2); or pass engine='re'")
        return "re2"
    raise ValueError(f"{owner}: engine must be 're2', 're' or None (the default: re2 when "
                     f"installed), got {engine!r}")


_CATEGORY_TESTS = {
    "digit": re.compile(r"\d"), "not_digit": re.compile(r"\D"),
    "space": re.compile(r"\s"), "not_space": re.compile(r"\S"),
    "word": re.compile(r"\w"), "not_word": re.compile(r"\W"),
}


_CATEGORY_MEMBERS = {category: frozenset(c for c in range(128) if test.match(chr(c)))
                     for category, test in _CATEGORY_TESTS.items()}


@lru_cache(maxsize=4096)
def _class_of(items: tuple[ClassItem, ...], negate: bool, ignore_case: bool) -> str:
    """The RE2 class of a character class of the parse tree (see ``_members``)."""
    return _class(_members(items, negate, ignore_case))


def _members(items: tuple[ClassItem, ...], negate: bool, ignore_case: bool) -> set[int]:
    """The bytes of the proxy text (see ``proxy``) a character class of the parse tree
    may accept: its ASCII members with Python's meaning of each category (``str``
    patterns), and 0x80, standing for every other character, when it accepts any."""
    members: set[int] = set()
    other = False
    for item in items:
        if isinstance(item, Char):
            members.add(item.code)
            other = other or item.code >= 128
        elif isinstance(item, Range):
            members.update(range(item.lo, min(item.hi, 127) + 1))
            other = other or item.hi >= 128
        elif isinstance(item, Category):
            members.update(_CATEGORY_MEMBERS[item.name])
            other = True  # each category holds non-ASCII characters
    if ignore_case and any(c < 128 and chr(c).isalpha() for c in members):
        members |= {ord(chr(c).swapcase()) for c in members if c < 128 and chr(c).isalpha()}
        other = True  # "k" matches the Kelvin sign, "s" the long s
    out = {c for c in range(128) if (c in members) != negate}
    if other or negate:
        out.add(_OTHER)
    return out


def _class(members: set[int]) -> str:
    if not members:
        return r"[^\x00-\xff]"  # matches nothing
    runs: list[tuple[int, int]] = []
    for c in sorted(members):
        if runs and runs[-1][1] == c - 1:
            runs[-1] = (runs[-1][0], c)
        else:
            runs.append((c, c))
    body = "".join(f"\\x{lo:02x}" if lo == hi else f"\\x{lo:02x}-\\x{hi:02x}"
                   for lo, hi in runs)
    return f"[{body}]"


def _edge(node: Node, behind: bool, flags: int) -> bool:
    """Whether ``node`` is a word-edge look-around (``(?<![a-z0-9])`` with ``behind``,
    else ``(?![a-z0-9])``)."""
    if (flags & re.IGNORECASE or not isinstance(node, Look) or not node.negate
            or node.behind != behind or len(node.body) != 1):
        return False
    inner = node.body[0]
    return (isinstance(inner, CharClass)
            and _members(inner.items, inner.negate, False) == set(_EDGE_CHARS))


class _Writer:
    def __init__(self, flags: int) -> None:
        self.ignore_case = bool(flags & re.IGNORECASE)
        self.dotall = bool(flags & re.DOTALL)
        self.multiline = bool(flags & re.MULTILINE)
        self.groups: dict[int, str] = {}

    def sequence(self, items: Seq) -> str:
        return "".join(self.item(node) for node in items)

    def item(self, node: Node) -> str:
        match node:
            case Char():
                return _class_of((node,), False, self.ignore_case)
            case NotChar(code):
                return _class_of((Char(code),), True, self.ignore_case)
            case CharClass(items, negate):
                return _class_of(items, negate, self.ignore_case)
            case AnyChar():
                return "(?s:.)" if self.dotall else "[^\\n]"
            case Branch(alternatives):
                return "(?:" + "|".join(self.sequence(alt) for alt in alternatives) + ")"
            case Group():
                return self.group(node)
            case Atomic(body):
                return "(?:" + self.sequence(body) + ")"
            case Repeat(lo, hi, _, body):
                if hi is None or hi > _EXACT_REPEAT:
                    # an upper bound makes a DFA state per count still open: loosened to
                    # "lo or more" (lo at most 32), it matches more texts, and the set
                    # stays small
                    lo, hi = min(lo, 32), None
                upper = "" if hi is None else str(hi)
                return f"(?:{self.sequence(body)}){{{lo},{upper}}}"
            case At(where):
                return self.at(where)
            case Look():
                return ""  # dropped: the RE2 form matches at least where the pattern does
            case Backref(group) if group in self.groups:
                # what the group matched, read as anything the group could match
                return self.groups[group]
        raise _Unsupported(type(node).__name__)  # conditionals, references to an open group

    def group(self, node: Group) -> str:
        saved = (self.ignore_case, self.dotall)
        if node.add_flags & re.IGNORECASE or node.del_flags & re.IGNORECASE:
            self.ignore_case = bool(node.add_flags & re.IGNORECASE)
        if node.add_flags & re.DOTALL or node.del_flags & re.DOTALL:
            self.dotall = bool(node.add_flags & re.DOTALL)
        try:
            body = "(?:" + self.sequence(node.body) + ")"
        finally:
            self.ignore_case, self.dotall = saved
        if node.index is not None:
            self.groups[node.index] = body
        return body

    def at(self, where: str) -> str:
        if where == "start":
            return "(?m:^)" if self.multiline else r"\A"
        if where == "start_string":
            return r"\A"
        if where == "end":
            return "(?m:$)"  # before any newline: a superset of ``$`` without MULTILINE
        if where == "end_string":
            return r"\z"
        # boundary, non_boundary: dropped (Python's \b knows letters beyond ASCII,
        # RE2's does not)
        return ""


def re2_form(pattern: re.Pattern[str], *, consume_edges: bool) -> str | None:
    """RE2 syntax for a pattern matching at least where ``pattern`` does on ASCII text
    (read as its ``proxy``; ``None`` when it cannot be written). With ``consume_edges``
    a leading ``(?<![a-z0-9])`` becomes ``(?:\\A|[^a-z0-9])``; without, it is dropped, so
    a match starts where ``pattern``'s would. A trailing ``(?![a-z0-9])`` becomes
    ``(?:[^a-z0-9]|\\z)`` either way (it does not move the start)."""
    forms = _forms(pattern)
    if forms is None:
        return None
    return forms[0] if consume_edges else forms[1]


def _forms(pattern: re.Pattern[str]) -> tuple[str, str] | None:
    """``re2_form`` of ``pattern`` with and without consuming its leading edge."""
    try:
        items = parse(pattern)
        writer = _Writer(pattern.flags)
        head = tail = ""
        if items and _edge(items[0], True, pattern.flags):
            items = items[1:]
            head = r"(?:\A|[^a-z0-9])"
        if items and _edge(items[-1], False, pattern.flags):
            items = items[:-1]
            tail = r"(?:[^a-z0-9]|\z)"
        body = writer.sequence(items) + tail
    except (_Unsupported, RecursionError, ValueError):
        return None
    return head + body, body


def _other_bytes(error: UnicodeError) -> tuple[bytes, int]:
    """The encoding error handler of ``proxy``: 0x80 for each character of a run of
    non-ASCII characters (one call per run)."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    return b"\x80" * (error.end - error.start), error.end


codecs.register_error("procflow.proxy", _other_bytes)


def proxy(text: str) -> bytes:
    """What RE2 reads for ``text``: one byte per character, 0x80 for each non-ASCII one."""
    return text.encode("ascii", "procflow.proxy")


class Prefilter:
    """Which patterns of a table can match a text, and where to try them.

    A long text is read by sets of ``GROUP`` patterns: one RE2 set of a whole table of
    rules with word gaps makes a DFA whose states are the combinations of partly
    matched rules; over long and varied texts there are too many to cache, and it runs
    at a few MB/s, while sets of ten stay small and each runs at 100+ MB/s. A short
    text (up to ``SHORT`` characters) visits few states: one set of the whole table,
    which only short texts ever see, answers in one call instead of one per group
    (and when it cannot, the groups do). Where a table's rules keep many partly matched
    at once, that set builds large states for every text it has not read before (the
    injection table's cost ~1.7 µs a character): such a table passes ``whole_max=0``.

    Args:
        patterns: The table (``re`` patterns).
        re2: The ``re2`` module.
        whole_max: The longest text (characters) the set of the whole table reads
            first (default ``SHORT``; 0: none).
        group: How many patterns each of the sets that read longer texts holds
            (default ``GROUP``).
        searchers: Also compile each pattern's searcher for ``starts``; a prefilter
            asked for ``candidates`` only does without.

    Raises:
        ValueError: RE2 could not compile a set (the caller keeps its own scan).
    """

    __slots__ = ("_searchers", "_sets", "_whole", "_whole_max", "always", "group_of", "groups")

    GROUP = 10
    SHORT = 1_000

    def __init__(self, patterns: Sequence[re.Pattern[str]], re2: Any, *,
                 whole_max: int = SHORT, group: int = GROUP, searchers: bool = True) -> None:
        self._whole_max = whole_max
        options = _options(re2, _MAX_MEM)
        small = _options(re2, _SEARCHER_MEM)
        self._searchers: list[Any] = []
        always: list[int] = []
        members: list[tuple[int, bytes]] = []
        bodies: dict[int, str] = {}
        try:
            for index, pattern in enumerate(patterns):
                forms = _forms(pattern)
                if forms is None:
                    always.append(index)
                    self._searchers.append(None)
                    continue
                member, start = forms
                members.append((index, member.encode("ascii")))
                bodies[index] = start
                self._searchers.append(
                    _searcher(re2.compile(start.encode("ascii"), small)) if searchers else None)
            # each set: (its Match, its patterns' table indexes, its sentinel's index)
            chunks = [members[first:first + group] for first in range(0, len(members), group)]
            self._sets = [_set(re2, options, chunk) for chunk in chunks]
            # where the patterns of each set start, found for all of them at once
            joint = searchers
            self.groups = tuple(GroupStarts(re2, [(index, bodies[index]) for index, _ in chunk])
                                for chunk in chunks) if joint else ()
            self.group_of = {index: number for number, chunk in enumerate(chunks)
                             for index, _ in chunk} if joint else {}
            # (not made for a table whose texts all go to the groups)
            self._whole = (_set(re2, _options(re2, _WHOLE_MEM), members) if whole_max > 0
                           else None)
        except re2.error as exc:
            raise ValueError(f"RE2 could not compile the prefilter: {exc}") from exc
        self.always = tuple(always)

    def candidates(self, data: bytes) -> list[int] | None:
        """The indexes (in table order) of the patterns that may match the text whose
        ``proxy`` is ``data``, those without an RE2 form included; ``None`` when a
        set could not answer."""
        out = list(self.always)
        if self._whole is not None and len(data) <= self._whole_max:
            match, indexes, sentinel = self._whole
            found = match(data)
            if found and sentinel in found:
                out.extend(indexes[i] for i in found if i != sentinel)
                out.sort()
                return out
        for match, indexes, sentinel in self._sets:
            found = match(data)
            if not found or sentinel not in found:
                return None
            if len(found) > 1:
                out.extend(indexes[i] for i in found if i != sentinel)
        out.sort()
        return out

    def candidates_steps(self, data: bytes) -> Generator[None, None, list[int] | None]:
        """``candidates`` (returned), a step per set read: for a long text, each set's
        pass takes a while (~1 ms over 30,000 characters of attack prompts), and a
        caller that runs other work between steps holds it up for one set's time."""
        # the loop of ``candidates`` written out again with its steps: ``candidates``
        # run through this generator paid ~0.3 µs a call, and a chat turn makes ~13
        out = list(self.always)
        for match, indexes, sentinel in self._sets:
            found = match(data)
            if not found or sentinel not in found:
                return None
            if len(found) > 1:
                out.extend(indexes[i] for i in found if i != sentinel)
            yield
        out.sort()
        return out

    def starts(self, index: int, data: bytes, pos: int) -> int:
        """The first position at or after ``pos`` where pattern ``index`` may match
        (``-1``: nowhere; every position when the searchers were not compiled)."""
        searcher = self._searchers[index]
        if searcher is None:
            return pos
        return int(searcher(data, pos))


class GroupStarts:
    """Where the patterns of one of a ``Prefilter``'s sets start, for all of them at
    once: one RE2 search for the leftmost start of any of their forms, then one
    anchored set there for which of them may start at that place. Stepping from start to
    start reads a text about once for the whole set, where a search per pattern reads
    it once per pattern (most of a dense text's cost: each pattern's first start lies
    far in). Compiled on first use (``ready``: most tables' texts never need it).

    Args:
        re2: The ``re2`` module.
        members: ``(table index, RE2 form without its leading edge)`` of each pattern.
    """

    __slots__ = ("_compiled", "_failed", "_members", "_re2", "indexes")

    def __init__(self, re2: Any, members: Sequence[tuple[int, str]]) -> None:
        self._re2 = re2
        self._members = tuple(body for _, body in members)
        self.indexes = tuple(index for index, _ in members)
        self._compiled: tuple[Any, Any, int] | None = None
        self._failed = False

    def ready(self) -> bool:
        """Compile on first call; whether ``next_start`` and ``at`` can be used (RE2
        could compile them: if not, the caller searches for each pattern alone)."""
        if self._compiled is None and not self._failed:
            try:
                self._compile()
            except self._re2.error:
                self._failed = True
        return self._compiled is not None

    def _compile(self) -> tuple[Any, Any, int]:
        re2 = self._re2
        bodies = self._members
        # leftmost-longest: the same leftmost start as leftmost-first, and a DFA whose
        # states are sets of partly matched forms, as a set's are; it gets twice a
        # set's memory (with a set's, its DFA ran out and RE2 went on without one, at
        # a quarter of the speed)
        longest = _options(re2, _AHEAD_MEM)
        longest.longest_match = True
        either = "|".join(f"(?:{body})" for body in bodies)
        ahead = re2.compile(f"(?:{either})".encode("ascii"), longest).search
        # at a start, which forms match from it: the text from there on, where ``^``
        # and ``\A`` hold at its first character (more than at that place of the whole
        # text: a superset, which ``re`` then checks)
        anchored = re2.Set.MatchSet(_options(re2, _MAX_MEM))
        for body in bodies:
            anchored.Add(body.encode("ascii"))
        # the empty pattern matches every anchored text: missing, the set gave up
        sentinel = anchored.Add(b"")
        anchored.Compile()
        self._compiled = (ahead, anchored.Match, sentinel)
        return self._compiled

    def next_start(self, data: bytes, pos: int) -> tuple[int, int]:
        """The leftmost start at or after ``pos`` of a match of any member's form in
        the text whose ``proxy`` is ``data``, and that match's end (``(-1, -1)``:
        none). Only once ``ready``."""
        ahead = (self._compiled or self._compile())[0]
        m = ahead(data, pos)
        return (-1, -1) if m is None else (int(m.start()), int(m.end()))

    def at(self, data: memoryview, start: int) -> list[int] | None:
        """The table indexes of (at least) the members whose form matches from
        ``start`` (``data``: the text's ``proxy``), or ``None`` when the set ran out of
        memory. Only once ``ready``."""
        _, anchored, sentinel = self._compiled or self._compile()
        found = anchored(data[start:])
        if not found or sentinel not in found:
            return None
        indexes = self.indexes
        return [indexes[i] for i in found if i != sentinel]


def _options(re2: Any, max_mem: int) -> Any:
    """RE2 options: Latin-1 (the proxy text), no capture groups, no logging."""
    options = re2.Options()
    options.max_mem = max_mem
    options.log_errors = False
    options.never_capture = True
    options.encoding = re2.Options.Encoding.LATIN1
    return options


def _set(re2: Any, options: Any, members: list[tuple[int, bytes]],
         ) -> tuple[Any, tuple[int, ...], int]:
    """An RE2 set of ``members`` (table index, RE2 form): its ``Match``, the table index
    of each of its patterns, and the index of its sentinel."""
    rset = re2.Set.SearchSet(options)
    for _, form in members:
        rset.Add(form)
    # a pattern every text matches: missing from an answer, the set failed (its DFA
    # ran out of memory) and the caller must scan another way
    sentinel = rset.Add(rb"\A")
    rset.Compile()
    return rset.Match, tuple(index for index, _ in members), sentinel


def _searcher(regexp: Any) -> Callable[[bytes, int], int]:
    """``(data, pos) -> start of the first match at or after pos, or -1``."""
    search = regexp.search

    def first(data: bytes, pos: int) -> int:
        m = search(data, pos)
        return -1 if m is None else int(m.start())

    return first


def may_start(pattern: re.Pattern[str]) -> Callable[[bytes], int] | None:
    """``data -> pos``: no match of ``pattern`` in the text whose ``proxy`` is ``data``
    starts before ``pos`` (``-1``: none starts anywhere), told by its RE2 form
    (``re2_form``, which matches wherever the pattern does) in one linear pass.
    ``pattern.search(text, pos)`` then finds what ``pattern.search(text)`` finds, and
    ``re`` (which tries a pattern without a literal start at every position) neither
    reads a text holding none nor the part before the first place one can start.
    ``None`` without ``google-re2``, or when the pattern has no RE2 form."""
    re2 = load_re2()
    form = re2_form(pattern, consume_edges=True)
    if re2 is None or form is None:
        return None
    try:
        regexp = re2.compile(form.encode("ascii"), _options(re2, _SEARCHER_MEM))
    except re2.error:
        return None
    search = _searcher(regexp)

    def first(data: bytes) -> int:
        return int(search(data, 0))

    return first


def word_finder(words: Iterable[str]) -> Callable[[bytes], bool] | None:
    """``data -> whether a whole word of it is one of words``, on RE2: one linear pass
    over the ``proxy`` of a text tells whether one of its maximal runs of ``a-z`` is in
    ``words`` (each made of ``a-z`` only; thousands of them make one DFA). ``None``
    without ``google-re2``, or when RE2 cannot compile it.

    Raises:
        ValueError: A word holds something other than ``a-z``.
    """
    words = sorted(set(words))
    if not words or any(_LOWER_WORD.fullmatch(word) is None for word in words):
        raise ValueError("word_finder: words of a-z only, at least one")
    re2 = load_re2()
    if re2 is None:
        return None
    pattern = rb"(?:\A|[^a-z])(?:" + "|".join(words).encode("ascii") + rb")(?:[^a-z]|\z)"
    return _finder(re2, pattern, _MAX_MEM)


def _finder(re2: Any, pattern: bytes, max_mem: int) -> Callable[[bytes], bool] | None:
    """``data -> whether the RE2 pattern matches somewhere in it`` (``None`` when RE2
    cannot compile it)."""
    try:
        regexp = re2.compile(pattern, _options(re2, max_mem))
    except re2.error:
        return None
    search = _searcher(regexp)

    def found(data: bytes) -> bool:
        return bool(search(data, 0) >= 0)

    return found
