"""Text views for the rule-based detectors: undoing obfuscation, and decoding payloads.

A rule engine matching plain English phrases is easy to dodge: "i g n o r e",
"ign\u200bore", Cyrillic look-alikes, full-width letters, "1gn0r3", base64. So the
detectors never match the raw text. They match *views* of it — folded, joined,
de-leeted, squashed, rot13'd, reversed, decoded — and every view remembers, for each
of its characters, the span of the original text it came from, so a hit in any view
can be traced back (and removed) in the original.

``fold`` is the base view: Unicode tag characters decoded, zero-width and control
characters dropped, compatibility folding (NFKD, which covers NFKC's full-width and
ligature cases) with combining marks stripped, a small confusables map (Cyrillic and
Greek look-alikes, curly quotes, dashes) to ASCII, whitespace unified, lower case.
"""

from __future__ import annotations

import binascii
import html
import operator
import re
import unicodedata
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate, islice
from typing import overload
from urllib.parse import unquote

from procflow.textscan._prefilter import DEFAULT_ENGINE, Engine, proxy, word_finder

__all__ = [
    "CONFUSABLES",
    "ROT13_BYTES",
    "WORD_GAP",
    "Decoded",
    "View",
    "compile_pattern",
    "decode_payloads",
    "fold",
    "join_split",
    "leet",
    "normalise",
    "reverse",
    "rot13",
    "sentence_bounds",
    "smuggling_signals",
    "spellfix",
    "squash",
    "views_for_matching",
]


ZERO_WIDTH = frozenset(
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180e\u200b\u200c\u200d"
    "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2060\u2061\u2062\u2063\u2064\u2066\u2067"
    "\u2068\u2069\u3164\ufe00\ufe01\ufe02\ufe03\ufe04\ufe05\ufe06\ufe07\ufe08\ufe09\ufe0a"
    "\ufe0b\ufe0c\ufe0d\ufe0e\ufe0f\ufeff\uffa0"
)

CONFUSABLES: dict[str, str] = {
    # Cyrillic
    "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o",
    "р": "p", "с": "c", "т": "t", "у": "y", "х": "x", "і": "i", "ї": "i", "ј": "j",
    "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w", "һ": "h", "ӏ": "l", "ɡ": "g", "ɑ": "a",
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P",
    "С": "C", "Т": "T", "У": "Y", "Х": "X", "І": "I", "Ј": "J", "Ѕ": "S", "Ԁ": "D",
    "Ԛ": "Q", "Ԝ": "W", "Һ": "H", "Ӏ": "I", "ı": "i",
    # Greek
    "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o",
    "ρ": "p", "τ": "t", "υ": "u", "χ": "x", "γ": "y", "ω": "w", "Α": "A", "Β": "B",
    "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O",
    "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
    # Punctuation look-alikes
    "‘": "'", "’": "'", "‛": "'", "′": "'", "`": "'", "“": '"', "”": '"', "„": '"',
    "″": '"', "‐": "-", "‑": "-", "‒": "-", "–": "-", "—": "-", "―": "-", "−": "-",
    "⁄": "/", "∕": "/", "\u2028": "\n", "\u2029": "\n",
}

_LEET_I = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t",
                         "8": "b", "9": "g", "@": "a", "$": "s", "!": "i", "|": "l", "+": "t"})
_LEET_L = str.maketrans({"0": "o", "1": "l", "3": "e", "4": "a", "5": "s", "7": "t",
                         "8": "b", "9": "g", "@": "a", "$": "s", "!": "i", "|": "l", "+": "t"})
_LEET_TOKEN = re.compile(r"[a-z0-9@$!|+]+")  # maximal runs; letterless ones are skipped
# the maximal runs holding a digit or symbol and a letter (the only ones ``leet`` may
# rewrite); ``_leet_tokens`` finds them with ``_LEET_HIT``, faster (this tries every
# position of the text; the tests check the two agree)
_LEET_WORD = re.compile(r"(?<![a-z0-9@$!|+])(?=[a-z0-9@$!|+]*[0-9@$!|+])(?=[a-z0-9@$!|+]*[a-z])"
                        r"[a-z0-9@$!|+]+")
_LEET_CHARS = re.compile(r"[0-9@$!|+]")
# the same runs, found from their first digit or symbol (``re`` skips to those in C):
# one preceded by a letter, or one that starts a run whose digits and symbols are
# followed by a letter; the match ends where the run does, and the run's letters
# before it are counted back (no digit or symbol before it in the run: the first one
# of a qualifying run is always the one found)
_LEET_HIT = re.compile(r"[0-9@$!|+](?:(?<=[a-z].)|(?<![0-9@$!|+].)(?=[0-9@$!|+]*+[a-z]))"
                       r"[a-z0-9@$!|+]*+")
_SPLIT_RUN = re.compile(
    r"[a-z0-9@$](?<![a-z0-9][a-z0-9@$])(?:[ .\-_*•·|/,+~:'\"][a-z0-9@$](?![a-z0-9])){3,}")
# the split runs are looked for in a class string of the text, one byte per character
# of its Latin-1 encoding ("•" read as "·" first, every other character past Latin-1 as
# "?"): "L" for a letter of a run, "S" for a separator, "." for the rest. Every split
# run starts with "LSLSLSL" in it, which ``bytes.find`` finds at C speed;
# ``_SPLIT_RUN`` is tried at each of them.
_SPLIT_CLASSES = bytes(
    ord("L") if chr(c) in "abcdefghijklmnopqrstuvwxyz0123456789@$"
    else ord("S") if chr(c) in " .-_*·|/,+~:'\"" else ord(".") for c in range(256))
# first character before the look-behind: ``re`` skips ahead to the punctuation
_INNER_PUNCT = re.compile(r"[.\-_*'~^|•·](?<=[a-z0-9][.\-_*'~^|•·])[.\-_*'~^|•·]*(?=[a-z])")
# the same, as one group: ``split`` gives the parts kept and the parts dropped in turn
_INNER_PUNCT_PARTS = re.compile(f"({_INNER_PUNCT.pattern})")
_SEPARATORS = re.compile(r"[^a-z0-9@$]")
# every byte but a-z: what ``squash`` deletes from a text's ASCII bytes
_NON_LETTER_BYTES = bytes(c for c in range(256) if not ord("a") <= c <= ord("z"))
_LETTER = re.compile(r"[a-z]")


# -- the pattern mini-syntax the rule tables are written in (see injection.patterns) --

_SEP = r"[\W_]{1,16}"
_MAYBE_SEP = r"[\W_]{0,16}"
_GAP = r"(?:[\W_]{1,16}\w{1,40}){0,3}?"
WORD_GAP = re.compile(r"\(\?:\\w\+ \)\{\d+,\d+\}\??")


