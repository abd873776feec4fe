"""Context words found at C speed: a literal scan of a lower-cased view finds where a
case-insensitive pattern of words can start, and the pattern is tried there only.

Standard library only, so ``procflow._secrets`` (which sits at the bottom of the
package) and the PII rules share it.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from functools import lru_cache

__all__ = ["word_matches", "word_starts"]


def word_starts(*words: str) -> tuple[str, ...]:
    """The literal words (lower case, starting with a letter) that ``word_matches``
    looks for where a word starts."""
    return words


def _word_positions(lower: str, words: tuple[str, ...], pos: int, endpos: int) -> list[int]:
    """Where one of ``words`` starts a word in ``lower[pos:endpos]``, in order: a
    ``str.find`` pass per word (C speed), each place kept when no word character comes
    just before it."""
    found: set[int] = set()
    for word in words:
        at = lower.find(word, pos, endpos)
        while at >= 0:
            if not at or not (lower[at - 1].isalnum() or lower[at - 1] == "_"):
                found.add(at)
            at = lower.find(word, at + 1, endpos)
    return sorted(found)


# Non-ASCII letters a case-insensitive ASCII letter matches ("K" Kelvin sign, long s,
# dotless i, dotted capital I): with one of them about, scan in full.
_CASE_SPECIAL = ("\u212a", "\u017f", "\u0131", "\u0130")


def _as_ascii(error: UnicodeError) -> tuple[str, int]:
    """The encoding error handler of ``_ascii_lower``: each character of a run of
    non-ASCII characters as "x" if a word character else " " (one call per run, the
    ASCII between them copied at C speed)."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    run = error.object[error.start:error.end]
    return "".join("x" if ch.isalnum() or ch == "_" else " " for ch in run), error.end


codecs.register_error("procflow.wordscan", _as_ascii)


@lru_cache(maxsize=4)
def _ascii_lower(text: str) -> str | None:
    """``text`` lower-cased, every non-ASCII character as "x" if a word character else
    " " (the same length), made once per text for all the patterns; ``None`` when a
    letter of ``_CASE_SPECIAL`` is in it."""
    if text.isascii():
        return text.lower()
    if any(ch in text for ch in _CASE_SPECIAL):
        return None
    return text.encode("ascii", "procflow.wordscan").decode("ascii").lower()


def word_matches(pattern: re.Pattern[str], starts: tuple[str, ...], text: str,
                 non_ascii: str = "") -> Iterator[re.Match[str]]:
    """``pattern.finditer(text)`` for a case-insensitive pattern of context words, none of
    whose matches spans a line break.

    ``starts`` (plain literals, none holding a place where a match may start, found
    with ``str.find`` in the lower-cased text, every other character as "x" if a word
    character else " ", where they start a word) gives every place a match can start,
    at C speed; the pattern (whose every ASCII alternative starts at a word boundary)
    is tried there only, in order and never inside its previous match: the same
    matches. The lines holding one of the
    characters ``non_ascii`` (those the pattern's non-ASCII alternatives start with, or
    hold where the view would hide them) are scanned in full (no match crosses a line
    break, so a line's matches are the same alone), and a text holding a letter of
    ``_CASE_SPECIAL`` is scanned in full.
    """
    lower = _ascii_lower(text)
    if lower is None:
        yield from pattern.finditer(text)
        return
    full = _rare_lines(text, non_ascii) if non_ascii and not text.isascii() else []
    end = 0
    pos = 0
    for line_start, line_end in [*full, (len(text), len(text))]:
        for at in _word_positions(lower, starts, pos, line_start):
            if at < end:
                continue
            m = pattern.match(text, at)
            if m is not None:
                yield m
                end = m.end()
        for m in pattern.finditer(text, line_start, line_end):
            yield m
            end = m.end()
        pos = line_end


def _rare_lines(text: str, chars: str) -> list[tuple[int, int]]:
    """The lines of ``text`` (start, end before the line break) holding one of ``chars``,
    in order."""
    lines: set[tuple[int, int]] = set()
    for ch in chars:
        i = text.find(ch)
        while i >= 0:
            start = text.rfind("\n", 0, i) + 1
            end = text.find("\n", i)
            if end < 0:
                end = len(text)
            lines.add((start, end))
            i = text.find(ch, end)
    return sorted(lines)
