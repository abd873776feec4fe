"""Rules for the "date-of-birth" PII type.

A date is only a date of birth when a word says so: "born", "DOB", "date of birth",
"birthday" (and their French, German, Spanish, Italian, Chinese and Japanese forms)
must come shortly before it on the same line, with no other number in between. The
date itself may be ISO (1987-03-14), numeric day-first or month-first (14/03/1987,
03-14-87, 14.03.1987), written out ("14 March 1987", "March 14th, 1987", "14 de marzo de
1987") or CJK (1987年3月14日); it must be a real calendar day between 1900 and today, and it may
not be the date part of a timestamp.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import date

from procflow._wordscan import word_matches, word_starts
from procflow.processors.builtin._detection import PIIDetection
from procflow.processors.builtin.pii.checks import plausible_birth_date

__all__ = ["MONTHS", "find_birth_dates", "word_matches", "word_starts"]

#: Month name (lower case, English/French/German/Spanish/Italian) -> month number.
_MONTH_NAMES = (
    "january jan janvier januar jänner enero gennaio",
    "february feb février fevrier februar febrero febbraio",
    "march mar mars märz maerz marzo",
    "april apr avril abril aprile",
    "may mai mayo maggio",
    "june jun juin juni junio giugno",
    "july jul juillet juli julio luglio",
    "august aug août aout agosto",
    "september sep sept septembre septiembre settembre",
    "october oct octobre oktober octubre ottobre",
    "november nov novembre noviembre",
    "december dec décembre decembre dezember diciembre dicembre",
)
MONTHS: dict[str, int] = {name: number for number, names in enumerate(_MONTH_NAMES, start=1)
                          for name in names.split()}
"""Month name (lower case, English/French/German/Spanish/Italian) -> month number."""

_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_DATE = re.compile(
    r"(?<![\w/.:-])(?:"
    r"(?P<iy>\d{4})[-/.](?P<im>\d{1,2})[-/.](?P<id>\d{1,2})"
    r"|(?P<na>\d{1,2})[-/.](?P<nb>\d{1,2})[-/.](?P<ny>\d{4}|\d{2})"
    r"|(?P<wd>\d{1,2})(?:st|nd|rd|th|er)?\.?\s+(?:of\s+|de\s+)?(?P<wm>" + _MONTH + r")\.?,?"
    r"\s+(?:de\s+|del\s+)?(?P<wy>\d{4})"
    r"|(?P<vm>" + _MONTH + r")\.?\s+(?P<vd>\d{1,2})(?:st|nd|rd|th)?,?\s+(?P<vy>\d{4})"
    r"|(?P<cy>\d{4})\s*年\s*(?P<cm>\d{1,2})\s*月\s*(?P<cd>\d{1,2})\s*日"
    r")(?![\w])(?![/.:-]\d)(?!T\d)", re.IGNORECASE)
_BIRTH_WORD = re.compile(
    r"(?i)(?:\b(?:born|dob|date of birth|birth ?date|birthday|b-day|geboren|geburtsdatum|"
    r"geburtstag|née?|naissance|date de naissance|fecha de nacimiento|nacimiento|"
    r"nacid[oa]|data di nascita|nat[oa]|cumpleaños)\b|\bd\.o\.b\.?|出生日期|出生|生日|"
    r"生年月日|誕生日)")
_WINDOW = 40


def _year(text: str) -> int:
    year = int(text)
    if len(text) == 2:
        year += 1900 if year > date.today().year % 100 else 2000
    return year


def _ymd(m: re.Match[str]) -> tuple[int, int, int] | None:
    g = m.groupdict()
    if g["iy"]:
        return int(g["iy"]), int(g["im"]), int(g["id"])
    if g["ny"]:
        year, a, b = _year(g["ny"]), int(g["na"]), int(g["nb"])
        # Day-first unless that is impossible; either reading is a birth date.
        return (year, b, a) if b <= 12 else (year, a, b)
    if g["wy"]:
        return int(g["wy"]), MONTHS[g["wm"].lower()], int(g["wd"])
    if g["vy"]:
        return int(g["vy"]), MONTHS[g["vm"].lower()], int(g["vd"])
    if g["cy"]:
        return int(g["cy"]), int(g["cm"]), int(g["cd"])
    return None


_BIRTH_STARTS = word_starts("born", "dob", "date", "data", "birth", "b-", "geb", "naissance",
                            "fecha", "nac", "nat", "d.")
"""In an ASCII text (lower-cased), every match of ``_BIRTH_WORD`` starts where one of
these does (see ``word_matches``)."""


def find_birth_dates(text: str) -> Iterator[PIIDetection]:
    """Dates introduced as a birth date in ``text``."""
    seen: set[int] = set()
    for word in word_matches(_BIRTH_WORD, _BIRTH_STARTS, text, "éÉñÑ出生誕"):
        limit = min(len(text), word.end() + _WINDOW)
        m = _DATE.search(text, word.end(), limit + 30)
        if m is None or m.start() > limit or m.start() in seen:
            continue
        gap = text[word.end():m.start()]
        if "\n" in gap or any(ch.isdigit() for ch in gap):
            continue
        ymd = _ymd(m)
        if ymd is None or not plausible_birth_date(*ymd):
            continue
        seen.add(m.start())
        yield PIIDetection("date-of-birth", m.start(), m.end(), m.group(), 0.85)