def _expand(pattern: str) -> str:
    """Rewrite " " as a separator run, " ?" as an optional one and "~" as a short word
    gap, and bound repeated groups (``)*`` -> ``){0,4}``), outside [classes]."""
    out: list[str] = []
    in_class = escaped = False
    pattern = pattern.replace(" ?", "\0")
    for ch in pattern:
        if ch == "\0":
            out.append(_MAYBE_SEP)
        elif escaped:
            out.append(ch)
            escaped = False
        elif ch == "\\":
            out.append(ch)
            escaped = True
        elif in_class:
            out.append(ch)
            in_class = ch != "]"
        elif ch == "[":
            out.append(ch)
            in_class = True
        elif ch in "*+" and out and out[-1] == ")":
            # bounded, so no pattern backtracks polynomially on long repetitive input
            out.append("{0,4}" if ch == "*" else "{1,4}")
        else:
            out.append(_SEP if ch == " " else _GAP if ch == "~" else ch)
    return "".join(out)


def compile_pattern(pattern: str, *, edges: bool = True) -> re.Pattern[str]:
    """Compile a rule pattern: expand the mini-syntax, anchor it at word edges."""
    body = _expand(pattern)
    if edges:
        body = rf"(?<![a-z0-9])(?:{body})(?![a-z0-9])"
    return re.compile(body, re.MULTILINE)



@dataclass(slots=True)
class View:
    """A transformed text that remembers where each character came from. Not to be
    changed once made (not ``frozen``: a frozen dataclass's ``__init__`` sets each field
    through ``object.__setattr__``, and a scan makes several views per text, ~1 µs each
    more).

    Attributes:
        name: Which transformation made it ("base", "joined", "leet", ...).
        text: The transformed text.
        starts: For each character, the first original index it came from.
        ends: For each character, the original index just past its source.
    """

    name: str
    text: str
    starts: Sequence[int]
    ends: Sequence[int]

    @property
    def keeps_indices(self) -> bool:
        """Whether each character came from the original character at its own index
        (``span(start, end)`` is ``(start, end)``): the view of a transformation that
        replaced characters one for one."""
        return isinstance(self.starts, range) and self.starts == range(len(self.text)) \
            and isinstance(self.ends, range) and self.ends == range(1, len(self.text) + 1)

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original span that produced ``text[start:end]`` (``end > start``)."""
        last = max(end - 1, start)
        starts = self.starts
        # exact type tests: these classes are ``Sequence``s, and ``isinstance`` against
        # an abstract base class goes through its hook for every other type
        if type(starts) is _LazyIndex:
            starts = starts._resolve()
        if type(starts) is _Runs and start >= 0 and last < len(starts):
            return starts.span(start, last)  # (ends are the same runs plus one)
        ends = self.ends
        if type(starts) is _Mapped:
            if type(ends) is _LazyIndex:
                ends = ends._resolve()
            if type(ends) is _Mapped and start >= 0 and last < starts._size:
                return starts.span(ends, start, last)
        return (min(starts[start], starts[last]), max(ends[start], ends[last]))


def _fold_char(ch: str) -> str:
    code = ord(ch)
    if 0xE0020 <= code <= 0xE007E:  # Unicode tag characters smuggle ASCII invisibly
        return chr(code - 0xE0000)
    if ch in ZERO_WIDTH or 0xE0000 <= code <= 0xE007F:
        return ""
    if ch in CONFUSABLES:
        return CONFUSABLES[ch]
    out = []
    for part in unicodedata.normalize("NFKD", ch):
        if unicodedata.combining(part):
            continue
        part = CONFUSABLES.get(part, part)
        category = unicodedata.category(part)
        if part in "\n\t" or category == "Zs":
            part = "\n" if part == "\n" else " "
        elif category in ("Cc", "Cf"):
            continue
        out.append(part)
    return "".join(out)


# the ASCII characters ``fold`` drops (controls but tab and newline), as bytes for
# ``bytes.translate`` to delete: one C pass, ~3x faster than ``re`` testing each character
# against the class
_ASCII_DROPPED_BYTES = bytes([*range(0x09), *range(0x0B, 0x20), 0x7F])
# What the ASCII fast path does not cover: a class and its repetition rather than "+", so
# that ``re`` skips ahead to the class at C speed (as for ``_NON_ASCII``).
_SLOW_FOLD = re.compile(r"[^\t\n\x20-\x7e][^\t\n\x20-\x7e]*")


def _fold_ascii(run: str) -> str:
    """An ASCII run folded: lower case, tab as space, backtick as quote."""
    run = run.lower()
    if "\t" in run:
        run = run.replace("\t", " ")
    if "`" in run:
        run = run.replace("`", "'")
    return run


@lru_cache(maxsize=4096)
def _fold_lower(ch: str) -> str:
    return _fold_char(ch).lower()


@lru_cache(maxsize=8)
def _slow_runs(text: str) -> tuple[tuple[int, int], ...]:
    """The runs of ``text`` that ``fold``'s ASCII path does not cover (``_SLOW_FOLD``:
    non-ASCII and control characters). Found once per text and read by ``fold`` and
    ``_folded_spans``."""
    return tuple(m.span() for m in _SLOW_FOLD.finditer(text))


# the ASCII characters ``fold``'s ASCII path covers (tab, newline, the printable ones),
# as bytes for ``bytes.translate`` to delete
_FAST_FOLD_BYTES = bytes([0x09, 0x0A, *range(0x20, 0x7F)])


@lru_cache(maxsize=8)
def _slow_chars(text: str) -> frozenset[str]:
    """The characters of ``text`` that ``fold``'s ASCII path does not cover (those of
    ``_slow_runs``), read by ``fold`` and ``smuggling_signals`` (each of whose signals
    needs one of them). From the text's UTF-8 bytes less the ASCII ones it covers: a
    character beyond ASCII is encoded in bytes from 0x80 up only, so what is left
    decodes to exactly those characters; C passes, where finding the runs with ``re``
    took ~130 µs over a 9 KB page of the docs."""
    rest = text.encode("utf-8", "surrogatepass").translate(None, _FAST_FOLD_BYTES)
    return frozenset(rest.decode("utf-8", "surrogatepass"))


def _fold_in_place(text: str, slow: frozenset[str]) -> str | None:
    """``fold``'s text for ``text``, whose characters outside the ASCII path are
    ``slow``: each of them replaced everywhere by what it folds to (a C pass per
    distinct character, where a loop over the text's runs took ~100 µs over a 9 KB page
    of the docs), then the ASCII folding of the whole. ``None`` when that would not
    give what folding run by run gives: a character folds to one that is itself
    replaced, or to one the ASCII folding changes."""
    folded = {ch: out for ch in slow if (out := _fold_lower(ch)) != ch}
    for ch in slow:
        out = folded.get(ch, ch)
        if (out.lower() != out or "\t" in out or "`" in out
                or any(c in folded for c in out)):
            return None
    for ch, out in folded.items():
        text = text.replace(ch, out)
    return _fold_ascii(text)


def fold(text: str) -> View:
    """The base view: de-smuggled, compatibility-folded, confusables mapped, lowered."""
    if text.isascii():
        data = text.encode("ascii")
        if len(data.translate(None, _ASCII_DROPPED_BYTES)) == len(data):
            # the common case, without a Python step per character: same result
            return View("base", _fold_ascii(text), range(len(text)),
                        range(1, len(text) + 1))
    slow = _slow_chars(text)
    folded = _fold_in_place(text, slow)
    if folded is not None:
        if all(len(_fold_lower(ch)) == 1 for ch in slow):
            # each character folds to one (dashes, quotes, accented letters...): the
            # view maps one to one onto the text, as an ASCII text's does
            return View("base", folded, range(len(text)), range(1, len(text) + 1))
        spans = _DeferredSpans(lambda: _folded_spans(text))
        return View("base", folded, _LazyIndex(spans, False), _LazyIndex(spans, True))
    pieces: list[str] = []
    pos = 0
    for start, end in _slow_runs(text):
        if start > pos:  # an ASCII run: folded in one go
            pieces.append(_fold_ascii(text[pos:start]))
        pieces.extend(map(_fold_lower, text[start:end]))
        pos = end
    if pos < len(text):
        pieces.append(_fold_ascii(text[pos:]))
    if all(len(_fold_lower(ch)) == 1 for ch in slow):
        # each character folds to one (dashes, quotes, accented letters...): the
        # view maps one to one onto the text, as an ASCII text's does
        return View("base", "".join(pieces), range(len(text)), range(1, len(text) + 1))
    spans = _DeferredSpans(lambda: _folded_spans(text))
    return View("base", "".join(pieces), _LazyIndex(spans, False), _LazyIndex(spans, True))


def _folded_spans(text: str) -> tuple[_Runs, _Runs]:
    """The starts and ends of ``fold(text)`` (not ASCII), as runs: each character of the
    view comes from one character of the text, and the view maps one to one onto the
    text but for the characters folded to none (a zero-width space) or to several (a
    ligature). Only the non-ASCII runs holding such a character are looked at one by one:
    the runs are made in proportion to them, not to the text's length."""
    marks = [0]  # a one-to-one run, then for each character folded to n != 1 characters:
    slopes = [1]  # its n copies (none when n is 0), and the one-to-one run after it
    bases = [0]
    shift = 0  # text index - view index, in the current one-to-one run

    def add(mark: int, slope: int, base: int) -> None:
        if marks[-1] == mark:  # the run before it is empty
            slopes[-1], bases[-1] = slope, base
        else:
            marks.append(mark)
            slopes.append(slope)
            bases.append(base)

    for start, end in _slow_runs(text):
        sizes = list(map(len, map(_fold_lower, text[start:end])))
        if sizes.count(1) == len(sizes):
            continue
        for i, n in enumerate(sizes, start):
            if n != 1:
                at = i - shift  # where the character's reading starts in the view
                if n:
                    add(at, 0, i)
                shift = i + 1 - (at + n)
                add(at + n, 1, shift)
    size = len(text) - shift
    return _Runs(marks, slopes, bases, 0, size), _Runs(marks, slopes, bases, 1, size)


