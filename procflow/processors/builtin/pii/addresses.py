"""Postal addresses for the opt-in "address" PII type, offline.

- US/UK street lines: a house number (``221B``, ``12-14``, ``1 1/2``), an optional
  direction (N, SW, North), one to four capitalised words or ordinals ("Baker",
  "5th", "Martin Luther King Jr") and a street suffix (Street, Ave, Rd, Blvd, Lane,
  Way, Court, Pkwy, Hwy...), then optionally a direction (NW), a unit (Apt 4B,
  Suite 200, Unit 7, Floor 3, #12), a city, a state code and ZIP or a UK postcode,
  on the same line or the next one. Lower-case street words count only after an
  address cue ("I live at", "ship to", "address:").
- PO boxes: "P.O. Box 1234", "PO Box 12", "Post Office Box 9", with the same
  optional city/state/ZIP.
- German "Hauptstraße 12, 10115 Berlin", French "12 rue de la Paix, 75002 Paris",
  Chinese "...道123號".

Confidence: 0.9 with a unit, city, ZIP or postcode (or a PO box), 0.8 after a cue,
0.75 for a bare "number + name + suffix". Not reported: a number introduced as
something else ("top 10 Park Avenue restaurants", "chapter 3", "route 66"), and a
city, state or ZIP alone (a place is not an address).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from procflow.processors.builtin._detection import PIIDetection

__all__ = ["find_addresses"]

_SUFFIX = (
    r"(?:Street|St|Avenue|Ave|Av|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Court|Ct|Way|"
    r"Place|Pl|Terrace|Ter|Parkway|Pkwy|Highway|Hwy|Circle|Cir|Square|Sq|Close|Crescent|"
    r"Cres|Row|Trail|Trl|Gardens|Mews|Hill|Loop|Alley|Aly|Pike|Plaza|Plz|Point|Pt|"
    r"Ridge|Path|Walk|Expressway|Expy|Freeway|Fwy|Turnpike|Tpke|Grove|Cove|Crossing|"
    r"Xing|Green|Heights|Hts|Landing|Run|Broadway)")
_DIRECTION = r"(?:[NSEW]|NE|NW|SE|SW|North|South|East|West)\.?"
_NUMBER = r"(?<![\w.,/$#-])[1-9]\d{0,5}(?:[A-Za-z](?![\w'])|-\d{1,4}|[ \t]1/2)?"
_CAP_WORD = r"(?:[A-Z][A-Za-z'’.-]*|\d{1,3}(?:st|nd|rd|th))"
_LOW_WORD = r"(?:[A-Za-z][A-Za-z'’.-]*|\d{1,3}(?:st|nd|rd|th))"
_UNIT_WORD = r"(?:Apt|Apartment|Suite|Ste|Unit|Flat|Floor|Fl|Room|Rm|Bldg|Building|Dept|#)"
_UNIT = r",?[ \t]+" + _UNIT_WORD + r"\.?[ \t]*#?[A-Za-z0-9-]{1,6}\b"
_UNIT_ANY_CASE = r",?[ \t]+(?i:" + _UNIT_WORD + r")\.?[ \t]*#?[A-Za-z0-9-]{1,6}\b"
_CITY = r"[A-Z][a-z][A-Za-z'.-]*(?:[ \t]+[A-Z][a-z][A-Za-z'.-]*){0,2}"
_STATE = (r"(?:A[LKZR]|C[AOT]|D[EC]|FL|GA|HI|I[ADLN]|K[SY]|LA|M[EDAINSOT]|N[EVHJMYCD]|"
          r"O[HKR]|PA|RI|S[CD]|T[NX]|UT|V[TA]|W[AVIY]|PR|GU|VI)")
_ZIP = r"\d{5}(?:-\d{4})?"
_UK_POSTCODE = r"[A-Z]{1,2}\d[A-Z\d]?[ \t]\d[A-Z]{2}"
_STATE_ZIP = r"(?:,?[ \t]+" + _STATE + r"[ \t]+" + _ZIP + r"|,?[ \t]+" + _UK_POSTCODE + r")"
# ", City[, ST][ ZIP]" on the same line, "City, ST ZIP" on the next, or "ST ZIP" alone.
_TAIL = (r",[ \t]*" + _CITY + r"(?:,?[ \t]+" + _STATE + r"(?![\w]))?(?:,?[ \t]+(?:" + _ZIP
         + "|" + _UK_POSTCODE + r"))?" + r"|[ \t]*\n[ \t]*" + _CITY + _STATE_ZIP + "|" + _STATE_ZIP)

_STREET = re.compile(
    _NUMBER + r"[ \t]+(?:" + _DIRECTION + r"[ \t]+)?(?:" + _CAP_WORD + r"[ \t]+){0,4}"
    + _SUFFIX + r"\b\.?(?:[ \t]+" + _DIRECTION + r"(?![\w]))?(?P<extra>(?:" + _UNIT + ")?(?:"
    + _TAIL + ")?)")
_CUE = re.compile(r"(?<!\w)(?=[lLrRaAsSdDmMfFhHvVbB])(?i:live at|living at|lives at|reside at|"
                  r"address is|address:|address -|ship to|shipping to|deliver to|"
                  r"delivered to|send it to|mail it to|located at|moved to|moving to|"
                  r"find me at|meet me at|home at|visit us at|billing address|"
                  r"shipping address)[ \t]*")
_CUE_STREET = re.compile(
    _NUMBER + r"[ \t]+(?:" + _DIRECTION + r"[ \t]+)?(?:" + _LOW_WORD + r"[ \t]+){1,4}"
    r"(?i:" + _SUFFIX + r")\b\.?(?P<extra>(?:" + _UNIT_ANY_CASE + ")?(?:" + _TAIL + ")?)")
_PO_BOX = re.compile(
    r"(?<![\w.])(?:P\.?[ \t]?O\.?[ \t]*Box|(?i:p\.?[ \t]?o\.?[ \t]*box|post office box))"
    r"[ \t]*#?[ \t]*\d{1,7}(?!\d)(?:" + _TAIL + ")?")
_GERMAN = re.compile(
    r"\b[A-ZÄÖÜ][a-zäöüß-]*(?:straße|strasse|str\.|weg|gasse|platz|allee|damm|ring)"
    r"[ \t]+\d{1,4}[a-z]?(?:,[ \t]*\d{5}[ \t]+[A-ZÄÖÜ][a-zäöüß-]+)?")
_FRENCH = re.compile(
    r"\b\d{1,4}(?:[ \t]?(?:bis|ter))?,?[ \t]+(?:rue|avenue|boulevard|bd|place|chemin|allée|"
    r"impasse|quai)[ \t]+(?:(?:de|du|des|la|le)[ \t]+|l'|d')*[A-ZÉÈ][\w'-]+"
    r"(?:[ \t]+[A-ZÉÈ][\w'-]+)*(?:,[ \t]*\d{5}[ \t]+[A-ZÉÈ][\w-]+)?")
_HAN = re.compile(r"[\u4e00-\u9fff]{2,12}(?:道|路|街|里|巷)[東西南北中东]?[ \t]*\d{1,4}[ \t]*[號号]"
                  r"(?:[\u4e00-\u9fff\dA-Za-z]{0,12}?[樓楼室座])*")
_OTHER_NUMBER = re.compile(
    r"(?i)\b(?:top|best|chapter|ch|page|p|pp|step|steps|version|v|section|sec|part|vol|volume|"
    r"episode|ep|season|level|gate|platform|route|rte|interstate|exit|no|number|than|over|"
    r"under|about|around|nearly|only|just|all|those|these|the|of|rank|ranked|grade|year|"
    r"years|hour|hours|minute|minutes|day|days|mile|miles|km|times|x)\.?[ \t]*$|[$#€£]$")
_WEAK_SUFFIX = re.compile(r"(?i)[ \t](?:Way|Row|Run|Walk|Path|Point|Green|Hill|Loop|Cove|"
                          r"Close|Landing|Crossing|Square|Circle|Place|Heights)$")


def _value(text: str, start: int, end: int) -> tuple[int, str]:
    value = text[start:end].rstrip(" \t\n.,")
    return start + len(value), value


def _confidence(m: re.Match[str], base: float) -> float:
    return 0.9 if m.group("extra").strip(" \t\n.,") else base


def _street_lines(text: str) -> Iterator[PIIDetection]:
    for m in _STREET.finditer(text):
        end, value = _value(text, m.start(), m.end())
        if _OTHER_NUMBER.search(text[max(0, m.start() - 16):m.start()]):
            continue
        confidence = _confidence(m, 0.75)
        if confidence < 0.9 and _WEAK_SUFFIX.search(value):
            continue  # "5 Easy Way": a weak suffix alone reads like a title
        yield PIIDetection("address", m.start(), end, value, confidence)
    for cue in _CUE.finditer(text):
        street = _CUE_STREET.match(text, cue.end())
        if street is not None:
            end, value = _value(text, street.start(), street.end())
            yield PIIDetection("address", street.start(), end, value,
                               _confidence(street, 0.8))


def find_addresses(text: str) -> Iterator[PIIDetection]:
    """Postal addresses (see the module docstring); the detector resolves overlaps."""
    yield from _street_lines(text)
    for m in _PO_BOX.finditer(text):
        end, value = _value(text, m.start(), m.end())
        yield PIIDetection("address", m.start(), end, value, 0.9)
    for pattern in (_GERMAN, _FRENCH, _HAN):
        for m in pattern.finditer(text):
            end, value = _value(text, m.start(), m.end())
            yield PIIDetection("address", m.start(), end, value, 0.8)
