"""Where a ``stream_window`` guard cuts held stream text (shared by the built-ins)."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["hold_tail", "word_start"]


def word_start(text: str, i: int) -> int:
    """``i`` moved back to the start of the word it falls in."""
    i = max(min(i, len(text)), 0)
    while i > 0 and not text[i - 1].isspace():
        i -= 1
    return i


def hold_tail(text: str, span: int, matches: Iterable[tuple[int, int]]) -> int:
    """How many trailing characters of ``text`` to hold back: the last ``span``
    characters, moved back to the start of their word and of any match that reaches
    past the cut (or to the end of ``text``: it may still grow)."""
    n = len(text)
    cut = word_start(text, n - span)
    found = list(matches)
    moved = True
    while moved and cut > 0:
        moved = False
        for start, end in found:
            if start < cut < end or (end == n and start < cut):
                cut = word_start(text, start)
                moved = True
    return n - cut