def _substitute(view: View, matches: Iterable[re.Match[str]],
                repl: Callable[[re.Match[str]], str], name: str) -> View:
    edits = [(m.start(), m.end(), new) for m in matches if (new := repl(m)) != m.group(0)]
    return _apply(view, edits, name)


_Edit = tuple[int, int, str]  # replace view.text[start:end] with the text


def _apply(view: View, edits: list[_Edit], name: str) -> View:
    """``view`` with each edit made (the spans made on use)."""
    if not edits:  # nothing changes: share the text and spans, copy nothing
        return View(name, view.text, view.starts, view.ends)
    text = view.text
    pieces: list[str] = []
    pos = 0
    same = True  # whether each replacement is as long as what it replaces
    for start, end, new in edits:
        pieces.append(text[pos:start])
        pieces.append(new)
        same = same and len(new) == end - start
        pos = end
    pieces.append(text[pos:])
    if same:  # each character replaced one for one: the spans are those of ``view``
        return View(name, "".join(pieces), view.starts, view.ends)
    # the spans are only needed where a rule matches: made then
    spans = _DeferredSpans(lambda: _substituted_spans(view, edits))
    return View(name, "".join(pieces), _LazyIndex(spans, False), _LazyIndex(spans, True))


_RUN_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789@$")  # what a join keeps


def _substituted_spans(view: View, edits: list[_Edit]) -> tuple[Sequence[int], Sequence[int]]:
    """The starts and ends of ``_apply``'s view: those of ``view``, looked up through a
    map of the new view's runs onto ``view`` (one entry per edit, not per character).
    An edit that keeps the length maps one to one, as the text around it does: it is
    part of the run copied around it, and adds none."""
    text = view.text
    marks: list[int] = []  # where each run of the new view starts
    slopes: list[int] = []  # 1: copied from view; 0: one character of view for all
    starts: list[int] = []  # the bases of the runs, for the starts and for the ends
    ends: list[int] = []
    size = pos = 0
    for start, end, new in edits:
        if len(new) == end - start:
            continue
        if start > pos:  # copied
            marks.append(size)
            slopes.append(1)
            starts.append(pos - size)
            ends.append(pos - size)
            size += start - pos
        kept = [k for k in range(start, end) if text[k] in _RUN_LETTERS]
        if len(kept) == len(new):  # the replacement only dropped separators
            marks.extend(range(size, size + len(kept)))
            slopes.extend([0] * len(kept))
            starts.extend(kept)
            ends.extend(kept)
        elif new:
            marks.append(size)
            slopes.append(0)
            starts.append(start)
            ends.append(end - 1)
        size += len(new)
        pos = end
    if len(text) > pos:
        marks.append(size)
        slopes.append(1)
        starts.append(pos - size)
        ends.append(pos - size)
        size += len(text) - pos
    return (_Mapped(marks, slopes, starts, size, view.starts),
            _Mapped(marks, slopes, ends, size, view.ends))


