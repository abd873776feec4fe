"""A parser for Python regular expressions, for reading the guards' rule patterns.

The text engine reads each rule pattern's tree to learn what a match must contain
(``_literals``), what it can start with (``_anchors``) and how to write it for RE2
(``_prefilter``). ``parse`` turns a pattern already compiled by ``re`` into a tree of
frozen nodes: a pattern is a ``Seq`` (a tuple of nodes), and each node is one of
``Char``, ``NotChar``, ``CharClass``, ``AnyChar``, ``At``, ``Look``, ``Branch``,
``Group``, ``Atomic``, ``Repeat``, ``Backref`` or ``Conditional``.

It reads Python's syntax (the whole of it that ``re`` accepts for ``str`` patterns)
and shapes the tree the way ``re`` itself does, so what the readers learn holds for
the compiled pattern:

- a non-capturing group without flags is spliced into the sequence around it (and a
  repeated one repeats its body);
- a character class of one character is that character (``[^x]``: ``NotChar``);
- alternatives that all start with the same simple item have it taken out in front
  (``ab|ac`` is ``a(?:b|c)``), and alternatives of one character each become a class.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

__all__ = [
    "AnyChar",
    "At",
    "Atomic",
    "Backref",
    "Branch",
    "Category",
    "Char",
    "CharClass",
    "ClassItem",
    "Conditional",
    "Group",
    "Look",
    "Node",
    "NotChar",
    "Range",
    "Repeat",
    "Seq",
    "parse",
]


@dataclass(frozen=True, slots=True)
class Char:
    """One character (its code point)."""

    code: int


@dataclass(frozen=True, slots=True)
class NotChar:
    """Any character but one (``[^x]``)."""

    code: int


@dataclass(frozen=True, slots=True)
class Range:
    """A range of a character class, ``lo`` to ``hi`` inclusive (code points)."""

    lo: int
    hi: int


CategoryName = Literal["digit", "not_digit", "space", "not_space", "word", "not_word"]


@dataclass(frozen=True, slots=True)
class Category:
    """``\\d``, ``\\D``, ``\\s``, ``\\S``, ``\\w``, ``\\W`` inside a class."""

    name: CategoryName


ClassItem = Char | Range | Category


@dataclass(frozen=True, slots=True)
class CharClass:
    """A character class (``\\d`` outside a class is a class of one category)."""

    items: tuple[ClassItem, ...]
    negate: bool = False


@dataclass(frozen=True, slots=True)
class AnyChar:
    """``.``"""


AtName = Literal["start", "start_string", "end", "end_string", "boundary", "non_boundary"]


@dataclass(frozen=True, slots=True)
class At:
    """A zero-width position: ``^`` (start), ``\\A`` (start_string), ``$`` (end),
    ``\\Z`` (end_string), ``\\b`` (boundary), ``\\B`` (non_boundary)."""

    where: AtName


@dataclass(frozen=True, slots=True)
class Look:
    """A look-around: ``(?=...)``, ``(?!...)`` and, with ``behind``, ``(?<=...)``,
    ``(?<!...)``."""

    behind: bool
    negate: bool
    body: Seq


@dataclass(frozen=True, slots=True)
class Branch:
    """Alternatives (``a|b``)."""

    alternatives: tuple[Seq, ...]


@dataclass(frozen=True, slots=True)
class Group:
    """A group: capturing (``index``, from 1) or one with local flags (``(?i:...)``)."""

    index: int | None
    add_flags: int
    del_flags: int
    body: Seq


@dataclass(frozen=True, slots=True)
class Atomic:
    """``(?>...)``"""

    body: Seq


@dataclass(frozen=True, slots=True)
class Repeat:
    """``body`` ``lo`` to ``hi`` times (``hi`` ``None``: no upper bound)."""

    lo: int
    hi: int | None
    mode: Literal["greedy", "lazy", "possessive"]
    body: Seq


@dataclass(frozen=True, slots=True)
class Backref:
    """``\\1`` or ``(?P=name)``: what group ``group`` matched."""

    group: int


@dataclass(frozen=True, slots=True)
class Conditional:
    """``(?(1)yes|no)``"""

    group: int
    yes: Seq
    no: Seq | None


Node = (Char | NotChar | CharClass | AnyChar | At | Look | Branch | Group | Atomic | Repeat
        | Backref | Conditional)
Seq = tuple[Node, ...]

# items taken out in front of alternatives when all start with one (``re`` compares
# the others by identity, so it never takes them out)
_SIMPLE = (Char, NotChar, CharClass, AnyChar, At, Backref)
_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92}
_CATEGORIES: dict[str, CategoryName] = {
    "d": "digit", "D": "not_digit", "s": "space", "S": "not_space", "w": "word",
    "W": "not_word"}
_POSITIONS: dict[str, AtName] = {"A": "start_string", "b": "boundary", "B": "non_boundary",
                                 "Z": "end_string"}
_FLAGS = {"a": re.ASCII, "i": re.IGNORECASE, "L": re.LOCALE, "m": re.MULTILINE,
          "s": re.DOTALL, "u": re.UNICODE, "x": re.VERBOSE}
_SPECIAL = ".\\[{()*+?^$|"


class _Source:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.groups = 0
        self.names: dict[str, int] = {}

    def peek(self) -> str | None:
        return self.text[self.pos] if self.pos < len(self.text) else None

    def get(self) -> str:
        if self.pos >= len(self.text):
            raise ValueError(f"unexpected end of pattern {self.text!r}")
        ch = self.text[self.pos]
        self.pos += 1
        return ch

    def match(self, s: str) -> bool:
        if self.text.startswith(s, self.pos):
            self.pos += len(s)
            return True
        return False

    def until(self, end: str) -> str:
        at = self.text.index(end, self.pos)
        out = self.text[self.pos:at]
        self.pos = at + 1
        return out


def parse(pattern: re.Pattern[str]) -> Seq:
    """The tree of a compiled ``str`` pattern.

    Args:
        pattern: A pattern compiled by ``re`` (so known valid); its flags (including
            inline global ones such as a leading ``(?i)``) stay on ``pattern.flags``.

    Returns:
        The top-level sequence.

    Raises:
        ValueError: A construct this parser does not know.
    """
    return _parse(pattern.pattern, pattern.flags)


@lru_cache(maxsize=4096)
def _parse(text: str, flags: int) -> Seq:
    # the engine reads each rule pattern three times (literals, anchors, RE2 form),
    # and the tree is immutable: parsed once
    source = _Source(text)
    out = _alternation(source, bool(flags & re.VERBOSE))
    if source.peek() is not None:
        raise ValueError(f"unbalanced parenthesis in {text!r}")
    return out


def _alternation(source: _Source, verbose: bool) -> Seq:
    alternatives = [_sequence(source, verbose)]
    while source.match("|"):
        alternatives.append(_sequence(source, verbose))
    if len(alternatives) == 1:
        return tuple(alternatives[0])
    prefix: list[Node] = []
    while all(alt and isinstance(alt[0], _SIMPLE) for alt in alternatives) \
            and all(alt[0] == alternatives[0][0] for alt in alternatives):
        prefix.append(alternatives[0][0])
        alternatives = [alt[1:] for alt in alternatives]
    members: list[ClassItem] = []
    for alt in alternatives:
        if len(alt) != 1:
            break
        node = alt[0]
        if isinstance(node, Char):
            members.append(node)
        elif isinstance(node, CharClass) and not node.negate:
            members.extend(node.items)
        else:
            break
    else:
        return (*prefix, CharClass(tuple(dict.fromkeys(members))))
    return (*prefix, Branch(tuple(tuple(alt) for alt in alternatives)))


def _sequence(source: _Source, verbose: bool) -> list[Node]:
    items: list[Node] = []
    while (ch := source.peek()) is not None and ch not in "|)":
        source.get()
        if verbose and ch in " \t\n\r\v\f":
            continue
        if verbose and ch == "#":
            while (c := source.peek()) is not None and c != "\n":
                source.get()
            continue
        if ch == "\\":
            items.append(_escape(source, source.get()))
        elif ch not in _SPECIAL:
            items.append(Char(ord(ch)))
        elif ch == "[":
            items.append(_class(source))
        elif ch in "*+?{":
            if not _repeat(source, ch, items):
                items.append(Char(ord(ch)))
        elif ch == ".":
            items.append(AnyChar())
        elif ch == "^":
            items.append(At("start"))
        elif ch == "$":
            items.append(At("end"))
        elif ch == "(":
            node = _group(source, verbose)
            if node is not None:
                items.append(node)
    out: list[Node] = []
    for node in items:  # non-capturing groups without flags are spliced in
        if isinstance(node, Group) and node.index is None and not node.add_flags \
                and not node.del_flags:
            out.extend(node.body)
        else:
            out.append(node)
    return out


def _repeat(source: _Source, ch: str, items: list[Node]) -> bool:
    """Replace the last item by its repetition; ``False`` when ``{`` is a literal."""
    lo, hi = {"?": (0, 1), "*": (0, None), "+": (1, None)}.get(ch, (0, None))
    if ch == "{":
        start = source.pos
        low = _digits(source)
        high = _digits(source) if source.match(",") else low
        if source.peek() == "}" and (start != source.pos or source.text[start] == ","):
            source.get()
        else:
            source.pos = start
            return False
        lo = int(low) if low else 0
        hi = int(high) if high else None
    if not items:
        raise ValueError("nothing to repeat")
    last = items.pop()
    body: Seq = (last.body if isinstance(last, Group) and last.index is None
                 and not last.add_flags and not last.del_flags else (last,))
    mode: Literal["greedy", "lazy", "possessive"] = (
        "lazy" if source.match("?") else "possessive" if source.match("+") else "greedy")
    items.append(Repeat(lo, hi, mode, body))
    return True


def _digits(source: _Source) -> str:
    out = ""
    while (c := source.peek()) is not None and c in "0123456789":
        out += source.get()
    return out


def _group(source: _Source, verbose: bool) -> Node | None:
    index: int | None = None
    add = remove = 0
    atomic = False
    if source.match("?"):
        ch = source.get()
        if ch == "P" and source.match("<"):
            index = _open(source, source.until(">"))
        elif ch == "P" and source.match("="):
            return Backref(source.names[source.until(")")])
        elif ch == "#":
            source.until(")")
            return None
        elif ch in "=!" or (ch == "<" and source.peek() in ("=", "!")):
            behind = ch == "<"
            negate = (source.get() if behind else ch) == "!"
            body = _alternation(source, verbose)
            _close(source)
            return Look(behind, negate, body)
        elif ch == "(":
            name = source.until(")")
            group = int(name) if name.isdecimal() else source.names[name]
            yes = tuple(_sequence(source, verbose))
            no = tuple(_sequence(source, verbose)) if source.match("|") else None
            _close(source)
            return Conditional(group, yes, no)
        elif ch == ">":
            atomic = True
        elif ch != ":":
            add, remove, scoped = _flags(source, ch)
            if not scoped:
                return None  # global flags: already on the compiled pattern
            if add & re.VERBOSE:
                verbose = True
            if remove & re.VERBOSE:
                verbose = False
    else:
        index = _open(source, None)
    body = _alternation(source, verbose)
    _close(source)
    return Atomic(body) if atomic else Group(index, add, remove, body)


def _open(source: _Source, name: str | None) -> int:
    source.groups += 1
    if name is not None:
        source.names[name] = source.groups
    return source.groups


def _close(source: _Source) -> None:
    if not source.match(")"):
        raise ValueError(f"missing ) in {source.text!r}")


def _flags(source: _Source, ch: str) -> tuple[int, int, bool]:
    """``(added, removed, scoped)`` of ``(?flags)`` / ``(?flags-flags:...)``, read
    from its first flag character ``ch``."""
    add = remove = 0
    while ch not in ":)-":
        add |= _FLAGS[ch]
        ch = source.get()
    if ch == ")":
        return add, 0, False
    if ch == "-":
        ch = source.get()
        while ch != ":":
            remove |= _FLAGS[ch]
            ch = source.get()
    return add, remove, True


def _escape(source: _Source, ch: str) -> Node:
    if ch in _POSITIONS:
        return At(_POSITIONS[ch])
    if ch in _CATEGORIES:
        return CharClass((Category(_CATEGORIES[ch]),))
    if ch in "123456789":
        digits = ch
        if (c := source.peek()) is not None and c.isdecimal() and c.isascii():
            digits += source.get()
            if (digits[0] in "01234567" and digits[1] in "01234567"
                    and (c := source.peek()) is not None and c in "01234567"):
                return Char(int(digits + source.get(), 8))
        return Backref(int(digits))
    return Char(_code(source, ch, in_class=False))


def _code(source: _Source, ch: str, *, in_class: bool) -> int:
    """The character of an escape (after the backslash) that stands for one."""
    if ch in _ESCAPES:
        return _ESCAPES[ch]
    width = {"x": 2, "u": 4, "U": 8}.get(ch)
    if width is not None:
        hexa = source.text[source.pos:source.pos + width]
        source.pos += width
        return int(hexa, 16)
    if ch == "N":
        source.match("{")
        return ord(unicodedata.lookup(source.until("}")))
    if ch == "0" or (in_class and ch in "01234567"):
        digits = ch
        while len(digits) < 3 and (c := source.peek()) is not None and c in "01234567":
            digits += source.get()
        return int(digits, 8)
    if ch.isascii() and ch.isalnum():
        raise ValueError(f"bad escape \\{ch}")
    return ord(ch)


def _class(source: _Source) -> Node:
    negate = source.match("^")
    items: list[ClassItem] = []
    while True:
        ch = source.get()
        if ch == "]" and items:
            break
        first = _class_item(source, ch)
        if source.match("-"):
            ch = source.get()
            if ch == "]":
                items += [first, Char(ord("-"))]
                break
            last = _class_item(source, ch)
            if not isinstance(first, Char) or not isinstance(last, Char):
                raise ValueError("bad character range")
            items.append(Range(first.code, last.code))
        else:
            items.append(first)
    unique = tuple(dict.fromkeys(items))
    if len(unique) == 1 and isinstance(unique[0], Char):
        return NotChar(unique[0].code) if negate else unique[0]
    return CharClass(unique, negate)


def _class_item(source: _Source, ch: str) -> Char | Category:
    if ch != "\\":
        return Char(ord(ch))
    ch = source.get()
    if ch in _CATEGORIES:
        return Category(_CATEGORIES[ch])
    return Char(_code(source, ch, in_class=True))
