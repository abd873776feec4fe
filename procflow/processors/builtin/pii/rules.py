"""The offline rule engine of ``PIIDetector``: one finder per structured PII type.

Each finder takes a text and yields ``PIIDetection``s, possibly overlapping (the
detector resolves overlaps). The rules were written from the formats' specifications,
then measured on ``tests/processors/data/pii_corpus.jsonl``:

- a checksum (Luhn, mod-97, Base58Check, Bech32) gives ~0.99, a strict format ~0.9,
  a loose pattern ~0.7; an identifier that needs context (bare SSN digits, unformatted
  phone numbers, unprefixed secrets, dates of birth) is only reported next to a word
  that says what it is;
- a number introduced as some other identifier ("order", "invoice", "tracking",
  "ticket", "SKU", "version", ...) is not reported as a phone, card or SSN unless a
  word like "call" or "card" is nearer;
- every match must stand alone: it may not be glued to letters, digits or a longer
  dotted or dashed number.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache

from procflow.processors.builtin._detection import PIIDetection, PIIType
from procflow.processors.builtin.pii.addresses import find_addresses
from procflow.processors.builtin.pii.checks import (
    IBAN_LENGTHS,
    base58check_valid,
    bech32_valid,
    card_brand,
    iban_valid,
    ip_valid,
    luhn_valid,
    shannon_entropy,
    ssn_valid,
)
from procflow.processors.builtin.pii.dates import find_birth_dates, word_matches, word_starts
from procflow.processors.builtin.pii.names import find_names
from procflow.processors.builtin.pii.secrets import find_api_keys
from procflow.textscan import DEFAULT_ENGINE, Engine, Rule, Scanner

__all__ = ["RULES", "context_before", "find_rule_detections"]

Finder = Callable[[str, Engine], Iterator[PIIDetection]]
"""Every match of one type in a text, read on an engine (see ``find_rule_detections``)."""

_OTHER_ID_WORDS = (
    "order", "orders", "invoice", "inv", "tracking", "track", "shipment", "parcel", "sku",
    "part", "item", "model", "serial", "s/n", "ref", "reference", "ticket", "case", "po",
    "isbn", "issn", "id", "transaction", "txn", "confirmation", "booking", "receipt", "batch",
    "lot", "version", "ver", "build", "release", "patent", "policy", "claim", "product",
    "code", "no")
_OTHER_ID = re.compile(r"(?i)(?:\b(?:" + "|".join(_OTHER_ID_WORDS) + r")\b\.?|#)"
                       r"[\s:#.-]*(?:\w+[\s:#.-]+)?$")
_OTHER_ID_RUNS = frozenset(word for word in _OTHER_ID_WORDS if "/" not in word) | {"s"}
"""The word runs an ``_OTHER_ID`` match can start with (in lower case; "s" of "s/n")."""
_WORD_RUN = re.compile(r"\w+")


def context_before(text: str, start: int, width: int = 32) -> str:
    """Up to ``width`` characters before ``start`` on the same line, lower-cased."""
    window = text[max(0, start - width):start]
    return window.rsplit("\n", 1)[-1].lower()


# -- cheap necessary conditions ---------------------------------------------------------
#
# Most texts hold no PII, and each finder's patterns are a pass over the whole text. A
# finder first checks, with ``in`` and ``str.count`` (C speed), what its patterns cannot
# match without (an "@", a "+", enough digits, one of its context words...) and stops
# there when it is missing: the same detections, most passes skipped. The word checks
# are made on ASCII texts only (a case-insensitive pattern also matches a few non-ASCII
# letters, such as the Kelvin sign for "k", that ``str.lower`` does not map).

_DIGITS = "0123456789"


@lru_cache(maxsize=8)
def _digit_count(text: str) -> int:
    """How many digits ``text`` holds, at least (a non-ASCII text, which may hold other
    decimal digits, counts as many)."""
    if not text.isascii():
        return len(text)
    return sum(map(text.count, _DIGITS)) if any(d in text for d in _DIGITS) else 0


@lru_cache(maxsize=8)
def _lower_ascii(text: str) -> str | None:
    """``text`` lower-cased when it is ASCII (where word checks are exact), else ``None``."""
    return text.lower() if text.isascii() else None


def _may_hold(text: str, words: tuple[str, ...]) -> bool:
    """False only when ``text`` is ASCII and holds none of ``words`` (lower case)."""
    lower = _lower_ascii(text)
    return lower is None or any(word in lower for word in words)


def _matches_at(pattern: re.Pattern[str], text: str,
                starts: Iterable[int]) -> Iterator[re.Match[str]]:
    """``pattern.finditer(text)``, given ``starts``: rising places among which is every
    place a match can start.

    A pattern that starts with a digit or a letter is tried by ``re`` at every one of
    them (~10 ns a character over prose or code); its matches may instead hold a rarer
    character at a known offset ("-", "."), which a look-around pattern starting with
    that literal finds at C speed. The pattern is then tried at the starts this gives
    only, never inside its previous match: the same matches.
    """
    end = 0
    for start in starts:
        if start >= end:
            m = pattern.match(text, start)
            if m is not None:
                yield m
                end = m.end()


def _introduced_as_other_id(window: str) -> bool:
    """Whether ``_OTHER_ID`` matches ``window``: the 28 characters before a value on its
    line (``context_before(text, start, 28)``, which the callers also read).

    A match ends the window and holds at most one word run after its own word (two
    for "s/n"), so it starts at one of the last three runs or at a "#": the pattern
    (40 words, ~10 us a search) is tried there only, and at a run only when it is one
    of the words (an ASCII run; a case-insensitive ASCII letter also matches a few
    other letters, such as the Kelvin sign, so other runs are tried).
    """
    for run in list(_WORD_RUN.finditer(window))[-3:]:
        word = run.group()
        if (not word.isascii() or word.lower() in _OTHER_ID_RUNS) \
                and _OTHER_ID.match(window, run.start()):
            return True
    sign = window.find("#")
    while sign >= 0:
        if _OTHER_ID.match(window, sign):
            return True
        sign = window.find("#", sign + 1)
    return False


def _stands_alone(text: str, start: int, end: int) -> bool:
    """Not glued to a word or to a longer dotted/dashed number."""
    if start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_"):
        return False
    if end < len(text) and (text[end].isalnum() or text[end] == "_"):
        return False
    tail = text[end:end + 2]
    return not (len(tail) == 2 and tail[0] in ".-/" and tail[1].isdigit())


# -- email -------------------------------------------------------------------------

_EMAIL = re.compile(
    r"(?<![\w.%+-])(?<!\w')[\w%+-]+(?:['.][\w%+-]+)*@(?:[^\W_](?:[\w-]*[^\W_])?\.)+[^\W\d_]{2,}(?![\w@-])")


_LOCAL_CHARS = frozenset("%+-'.")


def _email_matches(text: str) -> Iterator[re.Match[str]]:
    """``_EMAIL.finditer(text)``, found from the "@" signs instead of at every position.

    A match holds exactly one "@", and starts in the run of local-part characters
    ([\\w%+'.-]) just before it: at the run's start, or just after a "'" (elsewhere
    in the run its look-behind fails). Those few starts are tried in order, and the
    "@" signs left to right, never inside the previous match: the same matches.
    """
    end = 0
    at = text.find("@")
    while at >= 0:
        if at >= end:
            run = at
            while run > 0 and (text[run - 1].isalnum() or text[run - 1] == "_"
                               or text[run - 1] in _LOCAL_CHARS):
                run -= 1
            for start in range(max(run, end), at):
                if start != run and text[start - 1] != "'":
                    continue
                m = _EMAIL.match(text, start)
                if m is not None:
                    yield m
                    end = m.end()
                    break
        at = text.find("@", at + 1)


def _emails(text: str) -> Iterator[PIIDetection]:
    for m in _email_matches(text):
        yield PIIDetection("email", m.start(), m.end(), m.group(), 0.95)


# -- phone -------------------------------------------------------------------------

# The patterns start with the first character they consume, the look-behind after it
# ("\+(?<![\w+]\+)" rather than "(?<![\w+])\+"): the same matches, but ``re`` can then
# skip ahead to that character instead of trying the look-behind at every position.
_PHONE_INTL = re.compile(r"\+(?<![\w+]\+)[1-9]\d{0,3}(?:[ .-]?(?:\(\d{1,5}\)|\d{1,5})){1,6}(?!\d)")
_PHONE_NANP = re.compile(  # one class first, then the branch its character allows
    r"[1-9(](?<![\w+$#/.-][1-9(])"
    r"(?:(?<=1)[ .-]?(?:\([2-9]\d{2}\)[ .-]?|[2-9]\d{2}[ .-])"
    r"|(?<=\()[2-9]\d{2}\)[ .-]?|(?<=[2-9])\d{2}[ .-])"
    r"\d{3}[ .-]\d{4}(?!\d)")
_PHONE_EXIT = re.compile(  # "00" / "011" international dialling prefixes instead of "+"
    r"0(?<![\w+$#/.-]0)(?:0|11)[ .-]?[1-9]\d{0,3}(?:[ .-]?(?:\(\d{1,5}\)|\d{1,5})){1,6}(?!\d)")
_PHONE_EXTENSION = re.compile(r"(?i)[ \t]*(?:x|ext\.?|extension)[ \t]*\d{1,6}\b")
_PHONE_TRUNK = re.compile(
    r"(?:\((?<![\w+$#/.-]\()0[1-9]\d{0,3}\)|0(?<![\w+$#/.-]0)[1-9]\d{0,3})(?:[ /-]\d{2,8}){1,4}"
    r"(?!\d)")
_PHONE_WORD = re.compile(
    r"(?i)(?:\b(?:call(?:s|ed|ing)?|phone[ds]?|tel|telephone|mobile|mob|cell|cellphone|"
    r"whatsapp|sms|text(?:ed|ing)?|fax|"
    r"hotline|ring|contact number|telefon|teléfono|telefone|téléphone|handy|portable)\b|"
    r"電話|手機|致電|电话|手机|電話番号)")
_PHONE_CONTEXT_NUMBER = re.compile(r"\+?\(?\d[\d ().-]{5,18}\d(?!\d)")
_DATE_OR_TIME = re.compile(r"^\d{4}[-/.]\d{1,2}[-/.]\d{1,2}$|^\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}$")


def _phone_shape_ok(value: str, low: int, high: int) -> bool:
    digits = sum(map(str.isdigit, value))
    if not low <= digits <= high or _DATE_OR_TIME.match(value):
        return False
    if any(sep * 2 in value for sep in " .-") or value.count("(") != value.count(")"):
        return False
    return value.count("(") <= 1


_PHONE_STARTS = word_starts("call", "phone", "tel", "mob", "cell", "whatsapp", "sms", "text",
                            "fax", "hotline", "ring", "contact", "handy", "portable")
"""In an ASCII text (lower-cased), every ``_PHONE_WORD`` match starts where one of these
does (see ``dates.word_matches``)."""


def _phone_word_in(near: str) -> bool:
    """``_PHONE_WORD.search(near)`` for a window ``context_before`` gave (lower case):
    in an ASCII one, every match starts with one of ``_PHONE_STARTS``, so a window
    holding none of them (most) is told so by ``in`` tests (~1 us) rather than the
    pattern tried at every position (~4 us)."""
    if near.isascii() and not any(word in near for word in _PHONE_STARTS):
        return False
    return _PHONE_WORD.search(near) is not None


def _phone_candidates(text: str, engine: Engine) -> Iterator[tuple[int, int, float]]:
    digits = _digit_count(text)
    if digits < 2:
        return  # every phone pattern needs at least two digits
    if "+" in text:
        for m in _PHONE_INTL.finditer(text):
            if _phone_shape_ok(m.group(), 8, 15):
                yield m.start(), m.end(), 0.85
    if "00" in text or "011" in text:
        for m in _PHONE_EXIT.finditer(text):
            if _phone_shape_ok(m.group(), 10, 17) and any(ch in m.group() for ch in " .-("):
                yield m.start(), m.end(), 0.8
    if digits >= 10:
        for m in _finditer(_PHONE_NANP, text, engine):
            yield m.start(), m.end(), 0.8
    if "0" in text and digits >= 3:
        for m in _finditer(_PHONE_TRUNK, text, engine):
            if _phone_shape_ok(m.group(), 9, 12):
                yield m.start(), m.end(), 0.7
    for word in word_matches(_PHONE_WORD, _PHONE_STARTS, text, "éÉ電手致电"):
        window_end = min(len(text), word.end() + 24)
        number = _PHONE_CONTEXT_NUMBER.search(text, word.end(), window_end + 20)
        if number is None or number.start() > window_end:
            continue
        gap = text[word.end():number.start()]
        if "\n" in gap or any(ch.isdigit() for ch in gap):
            continue
        if _phone_shape_ok(number.group(), 7, 15):
            yield number.start(), number.end(), 0.9


def _phones(text: str, engine: Engine) -> Iterator[PIIDetection]:
    for start, end, confidence in _phone_candidates(text, engine):
        extension = _PHONE_EXTENSION.match(text, end)
        if extension is not None:
            end = extension.end()
        if not _stands_alone(text, start, end):
            continue
        near = context_before(text, start, 28)
        if _phone_word_in(near):
            confidence = max(confidence, 0.9)
        elif _introduced_as_other_id(near) or near.rstrip().endswith(("$", "€", "£")):
            continue
        yield PIIDetection("phone", start, end, text[start:end], confidence)


# -- payment cards -----------------------------------------------------------------

_CARD = re.compile(r"\d(?<![\w.+-]\d)(?:[ -]?\d){12,18}(?![\w])(?![.-]?\d)")
_CARD_WORD = re.compile(r"(?i)\b(?:card|visa|mastercard|amex|american express|discover|jcb|"
                        r"diners|unionpay|maestro|credit|debit|cc|pan)\b")


def _card_groups_ok(value: str) -> bool:
    separators = {ch for ch in value if not ch.isdigit()}
    if len(separators) > 1:
        return False
    if not separators:
        return True
    groups = value.split(separators.pop())
    return all(3 <= len(g) <= 6 for g in groups)


@lru_cache(maxsize=1024)
def _card_in(value: str) -> tuple[int, int] | None:
    """The longest run of whole digit groups in ``value`` (a ``_CARD`` match: digits,
    spaces and dashes) that is a card number.

    Cached by value: a table, a log or a list of account numbers repeats the same
    digit runs, and each costs ~10 us of group arithmetic and checksums."""
    seps = [i for i, ch in enumerate(value) if not ch.isdigit()]
    starts, ends = [0] + [i + 1 for i in seps], [*seps, len(value)]
    # value[starts[i]:ends[j]] (j >= i) holds j - i separators: only runs of 13 to 19
    # digits are looked at further, and only from a digit some card number starts with
    # (``card_brand`` knows none starting with 0, 1, 7, 8 or 9).
    for a, b in sorted(((a, b) for i, a in enumerate(starts) if value[a] not in "01789"
                        for j, b in enumerate(ends) if b > a and 13 <= b - a - (j - i) <= 19),
                       key=lambda ab: (ab[0] - ab[1], ab[0])):
        sub = value[a:b]
        digits = sub.replace(" ", "").replace("-", "")
        if 13 <= len(digits) <= 19 and _card_groups_ok(sub) and card_brand(digits) \
                and luhn_valid(digits):
            return a, b
    return None


def _cards(text: str, engine: Engine) -> Iterator[PIIDetection]:
    if _digit_count(text) < 13:
        return
    for m in _finditer(_CARD, text, engine):
        span = _card_in(m.group())
        if span is None:
            continue
        start, end = m.start() + span[0], m.start() + span[1]
        near = context_before(text, start, 28)
        if _introduced_as_other_id(near) and not _CARD_WORD.search(near):
            continue
        yield PIIDetection("credit-card", start, end, text[start:end], 0.99)


# -- SSN ---------------------------------------------------------------------------

_SSN = re.compile(r"\d(?<![\w-]\d)\d{2}-\d{2}-\d{4}(?![\w])(?!-\d)")
_SSN_DASH = re.compile(r"-(?<=\d{3}-)(?=\d{2}-\d{4})")
"""The first dash of an ``_SSN`` match, 3 characters after its start."""
_SSN_WORD = re.compile(r"(?i)\b(?:ssn|ss#|social security(?: number| no\.?| #)?|"
                       r"social insurance)(?![\w])[^\d\n]{0,16}?(\d{3}[- ]?\d{2}[- ]?\d{4})"
                       r"(?![\w])(?![.-]?\d)")
_SSN_STARTS = word_starts("ssn", "ss#", "social")


def _ssns(text: str) -> Iterator[PIIDetection]:
    if _digit_count(text) < 9:
        return
    if _may_hold(text, ("ssn", "ss#", "social")):
        for m in word_matches(_SSN_WORD, _SSN_STARTS, text):
            if ssn_valid(m.group(1)):
                yield PIIDetection("ssn", m.start(1), m.end(1), m.group(1), 0.95)
    if text.count("-") < 2:
        return
    for m in _matches_at(_SSN, text, (dash.start() - 3 for dash in _SSN_DASH.finditer(text))):
        if ssn_valid(m.group()) \
                and not _introduced_as_other_id(context_before(text, m.start(), 28)):
            yield PIIDetection("ssn", m.start(), m.end(), m.group(), 0.85)


# -- IP addresses ------------------------------------------------------------------

_IPV4 = re.compile(r"\d(?<![\w.]\d)\d{0,2}\.(?:\d{1,3}\.){2}\d{1,3}(?![\w])(?!\.\d)(?!-[A-Za-z])")
_IPV4_DOT = re.compile(r"\.(?<=\d\.)(?=\d{1,3}\.\d{1,3}\.\d)")
"""The first dot of an ``_IPV4`` match, after its first 1 to 3 digits."""
_IPV6 = re.compile(
    r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f]{1,4})?"
    r"(?![\w:])(?!\.\w)")
_IPV6_COLON = re.compile(r":(?=[0-9A-Fa-f]{0,4}:)")
"""A colon followed by up to 4 hex digits and a colon, as the first one of every
``_IPV6`` match is."""
_VERSION_WORD = re.compile(r"(?i)\b(?:version|ver|v|release|build|firmware|chrome|"
                           r"firefox|safari|edge|os|ios|android|kernel|sdk|api|chapter|section|sec|clause|"
                           r"article|art|figure|fig|table|step|para|paragraph|§)\.?[\s:]*$")


def _ipv4_starts(text: str) -> Iterator[int]:
    """Where an ``_IPV4`` match can start: the start of the 1 to 3 digits before a dot
    (``\\d`` is ``str.isdecimal``; with no word character before them)."""
    for dot in _IPV4_DOT.finditer(text):
        start = dot.start() - 1
        while start > 0 and dot.start() - start < 4 and text[start - 1].isdecimal():
            start -= 1
        yield start


def _ipv6_starts(text: str) -> Iterator[int]:
    """Where an ``_IPV6`` match can start: the start of the word run (up to 4 hex
    digits, with no word character, colon or dot before it) just before its first
    colon."""
    for colon in _IPV6_COLON.finditer(text):
        start = colon.start()
        while start > 0 and colon.start() - start < 5 and (text[start - 1].isalnum()
                                                           or text[start - 1] == "_"):
            start -= 1
        yield start


def _ips(text: str) -> Iterator[PIIDetection]:
    if text.count(".") >= 3 and _digit_count(text) >= 4:
        for m in _matches_at(_IPV4, text, _ipv4_starts(text)):
            if ip_valid(m.group()) and not _VERSION_WORD.search(context_before(text, m.start())):
                yield PIIDetection("ip-address", m.start(), m.end(), m.group(), 0.9)
    if text.count(":") < 2:
        return
    for m in _matches_at(_IPV6, text, _ipv6_starts(text)):
        value = m.group()
        if value.count(":") >= 2 and any(ch not in ":" for ch in value) and ip_valid(value):
            yield PIIDetection("ip-address", m.start(), m.end(), value, 0.9)


# -- URLs, UUIDs -------------------------------------------------------------------

_URL = re.compile(r"(?i)(?<![\w@/.-])(?:https?://|www\.)[^\s<>\"'`]+")
_URL_STARTS = word_starts("http", "www.")
_TRAILING = ".,;:!?'\"*"
_PAIRS = {")": "(", "]": "[", "}": "{"}


def _trim_url(url: str) -> str:
    # Non-ASCII punctuation ends a URL written inside CJK (or other) prose: "...，然後".
    for i, ch in enumerate(url):
        if not ch.isascii() and unicodedata.category(ch)[0] in "PSZ":
            url = url[:i]
            break
    while url:
        last = url[-1]
        if last in _TRAILING or (last in _PAIRS and url.count(last) > url.count(_PAIRS[last])):
            url = url[:-1]
            continue
        break
    return url


def _urls(text: str) -> Iterator[PIIDetection]:
    if "://" not in text and not _may_hold(text, ("www.",)):
        return
    for m in word_matches(_URL, _URL_STARTS, text):
        value = _trim_url(m.group())
        host = re.sub(r"(?i)^(?:https?://)?", "", value).split("/", 1)[0]
        if "." in host.strip(".") or host.lower().startswith(("localhost", "[")):
            yield PIIDetection("url", m.start(), m.start() + len(value), value, 0.9)


_UUID = re.compile(r"[0-9a-fA-F](?<![\w-][0-9a-fA-F])[0-9a-fA-F]{7}-[0-9a-fA-F]{4}-"
                   r"[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![\w-])")
_UUID_DASH = re.compile(r"-(?<=[0-9a-fA-F]{8}-)(?=[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                        r"[0-9a-fA-F]{4}-[0-9a-fA-F]{12})")
"""The first dash of a ``_UUID`` match, 8 characters after its start."""


def _uuids(text: str) -> Iterator[PIIDetection]:
    if text.count("-") < 4:
        return
    for m in _matches_at(_UUID, text, (dash.start() - 8 for dash in _UUID_DASH.finditer(text))):
        value = m.group()
        rfc = value[14] in "12345678" and value[19].lower() in "89ab"
        yield PIIDetection("uuid", m.start(), m.end(), value, 0.92 if rfc else 0.8)


# -- IBAN --------------------------------------------------------------------------

_IBAN_START = re.compile(r"[A-Z](?<![A-Za-z0-9][A-Z])[A-Z]\d{2}(?= ?[A-Z0-9])")


def _ibans(text: str, engine: Engine) -> Iterator[PIIDetection]:
    if _digit_count(text) < 2:
        return
    for m in _finditer(_IBAN_START, text, engine):
        length = IBAN_LENGTHS.get(m.group()[:2])
        if length is None:
            continue
        pos, taken = m.end(), 4
        while taken < length and pos < len(text):
            ch = text[pos]
            if ch == " " and pos + 1 < len(text) and text[pos + 1].isalnum() and taken % 4 == 0:
                pos += 1
                continue
            if not (ch.isascii() and (ch.isdigit() or ch.isupper())):
                break
            taken, pos = taken + 1, pos + 1
        value = text[m.start():pos]
        if taken == length and _stands_alone(text, m.start(), pos) and iban_valid(value):
            yield PIIDetection("iban", m.start(), pos, value, 0.99)


# -- crypto wallets ----------------------------------------------------------------

_BTC_LEGACY = re.compile(r"[13](?<![A-Za-z0-9][13])[1-9A-HJ-NP-Za-km-z]{25,34}(?![A-Za-z0-9])")
_BTC_BECH32 = re.compile(r"b(?<![A-Za-z0-9]b)c1[02-9ac-hj-np-z]{8,87}(?![A-Za-z0-9])")
_ETH = re.compile(r"0(?<![A-Za-z0-9]0)x[0-9a-fA-F]{40}(?![A-Za-z0-9])")


def _wallets(text: str, engine: Engine) -> Iterator[PIIDetection]:
    if "1" in text or "3" in text:
        for m in _finditer(_BTC_LEGACY, text, engine):
            if base58check_valid(m.group()):
                yield PIIDetection("crypto-wallet", m.start(), m.end(), m.group(), 0.99)
    if "bc1" in text:
        for m in _BTC_BECH32.finditer(text):
            if bech32_valid(m.group()):
                yield PIIDetection("crypto-wallet", m.start(), m.end(), m.group(), 0.99)
    if "0x" not in text:
        return
    for m in _ETH.finditer(text):
        # Without Keccak (not in hashlib) the EIP-55 checksum cannot be verified; a
        # 40-hex body of mixed digits and letters is still a strong shape.
        body = m.group()[2:]
        confidence = 0.85 if shannon_entropy(body) > 3.0 else 0.6
        yield PIIDetection("crypto-wallet", m.start(), m.end(), m.group(), confidence)


# -- one RE2 pass for the patterns that start with a digit or a letter -------------------
#
# ``re`` tries such a pattern at every digit or letter (~10 ns a character over prose
# or code, for each pattern). With ``google-re2`` installed, a ``Scanner`` on engine
# "re2" finds their matches in one prefilter pass per text (RE2 sets), each pattern
# tried only where its RE2 form matches: the same matches as ``finditer``. The text
# read is already ``normalise``'s view (the detector maps spans back), so the scanner
# reads it as given.

_SCANNED = (_PHONE_NANP, _PHONE_TRUNK, _CARD, _IBAN_START, _BTC_LEGACY)
_SCAN: Scanner[int] | None = Scanner(
    [Rule(name, pattern) for name, pattern in zip(
        ("phone-nanp", "phone-trunk", "credit-card", "iban", "btc-legacy"), _SCANNED,
        strict=True)],
    engine="re2") if DEFAULT_ENGINE == "re2" else None
"""The RE2 pass (``None`` without ``google-re2``: ``finditer`` on every engine)."""


@lru_cache(maxsize=4)
def _scanned(text: str) -> tuple[list[re.Match[str]], ...]:
    """The matches of each ``_SCANNED`` pattern in ``text``, made once per text."""
    found: tuple[list[re.Match[str]], ...] = tuple([] for _ in _SCANNED)
    if _SCAN is None:
        return tuple(list(pattern.finditer(text)) for pattern in _SCANNED)
    for match in _SCAN.scan(text):
        found[match.rule_index].append(match.match)
    return found


def _finditer(pattern: re.Pattern[str], text: str, engine: Engine) -> Iterable[re.Match[str]]:
    """``pattern.finditer(text)`` for a ``_SCANNED`` pattern, from the RE2 pass when
    there is one (on engine ``"re2"``)."""
    if engine != "re2" or _SCAN is None:
        return pattern.finditer(text)
    return _scanned(text)[_SCANNED.index(pattern)]


def _any_engine(finder: Callable[[str], Iterator[PIIDetection]]) -> Finder:
    """A finder that reads with ``re`` alone, whatever the engine."""
    def find(text: str, engine: Engine) -> Iterator[PIIDetection]:
        return finder(text)
    return find


def _birth_dates(text: str) -> Iterator[PIIDetection]:
    if _digit_count(text) < 4:
        return  # every written date holds four digits or more (its birth words are not looked for)
    yield from find_birth_dates(text)


RULES: dict[PIIType, Finder] = {
    "email": _any_engine(_emails),
    "phone": _phones,
    "credit-card": _cards,
    "ssn": _any_engine(_ssns),
    "api-key": _any_engine(find_api_keys),
    "ip-address": _any_engine(_ips),
    "url": _any_engine(_urls),
    "uuid": _any_engine(_uuids),
    "iban": _ibans,
    "crypto-wallet": _wallets,
    "date-of-birth": _any_engine(_birth_dates),
    "name": _any_engine(find_names),
    "address": _any_engine(find_addresses),
}
"""Type -> finder. "name" (cues and a census gazetteer, ``pii.names``) and "address"
(street lines, PO boxes, ``pii.addresses``) favour precision and are opt-in."""


def find_rule_detections(text: str, types: frozenset[PIIType], *,
                         engine: Engine = DEFAULT_ENGINE) -> list[PIIDetection]:
    """Every rule match of the given types in ``text`` (unsorted, may overlap), read
    on ``engine`` (the same matches on both)."""
    found: list[PIIDetection] = []
    for pii_type, finder in RULES.items():
        if pii_type in types:
            found.extend(finder(text, engine))
    return found