def _dropped_spans(view: View, lengths: list[int]) -> tuple[Sequence[int], Sequence[int]]:
    """The starts and ends of ``view`` with parts of its text dropped, given the lengths
    of the parts kept and dropped in turn (kept first and last): the kept parts are
    runs copied from ``view``, found by sums in C (no Python step per part)."""
    offsets = list(accumulate(lengths, initial=0))  # where each part starts in view.text
    marks = list(accumulate(lengths[::2], initial=0))  # where each kept one starts after
    size = marks.pop()
    bases = list(map(operator.sub, offsets[::2], marks))
    slopes = [1] * len(marks)
    return (_Mapped(marks, slopes, bases, size, view.starts),
            _Mapped(marks, slopes, bases, size, view.ends))


def _split_runs(text: str) -> Iterator[re.Match[str]]:
    """``_SPLIT_RUN.finditer(text)``, tried only where a run can start: at each
    "LSLSLSL" of the text's ``_SPLIT_CLASSES`` string (every run starts with one; a
    candidate fails only at the pattern's word edges)."""
    latin = (text.replace("\u2022", "\u00b7") if "\u2022" in text else text).encode(
        "latin-1", "replace")
    classes = latin.translate(_SPLIT_CLASSES)
    pos = 0
    while (at := classes.find(b"LSLSLSL", pos)) >= 0:
        m = _SPLIT_RUN.match(text, at)
        if m is None:
            pos = at + 1
            continue
        yield m
        pos = m.end()


def _join(m: re.Match[str]) -> str:
    """A split run's letters, joined (a run of fewer than two letters is kept)."""
    run = m.group(0)
    letters = _SEPARATORS.sub("", run)
    return letters if sum(c.isalpha() for c in letters) >= 2 else run


def join_split(view: View) -> View:
    """Join letters split by spacing or punctuation ("i g n o r e", "ig-nore", "i.g.n")."""
    runs = list(_split_runs(view.text))
    joined = _substitute(view, runs, _join, "joined") if runs else view
    # every inner punctuation match is dropped: the text in one C pass, split into the
    # parts kept and dropped, whose lengths make the spans when they are needed
    parts = _INNER_PUNCT_PARTS.split(joined.text)
    if len(parts) == 1:
        return View("joined", joined.text, joined.starts, joined.ends)
    spans = _DeferredSpans(lambda: _dropped_spans(joined, list(map(len, parts))))
    return View("joined", "".join(parts[::2]), _LazyIndex(spans, False), _LazyIndex(spans, True))


_LeetWord = tuple[int, int, str, str]  # start, end, the part translated, the "!"s after it


def _leet_tokens(view: View) -> list[_LeetWord]:
    """The words ``leet`` rewrites: where they are, the part it translates, and the "!"
    that end them (punctuation, left as it is)."""
    out: list[_LeetWord] = []
    text = view.text
    for m in _LEET_HIT.finditer(text):
        start, end = m.span()
        while start and "a" <= text[start - 1] <= "z":  # the run's letters before it
            start -= 1
        token = text[start:end]
        if token[-1] != "!":
            out.append((start, end, token, ""))  # a digit or symbol, and a letter
            continue
        core = token.rstrip("!")
        if _LEET_CHARS.search(core) is not None and _LETTER.search(core) is not None:
            out.append((start, end, core, token[len(core):]))
    return out


def _leet_view(view: View, tokens: list[_LeetWord], one_as: str) -> View:
    table = _LEET_I if one_as == "i" else _LEET_L
    edits = [(start, end, core.translate(table) + bangs) for start, end, core, bangs in tokens]
    return _apply(view, edits, f"leet-{one_as}")


def leet(view: View, *, one_as: str = "i") -> View:
    """Read digits and symbols as letters inside words that also hold letters; "!" that
    ends a word is punctuation ("at chess!"), not an "i"."""
    return _leet_view(view, _leet_tokens(view), one_as)


VOCABULARY: frozenset[str] = frozenset({
    "ignore", "disregard", "previous", "instructions", "instruction", "prompt", "system",
    "forget", "reveal", "override", "restrictions", "guidelines", "jailbreak", "jailbroken",
    "developer", "unrestricted", "unfiltered", "uncensored", "password", "passwords",
    "secrets", "credentials", "directives", "pretend", "bypass",
})
_WORDS = re.compile(r"[a-z]{5,}")


def _one_edit(a: str, b: str) -> bool:
    """Whether ``a`` becomes ``b`` with one insertion, deletion, substitution or swap."""
    if abs(len(a) - len(b)) > 1:
        return False
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    if len(a) == len(b):
        return (a[i + 1:] == b[i + 1:]
                or (i + 1 < len(a) and a[i] == b[i + 1] and a[i + 1] == b[i]
                    and a[i + 2:] == b[i + 2:]))
    return a[i + 1:] == b[i:] if len(a) > len(b) else a[i:] == b[i + 1:]


