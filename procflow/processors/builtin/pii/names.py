"""Conservative opt-in rules for the "name" and "address" PII types.

Names and street addresses have no format to check, so these rules only fire on
strong cues and are off unless asked for (``detection_types=[..., "name"]``); a judge
model finds them far better.

- Names: capitalised words right after "my name is", "Name:", a title (Mr, Ms, Dr,
  Herr, Mme...), a salutation ("Dear", "Hi" + comma) or a sign-off ("Regards,");
  2-3 Han characters after 我叫 / 姓名：.
- Addresses: a house number, capitalised words and a street suffix (Street, Ave,
  Road...) with an optional unit, city, state and ZIP or UK postcode; German
  "-straße 12, 10115 Berlin"; French "12 rue de la Paix, 75002 Paris"; Chinese
  "...道123號".
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from procflow.processors.builtin._detection import PIIDetection

__all__ = ["find_addresses", "find_names"]

_WORD = r"[^\W\d_][^\W\d_'’-]*(?:[-'’][^\W\d_]+)?"
_NAME = r"(?P<name>" + _WORD + r"(?:[ \t]+" + _WORD + r"){0,2})"
_TITLE = r"(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof|Herr|Frau|Mme|Mlle|Sr|Sra)\.?[ \t]+"
_NAME_CUES = tuple(re.compile(pattern, re.MULTILINE) for pattern in (
    # "my name is", "Name:", "Customer:", ... then the name
    r"(?i:\b(?:my name is|my name's|full name|name|patient|customer|cardholder|"
    r"account holder|contact person|attn|attention|je m'appelle|ich heiße|ich heisse|"
    r"me llamo|mi nombre es|nombre|nom|mi chiamo|contact|emergency contact|dependent|"
    r"dependant|spouse|applicant|passenger|guest|recipient|beneficiary|account name|"
    r"titulaire))[ \t]*[:,-]?[ \t]*(?:" + _TITLE + ")?" + _NAME,
    # a title
    r"\b" + _TITLE + _NAME,
    # a salutation, the name closed by punctuation or the line's end
    r"(?i:\b(?:dear|hi|hello|hey))[ \t]+(?:" + _TITLE + ")?" + _NAME
    + r"(?=[ \t]*(?:[,!:\n]|$))",
    # a sign-off
    r"(?i:\b(?:regards|best regards|kind regards|sincerely|thanks|thank you|cheers)),"
    r"[ \t]*\n?[ \t]*" + _NAME + r"(?=[ \t]*(?:[,.\n]|$))",
    # an e-mail header: From: Jane Doe <jane@example.com>
    r"^[ \t]*(?i:from|to|cc):[ \t]*" + _NAME + r"(?=[ \t]*<)",
))
_HAN_NAME = re.compile(r"(?:我叫|我的名字是|我係|我是|姓名[:：]\s*|名前[:：]\s*)"
                       r"(?P<name>[\u4e00-\u9fff]{2,3})(?=[\s，,。.！!？?：:、）)]|$)")
_NOT_NAMES = frozenset({
    "team", "all", "there", "everyone", "support", "sir", "madam", "customer", "customers",
    "friend", "friends", "folks", "guys", "admin", "user", "client", "colleagues", "valued",
    "the", "a", "an", "is", "and", "your", "our", "my", "this", "that", "not", "again",
    "in", "advance", "for", "so", "much", "service", "sales", "manager", "hr", "world",
    "mr", "mrs", "ms", "dr", "prof",
})


def _name_tokens(raw: str) -> str:
    kept: list[str] = []
    for token in raw.split():
        if not token[0].isupper() or (token.isupper() and len(token) > 1):
            break
        if token.lower() in _NOT_NAMES:
            break
        kept.append(token)
    return " ".join(kept)


def find_names(text: str) -> Iterator[PIIDetection]:
    """Personal names introduced by a cue (see the module docstring)."""
    for pattern in _NAME_CUES:
        for m in pattern.finditer(text):
            name = _name_tokens(m.group("name"))
            if len(name) >= 2:
                start = m.start("name")
                yield PIIDetection("name", start, start + len(name), name, 0.7)
    for m in _HAN_NAME.finditer(text):
        yield PIIDetection("name", m.start("name"), m.end("name"), m.group("name"), 0.7)


_CAP = r"[A-Z][A-Za-z'.-]*"
_CITY = r"[A-Z][a-z][A-Za-z'.-]*"
_SUFFIX = (r"(?:Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Court|Ct|Way|"
           r"Place|Pl|Terrace|Parkway|Pkwy|Highway|Hwy|Circle|Square|Sq|Close|Crescent|Row|"
           r"Trail|Gardens|Mews|Hill)")
_US_UK = re.compile(
    r"\b\d{1,6}[A-Za-z]?[ \t]+(?:[NSEW]\.?[ \t]+)?(?:" + _CAP + r"[ \t]+){1,4}" + _SUFFIX +
    r"\b\.?(?:,?[ \t]+(?:Apt|Apartment|Suite|Ste|Unit|Flat|Floor|#)\.?[ \t]*[\w-]+)?"
    r"(?:,[ \t]*" + _CITY + r"(?:[ \t]+" + _CITY + r"){0,2})?"
    r"(?:,?[ \t]+(?:[A-Z]{2}[ \t]+\d{5}(?:-\d{4})?|[A-Z]{1,2}\d[A-Z\d]?[ \t]\d[A-Z]{2}))?")
_GERMAN = re.compile(
    r"\b[A-ZÄÖÜ][a-zäöüß-]*(?:straße|strasse|str\.|weg|gasse|platz|allee|damm|ring)"
    r"[ \t]+\d{1,4}[a-z]?(?:,[ \t]*\d{5}[ \t]+[A-ZÄÖÜ][a-zäöüß-]+)?")
_FRENCH = re.compile(
    r"\b\d{1,4}(?:[ \t]?(?:bis|ter))?,?[ \t]+(?:rue|avenue|boulevard|bd|place|chemin|allée|"
    r"impasse|quai)[ \t]+(?:(?:de|du|des|la|le)[ \t]+|l'|d')*[A-ZÉÈ][\w'-]+"
    r"(?:[ \t]+[A-ZÉÈ][\w'-]+)*(?:,[ \t]*\d{5}[ \t]+[A-ZÉÈ][\w-]+)?")
_HAN = re.compile(r"[\u4e00-\u9fff]{2,12}(?:道|路|街|里|巷)[東西南北中东]?[ \t]*\d{1,4}[ \t]*[號号]"
                  r"(?:[\u4e00-\u9fff\dA-Za-z]{0,12}?[樓楼室座])*")


def find_addresses(text: str) -> Iterator[PIIDetection]:
    """Street addresses (see the module docstring)."""
    for pattern in (_US_UK, _GERMAN, _FRENCH, _HAN):
        for m in pattern.finditer(text):
            value = m.group().rstrip(" \t.,")
            yield PIIDetection("address", m.start(), m.start() + len(value), value, 0.8)