def _typos(vocabulary: frozenset[str]) -> dict[str, str]:
    """Every one-edit misspelling ``spellfix`` reads as a vocabulary word (same first
    letter, five letters or more, not an inflection), mapped to that word."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    out: dict[str, str] = {}
    for word in sorted(vocabulary):
        variants = {word[:i] + word[i + 1:] for i in range(1, len(word))}
        variants |= {word[:i] + c + word[i + 1:] for i in range(1, len(word)) for c in letters}
        variants |= {word[:i] + c + word[i:] for i in range(1, len(word) + 1) for c in letters}
        variants |= {word[:i] + word[i + 1] + word[i] + word[i + 2:]
                     for i in range(len(word) - 1)}
        for token in variants:
            if (len(token) >= 5 and token[0] == word[0] and token not in vocabulary
                    and not token.startswith(word) and not word.startswith(token)):
                out.setdefault(token, word)
    return out


@lru_cache(maxsize=4)
def _typo_table(vocabulary: frozenset[str]) -> dict[str, str]:
    return _typos(vocabulary)


@lru_cache(maxsize=4)
def _typo_finder(vocabulary: frozenset[str]) -> Callable[[bytes], bool] | None:
    return word_finder(_typo_table(vocabulary)) if _typo_table(vocabulary) else None


def spellfix(view: View, vocabulary: frozenset[str] = VOCABULARY, *,
             engine: Engine = DEFAULT_ENGINE) -> View:
    """Read one-typo misspellings of the attack vocabulary as the word ("ignoer",
    "prevoius"); inflections ("ignored", "prompts") are left alone. A table of the
    misspellings is made once; a text none of whose words is in it is not rewritten
    (on engine ``"re2"``, one RE2 pass over the text tells; else its words are looked
    up)."""
    table = _typo_table(vocabulary)
    finder = _typo_finder(vocabulary) if engine == "re2" else None
    if (table.keys().isdisjoint(_WORDS.findall(view.text)) if finder is None
            else not finder(proxy(view.text))):
        return View("spelling", view.text, view.starts, view.ends)
    return _substitute(view, _WORDS.finditer(view.text),
                       lambda m: table.get(m.group(0), m.group(0)), "spelling")


class _DeferredSpans:
    """The starts and ends of a view, made on first use by ``make``: a view's text is
    cheap to make, its spans are not, and they are only needed for a match."""

    __slots__ = ("_ends", "_make", "_starts")

    def __init__(self, make: Callable[[], tuple[Sequence[int], Sequence[int]]]) -> None:
        self._make: Callable[[], tuple[Sequence[int], Sequence[int]]] | None = make
        self._starts: Sequence[int] = ()
        self._ends: Sequence[int] = ()

    def get(self, ends: bool) -> Sequence[int]:
        make = self._make
        if make is not None:
            self._make = None
            self._starts, self._ends = make()
        return self._ends if ends else self._starts


class _LazyIndex(Sequence[int]):
    __slots__ = ("_ends", "_seq", "_spans")

    def __init__(self, spans: _DeferredSpans, ends: bool) -> None:
        self._spans, self._ends = spans, ends
        self._seq: Sequence[int] | None = None

    def _resolve(self) -> Sequence[int]:
        seq = self._seq
        if seq is None:
            seq = self._seq = self._spans.get(self._ends)
        return seq

    def __len__(self) -> int:
        return len(self._resolve())

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        seq = self._seq
        return (seq if seq is not None else self._resolve())[index]


# bytes.translate tables: the letters a-z as "x" and the rest as " " (their runs are
# the words ``split`` finds), and the other way round
_LETTERS_AS_WORDS = bytes(0x78 if 0x61 <= c <= 0x7A else 0x20 for c in range(256))
_GAPS_AS_WORDS = bytes(0x20 if 0x61 <= c <= 0x7A else 0x78 for c in range(256))


def _squashed_spans(source: View) -> tuple[Sequence[int], Sequence[int]]:
    """The starts and ends of ``squash(source)``: those of ``source`` at its letters,
    looked up through the letter runs (one entry per run, not per letter)."""
    # the lengths of the letter runs and of the gaps between them, from two whitespace
    # splits of the text's bytes in C (half the time of a regex split into both); the
    # run k starts at letter marks[k] of the view and at text index marks[k] + the
    # gaps before it (one byte per character: each non-ASCII one is a "?", a gap)
    data = source.text.encode("ascii", "replace")
    marks = list(accumulate(map(len, data.translate(_LETTERS_AS_WORDS).split()), initial=0))
    size = marks.pop()
    gaps = accumulate(map(len, data.translate(_GAPS_AS_WORDS).split()), initial=0)
    if data and 0x61 <= data[0] <= 0x7A:  # no gap before the first run
        bases = list(islice(gaps, len(marks)))
    else:
        bases = list(islice(gaps, 1, len(marks) + 1))
    slopes = [1] * len(marks)
    return (_Mapped(marks, slopes, bases, size, source.starts),
            _Mapped(marks, slopes, bases, size, source.ends))


def squash(view: View) -> View:
    """Letters only: what "i-g n o r e" and "ig nore" have in common."""
    spans = _DeferredSpans(lambda: _squashed_spans(view))
    # the letters a-z are ASCII: the other characters dropped first, the rest bytewise
    letters = (view.text.encode("ascii", "ignore").translate(None, _NON_LETTER_BYTES)
               .decode("ascii"))
    return View("squashed", letters, _LazyIndex(spans, False),
                _LazyIndex(spans, True))


# ROT13 turns ASCII letters only; in UTF-8 they are single bytes and every other
# character is made of bytes >= 0x80, so the bytes can be turned in one C pass (the
# "rot13" codec looks each character up in a dict)
ROT13_BYTES = bytes.maketrans(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    b"NOPQRSTUVWXYZABCDEFGHIJKLMnopqrstuvwxyzabcdefghijklm")


def rot13(view: View) -> View:
    """The ROT13 reading of a view."""
    data = view.text.encode("utf-8", "surrogatepass").translate(ROT13_BYTES)
    return View("rot13", data.decode("utf-8", "surrogatepass"), view.starts, view.ends)


def _reversed_spans(view: View) -> tuple[Sequence[int], Sequence[int]]:
    """The starts and ends of ``reverse(view)``: runs read backwards (no list of one
    entry per character), or the entries themselves reversed."""
    starts = view.starts
    if isinstance(starts, _LazyIndex):
        starts = starts._resolve()
    if isinstance(starts, _Runs):  # (a folded view's): the runs read backwards
        return starts.reversed(0), starts.reversed(1)
    return view.starts[::-1], view.ends[::-1]


def reverse(view: View) -> View:
    """The view read backwards ("snoitcurtsni" -> "instructions")."""
    if isinstance(view.starts, range) and isinstance(view.ends, range):
        return View("reversed", view.text[::-1], view.starts[::-1], view.ends[::-1])
    spans = _DeferredSpans(lambda: _reversed_spans(view))
    return View("reversed", view.text[::-1], _LazyIndex(spans, False), _LazyIndex(spans, True))


@dataclass(frozen=True, slots=True)
class Decoded:
    """A payload found encoded in the text.

    Attributes:
        kind: "base64", "hex", "url", "escape" or "html".
        text: The decoded text.
        start: Original index where the encoded blob starts.
        end: Original index just past it.
    """

    kind: str
    text: str
    start: int
    end: int


_B64 = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{16,}={0,2}(?![A-Za-z0-9+/=_-])")
_HEX = re.compile(r"(?<![0-9A-Za-z])(?:0x)?(?:[0-9A-Fa-f]{2}[\s:,]?){8,}(?![0-9A-Za-z])")
# each written with its first repetition outside the group ("X(?:X){3,}" for
# "(?:X){4,}", the same matches): a pattern opening with a literal lets ``re`` skip
# ahead to it in C, where the group was tried at every position
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}(?:%[0-9A-Fa-f]{2}){3,}")
_ESCAPES = re.compile(r"\\(?:x[0-9A-Fa-f]{2}|u[0-9A-Fa-f]{4})"
                      r"(?:\\(?:x[0-9A-Fa-f]{2}|u[0-9A-Fa-f]{4})){3,}")
_ENTITIES = re.compile(r"&#(?:x[0-9A-Fa-f]+|\d+);(?:&#(?:x[0-9A-Fa-f]+|\d+);){3,}")


def _readable(raw: bytes) -> str | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if len(text) < 6:
        return None
    # counted in C ("\n", "\t" and " " are neither printable nor letters to str)
    printable = sum(map(str.isprintable, text)) + text.count("\n") + text.count("\t")
    letters = sum(map(str.isalpha, text)) + text.count(" ")
    if printable < 0.95 * len(text) or letters < 0.6 * len(text):
        return None
    return text


_URL_SAFE = str.maketrans("-_", "+/")


# what ``_b64`` deletes from a blob's bytes: what is left is its upper-case letters,
# digits, "+" and "/" (a blob is ASCII: the characters of ``_B64``)
_B64_LOWER_BYTES = b"abcdefghijklmnopqrstuvwxyz=_-"


def _b64(blob: str) -> str | None:
    # base64 of text holds a lower-case letter and an upper-case one, a digit or + /
    # (told by C calls: two ``re`` class searches took about twice as long)
    if blob.upper() == blob or not blob.encode("ascii").translate(None, _B64_LOWER_BYTES):
        return None
    padded = blob + "=" * (-len(blob) % 4)
    # read as base64, which skips "-" and "_", then as URL-safe base64, which reads
    # them as "+" and "/" (``b64decode`` and ``urlsafe_b64decode`` without their
    # wrappers): the same bytes both ways when the blob has neither
    readings = ((padded, padded.translate(_URL_SAFE)) if "-" in blob or "_" in blob
                else (padded,))
    for reading in readings:
        try:
            text = _readable(binascii.a2b_base64(reading))
        except (binascii.Error, ValueError):
            continue
        if text is not None:
            return text
    return None


def _hex(blob: str) -> str | None:
    digits = re.sub(r"[^0-9A-Fa-f]", "", blob.removeprefix("0x"))
    if len(digits) % 2:
        return None
    try:
        return _readable(bytes.fromhex(digits))
    except ValueError:
        return None


def _escapes(blob: str) -> str | None:
    try:
        return _readable(blob.encode("ascii").decode("unicode_escape").encode("utf-8"))
    except (UnicodeDecodeError, UnicodeEncodeError):
        return None


_DECODERS: tuple[tuple[str, Callable[[str], str | None]], ...] = (
    ("base64", _b64),
    ("hex", _hex),
    ("url", lambda s: _readable(unquote(s).encode("utf-8"))),
    ("escape", _escapes),
    ("html", lambda s: _readable(html.unescape(s).encode("utf-8"))),
)


def _byte_mask(members: bytes) -> bytes:
    """A ``bytes.translate`` table: "x" for each of ``members``, "." for any other byte."""
    return bytes(ord("x") if c in members else ord(".") for c in range(256))


# the bytes of a text's ASCII view (``text.encode("ascii", "replace")``: one byte per
# character, "?" for each one beyond ASCII) a base64 blob is made of
_B64_MASK = _byte_mask(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-")
# those a hex blob may hold: hex digits, the "x" of "0x", the ASCII separators
# ``[\s:,]`` takes, and "?" (it may stand for a Unicode space; a real "?" widens a
# run, harmlessly)
_HEX_MASK = _byte_mask(bytes(c for c in range(128) if re.match(r"[0-9A-Fa-fx\s:,?]", chr(c))))
_HEX_DIGITS = _byte_mask(b"0123456789ABCDEFabcdef")
_RUN = b"x" * 16  # the shortest base64 or hex blob is 16 characters long


def _runs(mask: bytes) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each maximal run of 16 or more "x" in ``mask`` (a text's
    ASCII view translated by a ``_byte_mask``), found with ``bytes.find`` in C."""
    start = mask.find(_RUN)
    while start >= 0:
        end = mask.find(b".", start + len(_RUN))
        if end < 0:
            yield start, len(mask)
            return
        yield start, end
        start = mask.find(_RUN, end)


def _blobs(text: str) -> Iterator[tuple[int, int, int]]:
    """``(index in _DECODERS, start, end)`` for every match of the blob patterns: the
    spans ``finditer`` of each in turn gives, with ``re`` run only where a match can be.

    The base64 and hex patterns open with a look-behind, which leaves ``re`` no
    literal to skip ahead on: run over a whole text they were tried at every position
    (the base64 one was most of the cost of ``decode_payloads``). Their candidates are
    found instead as long runs of the characters they are made of, by C passes over
    the text's bytes. The same code runs with and without ``google-re2``."""
    if len(text) >= len(_RUN):
        # (the "replace" handler runs in C; ``proxy``'s calls Python once per run)
        data = text.encode("ascii", "replace")
        # a base64 blob is a whole maximal run of its characters (look-arounds on
        # both sides): only each run's start can start one, and a run without "=" is
        # one (``_B64`` would match all of it)
        for start, end in _runs(data.translate(_B64_MASK)):
            if data.find(b"=", start, end) < 0:
                yield 0, start, end
            elif (m := _B64.match(text, start)) is not None:
                yield 0, m.start(), m.end()
        # a hex blob lies inside a run of the characters it may hold; each run is
        # scanned with the one character after it, which the look-ahead reads (the
        # look-behind reads before ``pos`` anyway). The blob's runs of hex digits are
        # whole pairs (each starts after a non-alphanumeric, a separator or the "0x"),
        # so a run of k digits holds at most k // 2 of its 8 pairs or more: a run of
        # spaces, of other scripts, of "1, 2, 3" is skipped
        for start, end in _runs(data.translate(_HEX_MASK)):
            if data[start:end].translate(_HEX_DIGITS).count(b"xx") >= 8:
                for m in _HEX.finditer(text, start, end + 1):
                    yield 1, m.start(), m.end()
    # the others open with a literal: scanned from the first occurrence of its first
    # character (found with memchr: a longer string is searched for more slowly)
    for index, pattern, lead in ((2, _PERCENT, "%"), (3, _ESCAPES, "\\"), (4, _ENTITIES, "&")):
        start = text.find(lead)
        if start >= 0:
            for m in pattern.finditer(text, start):
                yield index, m.start(), m.end()


def decode_payloads(text: str) -> list[Decoded]:
    """Encoded blobs in ``text`` that decode to readable text (base64, hex, %xx, \\x, &#).

    Random identifiers, hashes and binary data decode to noise and are skipped.
    """
    found: list[Decoded] = []
    for index, start, end in _blobs(text):
        kind, decode = _DECODERS[index]
        out = decode(text[start:end].strip())
        if out is not None:
            found.append(Decoded(kind, out, start, end))
    return found


_TAG = re.compile("[\U000e0000-\U000e007f]")
_ZERO_WIDTH_IN_WORD = re.compile(r"\w[" + "".join(sorted(ZERO_WIDTH)) + r"]+\w")
# what ``_ZERO_WIDTH_IN_WORD`` cannot match without: looked for first (a pattern
# opening with ``\w`` is tried at every letter)
_ZERO_WIDTH_ANY = re.compile("[" + "".join(sorted(ZERO_WIDTH)) + "]")
_WORD_RUN = re.compile(r"\w+")
_LOOKALIKE = re.compile("[" + "".join(sorted(ch for ch in CONFUSABLES if ch.isalpha())) + "]")
# the characters each signal needs one of (a tag, a zero-width character or a
# look-alike): all beyond ASCII, so a text none of whose ``_slow_chars`` is one has
# no signal (most non-ASCII texts), told without reading the text again
_SMUGGLING_CHARS = frozenset(
    [*map(chr, range(0xE0000, 0xE0080)), *ZERO_WIDTH,
     *(ch for ch in CONFUSABLES if ch.isalpha())])


def smuggling_signals(text: str) -> list[str]:
    """Signs of deliberate obfuscation: invisible tag characters, zero-width characters
    inside words, words mixing Latin letters with Cyrillic or Greek look-alikes. (Every
    one of them is a non-ASCII character: an ASCII text has none.)"""
    signals: list[str] = []
    if text.isascii() or _SMUGGLING_CHARS.isdisjoint(_slow_chars(text)):
        return signals
    if _TAG.search(text):
        signals.append("unicode-tags")
    if _ZERO_WIDTH_ANY.search(text) and _ZERO_WIDTH_IN_WORD.search(text):
        signals.append("zero-width")
    # only a word holding a look-alike can mix one with Latin letters: each such word
    # (its run of word characters, found forward in the text and backward in the text
    # reversed) is read once, not every word of the text
    backward = ""
    checked = -1
    for found in _LOOKALIKE.finditer(text):
        at = found.start()
        if at < checked:
            continue  # in the word just read
        backward = backward or text[::-1]
        before = _WORD_RUN.match(backward, len(text) - 1 - at)
        after = _WORD_RUN.match(text, at)
        assert before is not None and after is not None  # a look-alike is a letter
        word = text[len(text) - before.end():after.end()]
        checked = after.end()
        if len(word) >= 3 and any("a" <= ch.lower() <= "z" for ch in word):
            signals.append("homoglyphs")
            break
    return signals


def views_for_matching(text: str, *, deep: bool = True,
                       skip: Callable[[View], Container[str]] | None = None,
                       engine: Engine = DEFAULT_ENGINE) -> Iterator[View]:
    """The base view, then each further view that differs from the ones before it.

    Args:
        text: The original text.
        deep: Also yield the squashed, ROT13 and reversed views.
        skip: Given the base view, the names of the deep views not to make ("squashed",
            "rot13", "reversed"): the caller knows none of its rules can match them.
        engine: The engine of the spelling view's look-up (``spellfix``).
    """
    base = fold(text)
    yield base
    # compared, not hashed: texts that differ do so in length or early on, equal ones
    # are compared by memcmp (a set hashed each view's text: ~1 % of an injection scan)
    seen = [base.text]

    def fresh(view: View) -> bool:
        if view.text in seen:
            return False
        seen.append(view.text)
        return True

    # each view made only once the one before it has been read (a caller reading in
    # steps holds the loop for one view's making, not all of them)
    joined = join_split(base)
    if fresh(joined):
        yield joined
    spelling = spellfix(joined, engine=engine)
    if fresh(spelling):
        yield spelling
    tokens = _leet_tokens(joined)
    leet_i = _leet_view(joined, tokens, "i")
    if fresh(leet_i):
        yield leet_i
    # the two leet readings differ only where a rewritten word holds a "1"
    if any("1" in core for _, _, core, _ in tokens):
        leet_l = _leet_view(joined, tokens, "l")
        if fresh(leet_l):
            yield leet_l
    if not deep:
        return
    unwanted = () if skip is None else skip(base)
    if "squashed" not in unwanted:
        yield squash(spelling)  # read by rules of its own: never the same as another
    for name, make in (("rot13", rot13), ("reversed", reverse)):
        if name not in unwanted:
            view = make(base)
            if fresh(view):
                yield view


# ".", "!" and "?" as newlines: a text's bytes translated by it split at every mark
_MARKS_AS_NEWLINES = bytes.maketrans(b".!?", b"\n\n\n")


@lru_cache(maxsize=16)
def _sentence_marks(text: str) -> list[int]:
    """The positions of the sentence marks (``.!?`` and newline) of ``text``, ascending:
    found by one split of the text's ``proxy`` (a byte per character) at the marks,
    turned into positions by sums in C (``re.finditer``'s match object and a Python
    step per mark took ~2x as long)."""
    parts = proxy(text).translate(_MARKS_AS_NEWLINES).split(b"\n")
    # mark k ends part k: it stands after the k + 1 parts before it and the k marks
    return list(map(operator.add, accumulate(map(len, parts[:-1])), range(len(parts) - 1)))


def sentence_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """The sentence around ``text[start:end]``: ``(left, mark)``, where ``left`` is just
    past the last ``.!?`` or newline before ``start`` and ``mark`` the index of the first
    one at or after ``end`` (``len(text)`` when there is none). O(log n) per call; the
    marks of a text are found once and cached."""
    marks = _sentence_marks(text)
    i = bisect_left(marks, start)
    left = marks[i - 1] + 1 if i else 0
    j = bisect_left(marks, end, lo=i)
    return left, (marks[j] if j < len(marks) else len(text))


_BIDI_AND_INVISIBLE = frozenset("\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e\u061c"
                                "\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                                "\u2066\u2067\u2068\u2069")
_CONFUSABLE_PUNCT = {"\u3002": ".", "\uff61": ".", "\u2024": ".", "\u0701": ".",
                     "\u2022": ".", "\ufe6b": "@", "\uff20": "@", "\uff0e": ".",
                     "\ufe52": "."}


@lru_cache(maxsize=4096)
def _normal_char(ch: str) -> str:
    if ch in _BIDI_AND_INVISIBLE:
        return ""
    if ch in _CONFUSABLE_PUNCT:
        return _CONFUSABLE_PUNCT[ch]
    category = unicodedata.category(ch)
    if category == "Zs":
        return " "
    if category == "Nd":
        return str(unicodedata.decimal(ch))
    if category == "Cf":
        return ""
    if category[0] in "PS":  # CJK punctuation ("，", "："...) is kept: rules read it
        return ch
    folded = unicodedata.normalize("NFKC", ch)
    return "".join(str(unicodedata.decimal(c)) if unicodedata.category(c) == "Nd" else c
                   for c in folded)


_NON_ASCII = re.compile(r"[^\x00-\x7f][^\x00-\x7f]*")
r"""A run of non-ASCII characters, written as one class and its repetition: ``re`` then
skips ahead to the class at C speed, where ``[^\x00-\x7f]+`` is tried at every
character (0.085 -> 0.038 ms on a 10 KB text; the same matches)."""


def normalise(text: str) -> View:
    """The view the PII rules read: NFKC, zero-width and bidi controls removed, no-break
    and other Unicode spaces as " ", every Unicode decimal digit as its ASCII digit,
    confusable "@" and "." (full-width, ideographic) as ASCII. Case is kept. A text the
    normalisation leaves as it is (every ASCII text) is returned as is: an identity
    view, no copy of the characters. ASCII runs are copied whole; only the other
    characters are looked at one by one (each character's reading is cached). When
    each of them reads as one character (a no-break space, a full-width "＠", an
    Arabic-Indic digit: the usual case), every index is kept: the view's spans are
    ranges, which a caller maps with no look-up (see ``View.keeps_indices``)."""
    if text.isascii():
        return View("normalised", text, range(len(text)), range(1, len(text) + 1))
    runs = [m.span() for m in _NON_ASCII.finditer(text)]
    if all(_normal_char(ch) == ch for a, b in runs for ch in text[a:b]):
        return View("normalised", text, range(len(text)), range(1, len(text) + 1))
    chars: list[str] = []
    marks: list[int] = []  # where each run of the view starts
    slopes: list[int] = []  # 1: an ASCII run, copied; 0: one character's reading
    bases: list[int] = []
    size = pos = 0
    one_for_one = True
    for start, end in runs:
        if start > pos:
            chars.append(text[pos:start])
            marks.append(size)
            slopes.append(1)
            bases.append(pos - size)
            size += start - pos
        for i in range(start, end):
            out = _normal_char(text[i])
            one_for_one = one_for_one and len(out) == 1
            if out:
                chars.append(out)
                marks.append(size)
                slopes.append(0)
                bases.append(i)
                size += len(out)
        pos = end
    if pos < len(text):
        chars.append(text[pos:])
        marks.append(size)
        slopes.append(1)
        bases.append(pos - size)
        size += len(text) - pos
    if one_for_one:
        return View("normalised", "".join(chars), range(size), range(1, size + 1))
    return View("normalised", "".join(chars), _Runs(marks, slopes, bases, 0, size),
                _Runs(marks, slopes, bases, 1, size))


class _RunTable(Sequence[int]):
    """Span entries of a view made of runs, found by bisection (no array of one entry
    per character to fill): in the run starting at view index ``marks[k]``, character
    ``v`` has entry ``_at(k, v)``, from ``slopes[k] * v + bases[k]``."""

    __slots__ = ("_bases", "_marks", "_size", "_slopes")

    def __init__(self, marks: list[int], slopes: list[int], bases: list[int],
                 size: int) -> None:
        self._marks, self._slopes, self._bases, self._size = marks, slopes, bases, size

    def _at(self, k: int, index: int) -> int:
        raise NotImplementedError

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> list[int]: ...

    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._size))]
        if index < 0:
            index += self._size
        if not 0 <= index < self._size:
            raise IndexError(index)
        return self._at(bisect_right(self._marks, index) - 1, index)


class _Runs(_RunTable):
    """The source indices of a view each of whose characters comes from one character
    of the text (``normalise``, ``fold`` and their reversed views): ``slopes[k] * v +
    bases[k]``, plus ``plus`` (0 for the starts, 1 for the ends)."""

    __slots__ = ("_plus",)

    def __init__(self, marks: list[int], slopes: list[int], bases: list[int], plus: int,
                 size: int) -> None:
        super().__init__(marks, slopes, bases, size)
        self._plus = plus

    def _at(self, k: int, index: int) -> int:
        return self._slopes[k] * index + self._bases[k] + self._plus

    def span(self, first: int, last: int) -> tuple[int, int]:
        """``(min(self[first], self[last]), max(self[first], self[last]) + 1)`` for the
        starts of a view by runs (whose ends are the same runs plus one): its
        ``View.span``, in two bisections instead of four item look-ups (a text full
        of PII maps hundreds of spans). Indices in range."""
        marks, slopes, bases = self._marks, self._slopes, self._bases
        k = bisect_right(marks, first) - 1
        a = slopes[k] * first + bases[k] + self._plus
        k = bisect_right(marks, last) - 1
        b = slopes[k] * last + bases[k] + self._plus
        return (a, b + 1) if a <= b else (b, a + 1)

    def reversed(self, plus: int) -> _Runs:
        """These runs read backwards, plus ``plus`` (the starts or the ends of the
        reversed view): its character ``w`` is character ``size - 1 - w`` here, which in
        run ``k`` reads ``-slopes[k] * w + slopes[k] * (size - 1) + bases[k]``. Empty
        runs are left out."""
        size = self._size
        marks: list[int] = []
        slopes: list[int] = []
        bases: list[int] = []
        end = size
        for mark, slope, base in zip(self._marks[::-1], self._slopes[::-1], self._bases[::-1],
                                     strict=True):
            if mark < end:
                marks.append(size - end)
                slopes.append(-slope)
                bases.append(slope * (size - 1) + base)
                end = mark
        return _Runs(marks, slopes, bases, plus, size)


class _Mapped(_RunTable):
    """The spans of a view read through a map of its runs onto the view it came from:
    character ``v`` of run ``k`` has the span entry ``source[slopes[k] * v + bases[k]]``
    (one entry per run, not per character)."""

    __slots__ = ("_source",)

    def __init__(self, marks: list[int], slopes: list[int], bases: list[int], size: int,
                 source: Sequence[int]) -> None:
        super().__init__(marks, slopes, bases, size)
        # the source's own deferred spans are made now (every lookup reads them)
        self._source = source._resolve() if isinstance(source, _LazyIndex) else source

    def _at(self, k: int, index: int) -> int:
        return self._source[self._slopes[k] * index + self._bases[k]]

    def span(self, ends: _Mapped, first: int, last: int) -> tuple[int, int]:
        """``View.span(first, last + 1)`` of the view whose starts these are and whose
        ends are ``ends``: with two bisections when the two share their runs (as every
        pair made here does), not one per item looked up. Indices in range."""
        marks, slopes = self._marks, self._slopes
        if ends._marks is not marks or ends._slopes is not slopes:
            return (min(self[first], self[last]), max(ends[first], ends[last]))
        k = bisect_right(marks, first) - 1
        j = bisect_right(marks, last) - 1
        source, bases = self._source, self._bases
        a, b = source[slopes[k] * first + bases[k]], source[slopes[j] * last + bases[j]]
        source, bases = ends._source, ends._bases
        c, d = source[slopes[k] * first + bases[k]], source[slopes[j] * last + bases[j]]
        return (a if a <= b else b, d if d >= c else c)

