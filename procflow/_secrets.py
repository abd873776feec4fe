"""What counts as a secret: one set of rules for ``PIIDetector``'s "api-key" type and for
the masking of everything procflow writes to disk (traces, stored errors).

This module sits at the bottom of the package (it imports only the standard library),
so the runtime, the storage backends and the processors share it.

Keys by name (``is_secret_key``): a mapping key whose words name a credential -
``password``, ``pwd``, ``passphrase``, ``secret``, ``token``, ``auth``, ``authorization``,
``cookie``, ``credentials``, ``api_key(s)``, ``private_key``, ``access_token``... in any
case and with any separator (``apiKey``, ``X-API-Key``, ``DB_PASSWORD``).

Values by shape (``find_secrets``), in text of any kind (values, keys, error messages):

1. Vendor formats with a fixed prefix: OpenAI/Anthropic ``sk-``/``sk-proj-``, AWS
   ``AKIA``/``ASIA``, GitHub ``ghp_``/``gho_``/``github_pat_``, Slack ``xox?-``, Google
   ``AIza``, Stripe ``sk_live_``/``rk_live_``, GitLab ``glpat-``, npm, SendGrid, Hugging
   Face ``hf_``; JWTs; PEM private keys.
2. Passwords inside URLs (``postgres://user:PASSWORD@host``: only the password).
3. Assignments in config, headers or prose: ``password=...``, ``"api_key": "..."``,
   ``Cookie: ...``, ``Authorization: Bearer ...`` - the value only, placeholders excluded.
4. A long, random-looking token near a word such as "key", "token", "secret" or
   "aws" (AWS secret keys, 32-hex keys).
5. Bare tokens with no word near them: a 40-character AWS secret access key (mixed
   case, base64 alphabet, random-looking) and a 32-hex-digit token inside a longer
   text. A string that is a 32-hex token and nothing else is an id (run, thread,
   message and span ids have that shape) and stays, as does one right after a word
   naming an id or a digest ("run", "id", "sha", "md5", "hash"...). Git commit ids
   (40 hex digits), SHA-256 digests (64) and UUIDs (with dashes) are not masked bare.

"Example" keys are secrets too (``AKIAIOSFODNN7EXAMPLE``, ``wJalrXUtnFEMI/...EXAMPLEKEY``):
a placeholder in a trace is still a secret shape to a scanner. Only empty-looking
placeholders (``<your-key>``, ``xxxx``, ``your_token_here``, ``${TOKEN}``) are left.

Every pattern is linear-time on Python's ``re``: no nested quantifiers, and every
repetition that could meet a failing suffix is bounded.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise
from typing import Any, Final

from procflow._wordscan import word_matches, word_starts

__all__ = ["MASK", "SecretSpan", "find_secrets", "is_secret_key", "mask_secrets", "mask_text"]

MASK: Final = "***"
"""What a masked secret is replaced with."""


@dataclass(frozen=True, slots=True)
class SecretSpan:
    """A secret found in a text.

    Attributes:
        start: Its first character.
        end: One past its last character.
        confidence: How sure the rule is (0..1).
    """

    start: int
    end: int
    confidence: float


# -- keys by name ------------------------------------------------------------------

_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_SECRET_WORDS: Final = frozenset({
    "password", "passwd", "pwd", "passphrase", "passcode", "secret", "secrets", "token",
    "auth", "authorization", "cookie", "cookies", "credential", "credentials", "apikey",
    "apikeys", "bearer", "jwt", "privatekey", "sessionid", "otp", "pin",
})
_SECRET_SUFFIXES: Final = (
    "apikey", "apikeys", "accesskey", "accesskeyid", "secretkey", "privatekey", "clientsecret",
    "accesstoken", "refreshtoken", "sessiontoken", "authtoken", "idtoken", "apitoken",
    "signingkey", "encryptionkey", "masterkey", "webhooksecret", "accesstokens",
    "refreshtokens", "apitokens", "authtokens", "setcookie",
)
_PASSWORD_WORDS: Final = frozenset({"password", "passwd", "pwd", "passphrase", "passcode",
                                    "pass", "cookie", "cookies", "auth", "authorization"})


@lru_cache(maxsize=4096)
def is_secret_key(name: str) -> bool:
    """Whether a mapping key (or a ``key=value`` name) names a credential.

    Case and separators do not matter: ``api_key``, ``apiKey``, ``X-API-Key`` and
    ``APIKEY`` are all secret keys; ``max_tokens``, ``author`` and ``keys`` are not.
    """
    if len(name) > 80:
        return False
    words: list[str] = [w.lower() for w in _WORDS.findall(name)]
    if not words:
        return False
    compact = "".join(words)
    if compact in _SECRET_WORDS or compact.endswith(_SECRET_SUFFIXES):
        return True
    if any(w in _SECRET_WORDS for w in words):
        return True
    return words[-1] == "pass"  # "db_pass", but not "bypass" or "passenger"


def _password_like(name: str) -> bool:
    words: list[str] = [w.lower() for w in _WORDS.findall(name)]
    return any(w in _PASSWORD_WORDS for w in words)


# -- values by shape ---------------------------------------------------------------

_B = r"(?<![A-Za-z0-9_-])"
_E = r"(?![A-Za-z0-9_-])"


def _at(start: str) -> str:
    """``_B + start`` with the look-behind after ``start`` (fixed-width): the same
    matches, but ``re`` can skip ahead to ``start`` instead of trying every position."""
    return start + r"(?<![A-Za-z0-9_-]" + start + ")"


# (triggers, pattern, confidence): a pattern runs only on text containing one of its
# triggers (plain substring tests), so text without a vendor prefix costs a few ``in``s.
_VENDOR: Final[tuple[tuple[tuple[str, ...], re.Pattern[str], float], ...]] = tuple(
    ((trigger,) if isinstance(trigger, str) else trigger, re.compile(pattern), confidence)
    for trigger, pattern, confidence in (
        ("sk-", _at("sk-") + r"(?:proj-|svcacct-|admin-|live-|test-|"
                r"ant-(?:api\d{2}-|admin\d{2}-)?)?[A-Za-z0-9_-]{20,}" + _E, 0.95),
        (("AKIA", "ASIA"), _at("A") + r"(?:KIA|SIA)[0-9A-Z]{16}" + _E, 0.95),
        (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
         _at("gh") + r"[pousr]_[A-Za-z0-9]{36,255}" + _E, 0.97),
        ("github_pat_", _at("github_pat_") + r"[A-Za-z0-9_]{22,255}" + _E, 0.97),
        ("xox", _at("xox") + r"[abeprs]-[A-Za-z0-9-]{10,}" + _E, 0.95),
        ("AIza", _at("AIza") + r"[0-9A-Za-z_-]{35}" + _E, 0.95),
        (("_live_", "_test_"), _at("[srp]k") + r"_(?:live|test)_[0-9A-Za-z]{10,}" + _E, 0.97),
        ("whsec_", _at("whsec_") + r"[0-9A-Za-z]{20,}" + _E, 0.95),
        ("glpat-", _at("glpat-") + r"[A-Za-z0-9_-]{20,}" + _E, 0.95),
        ("npm_", _at("npm_") + r"[A-Za-z0-9]{36}" + _E, 0.95),
        ("SG.", _at(r"SG\.") + r"[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}" + _E, 0.95),
        ("hf_", _at("hf_") + r"[A-Za-z0-9]{30,40}" + _E, 0.9),
        ("eyJ", _at("eyJ") + r"[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}" + _E,
         0.9),
        # A PEM private key: the header, its body (base64 lines, maybe "Proc-Type:"
        # headers) and the footer when present. Single-character steps only.
        ("-----BEGIN ", r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
         r"(?:[A-Za-z0-9+/=\s:,.]|-(?!----)){0,16000}"
         r"(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----)?", 0.99),
    ))

# scheme://user:PASSWORD@host - only the password is a secret.
_URL_PASSWORD = re.compile(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{1,30}://[^\s:/?#@\"'<>]{0,128}:"
    r"(?P<value>[^\s/?#@\"'<>]{1,256})@")

# The key consumes its first letter before its look-behind (so ``re`` skips to letters)
# and is possessive (no character it could give back is one of ``"' \t:=``): the same
# matches as "(?<![\w.-])(?P<key>[A-Za-z_][\w.-]{0,63})", without retrying every word.
_ASSIGN = re.compile(
    r"(?P<key>[A-Za-z_](?<![\w.-][A-Za-z_])[\w.-]{0,63}+)[\"']?[ \t]{0,8}[:=][ \t]{0,8}"
    r"(?:\"(?P<dq>[^\"\r\n]{1,300})\"|'(?P<sq>[^'\r\n]{1,300})'"
    r"|\[(?P<list>[^\]\r\n]{1,1000})\]|(?P<bare>[^\s\"'`,;<>&\[]{1,300}))")
_HEADER = re.compile(
    r"(?im)^[ \t]{0,16}(?:proxy-)?(?:authorization|cookie|set-cookie)[ \t]{0,8}:[ \t]{0,8}"
    r"(?:(?:bearer|basic|digest|token)[ \t]{1,8})?(?P<value>[^\s][^\r\n]{0,4000})")
_PROSE_PASSWORD = re.compile(
    r"(?i)\b(?:password|passphrase|passcode|passwort|mot de passe|contraseña)"
    r"(?:[ \t]{1,8}(?:is|was|will be))?(?:[ \t]{1,8}(?:set to|now|changed to|reset to))?"
    r"[ \t]{1,8}(?P<value>[^\s\"'`,;<>()]{6,64})(?<![.!?])")
_PROSE_PASSWORD_STARTS = word_starts("pass", "mot", "contrase")
_PUBLIC_KEY = re.compile(r"(?i)(?:public|ssh-(?:rsa|ed25519|dss)|ecdsa-sha2-\S{1,40})[\s:]*$")
_BEARER = re.compile(
    r"(?i)\b(?:bearer|token)[ \t]{1,8}(?P<value>[A-Za-z0-9._~+/-]{16,4000}={0,3})"
    r"(?![\w.~+/=-])")
_BEARER_STARTS = word_starts("bearer", "token")
_SECRET_WORD = re.compile(
    r"(?i)\b(?:api[ _-]?keys?|access[ _-]?keys?|secrets?|tokens?|credentials?|keys?|aws|"
    r"passwords?)\b")
_SECRET_WORD_STARTS = word_starts("api", "access", "secret", "token", "credential", "key",
                                  "aws", "password")
_TOKEN = re.compile(r"(?<![\w/+=.-])[A-Za-z0-9_+/=-]{20,400}(?![\w/+=.-])")

_PLACEHOLDER_WORDS: Final = frozenset({
    "none", "null", "nil", "undefined", "true", "false", "redacted", "hidden", "masked",
    "required", "optional", "string", "empty", "secret", "password", "token", "unset",
    "yes", "no", "n/a", "na", "tbd", "todo", "bearer", "basic", "digest",
})
_PLACEHOLDER = re.compile(r"(?i)^(?:[*•x.#_-]+|[<\[{$%].*|.*(?:your|xxxx|_here).*|"
                          r"[A-Za-z_][\w.]*\(.*)$")


_DIGITS: Final = "0123456789"


_TABLED_SIZE: Final = 128


@lru_cache(maxsize=_TABLED_SIZE)
def _entropy_terms(size: int) -> list[float]:
    """``n / size * log2(n / size)`` for each count ``n`` of a character in a text of
    ``size`` characters (index ``n``; 0 for 0)."""
    return [n / size * math.log2(n / size) if n else 0.0 for n in range(size + 1)]


def _entropy(text: str) -> float:
    """The Shannon entropy of ``text`` (bits a character).

    The terms of a value up to ``_TABLED_SIZE`` characters (most tokens and passwords)
    are read from a table per length rather than computed per character (the entropy
    check was a quarter of the secret rules on a text full of them); the sum is the
    same, term for term and in the same order, so the same float."""
    size = len(text)
    counts = Counter(text).values()
    if size <= _TABLED_SIZE:
        return -sum(map(_entropy_terms(size).__getitem__, counts))
    return -sum(n / size * math.log2(n / size) for n in counts)


def _is_placeholder(value: str) -> bool:
    return value.lower() in _PLACEHOLDER_WORDS or _PLACEHOLDER.match(value) is not None


def _random_looking(value: str, *, min_entropy: float = 3.3) -> bool:
    return any(map(str.isdigit, value)) and any(map(str.isalpha, value)) \
        and _entropy(value) >= min_entropy


_RARE_FIRST: Final = "JASx_-"
"""Characters of the vendor triggers rarer in prose and code than letters such as
"s", "e" or "h", rarest first."""


def _from_rarest(trigger: str) -> str:
    """A pattern matching where ``trigger`` occurs, written from its rarest character
    (see ``_RARE_FIRST``), the rest as a look-behind and a look-ahead: ``re`` skips
    ahead to the first characters of an alternation's branches, so the pattern of all
    triggers is tried at a few places of a text rather than at every "s" or "e"."""
    rank = {ch: i for i, ch in enumerate(_RARE_FIRST)}
    at = min(range(len(trigger)), key=lambda i: (rank.get(trigger[i], len(rank)), i))
    out = re.escape(trigger[at])
    if at:
        out += f"(?<={re.escape(trigger[:at + 1])})"
    if at + 1 < len(trigger):
        out += f"(?={re.escape(trigger[at + 1:])})"
    return out


# Every vendor trigger, in one pattern: one pass tells most texts they hold none.
_ANY_VENDOR_TRIGGER = re.compile("|".join(
    _from_rarest(trigger) for triggers, _, _ in _VENDOR for trigger in triggers))


def _vendor(text: str) -> Iterator[SecretSpan]:
    if _ANY_VENDOR_TRIGGER.search(text) is None:
        return
    for triggers, pattern, confidence in _VENDOR:
        if not any(trigger in text for trigger in triggers):
            continue
        for m in pattern.finditer(text):
            yield SecretSpan(m.start(), m.end(), confidence)


_SCHEME_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyz"
                                 "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")


def _url_password_matches(text: str) -> Iterator[re.Match[str]]:
    """``_URL_PASSWORD.finditer(text)``, found from the "://" signs instead of at every
    letter.

    A match's scheme is the whole run of scheme characters (its look-behind allows none
    before it) just before the first "://" of the match, and no scheme character is a
    colon: each "://" gives the one start a match through it can have, and the starts
    rise with the signs. They are tried in order, never inside the previous match: the
    same matches.
    """
    end = 0
    sign = text.find("://")
    while sign >= 0:
        start = sign
        while start > end and text[start - 1] in _SCHEME_CHARS:
            start -= 1
        if start >= end and (start == 0 or text[start - 1] not in _SCHEME_CHARS):
            m = _URL_PASSWORD.match(text, start)
            if m is not None:
                yield m
                end = m.end()
        sign = text.find("://", max(sign + 1, end))


def _url_passwords(text: str) -> Iterator[SecretSpan]:
    for m in _url_password_matches(text):
        if not _is_placeholder(m.group("value")):
            yield SecretSpan(m.start("value"), m.end("value"), 0.9)


def _has(lower: str, words: tuple[str, ...]) -> bool:
    return any(word in lower for word in words)


# Every secret key name (``is_secret_key``) contains one of these.
_KEY_TRIGGERS: Final = ("pass", "pwd", "secret", "token", "auth", "cookie", "credential",
                        "key", "bearer", "jwt", "session", "otp", "pin")


def _assignments(text: str, lower: str) -> Iterator[SecretSpan]:
    if ("=" in text or ":" in text) and _has(lower, _KEY_TRIGGERS):
        yield from _key_values(text)
    if _has(lower, ("authorization", "cookie")):
        for m in _header_matches(text, lower):
            yield SecretSpan(m.start("value"), m.end("value"), 0.8)
    if _has(lower, ("pass", "contrase")):
        for m in word_matches(_PROSE_PASSWORD, _PROSE_PASSWORD_STARTS, text):
            value = m.group("value")
            if not _is_placeholder(value) and _random_looking(value, min_entropy=2.5):
                yield SecretSpan(m.start("value"), m.end("value"), 0.7)
    if _has(lower, ("bearer", "token")):
        for m in word_matches(_BEARER, _BEARER_STARTS, text):
            value = m.group("value")
            if not _is_placeholder(value) and _random_looking(value):
                yield SecretSpan(m.start("value"), m.end("value"), 0.85)


# Letters a case-insensitive ASCII letter matches that do not lower-case to it (or, "İ",
# to one character): with one of them about, a lower-cased text is no exact guide.
_CASE_SPECIAL: Final = ("\u212a", "\u017f", "\u0131", "\u0130")


def _header_matches(text: str, lower: str) -> Iterator[re.Match[str]]:
    """``_HEADER.finditer(text)``, tried only at the starts of the lines of ``lower``
    (``text`` lower-cased) holding "authorization" or "cookie".

    A match starts a line and never holds a line break (so a line holds at most one),
    and it holds one of those words: the same matches, without trying the pattern at
    every position. A text holding one of ``_CASE_SPECIAL`` is scanned in full.
    """
    if len(lower) != len(text) or any(ch in text for ch in _CASE_SPECIAL):
        yield from _HEADER.finditer(text)
        return
    starts: set[int] = set()
    for word in ("authorization", "cookie"):
        at = lower.find(word)
        while at >= 0:
            starts.add(text.rfind("\n", 0, at) + 1)
            at = lower.find(word, at + 1)
    for start in sorted(starts):
        m = _HEADER.match(text, start)
        if m is not None:
            yield m


def _assign_signs(text: str) -> list[int]:
    """Where the ":" and "=" signs of ``text`` are, in order: a ``str.find`` pass per
    sign (C speed), where the class ``[:=]`` would be tried at every character (~8 ns
    each: a quarter of the assignment scan on a 10 KB text)."""
    found: list[int] = []
    for sign in ":=":
        at = text.find(sign)
        while at >= 0:
            found.append(at)
            at = text.find(sign, at + 1)
    found.sort()
    return found


_KEY_REVERSED = re.compile(r"[ \t]{0,8}+[\"']?+(?P<run>[\w.-]{1,64}+)")


def _secret_assign_matches(text: str) -> Iterator[re.Match[str]]:
    r"""The matches of ``_ASSIGN.finditer(text)`` whose key names a secret
    (``is_secret_key``), found from the ":" and "=" signs instead of at every word.

    Before its sign a match has up to 8 blanks, maybe a quote and its key: the whole
    run of ``[\w.-]`` it starts (its look-behind allows no such character before it),
    of at most 64 characters. That run, read backwards from the sign in the reversed
    text, gives the only start a match with this sign can have, where ``_ASSIGN`` is
    tried (a run of more than 64 characters gives a start inside it, where the
    look-behind fails, as it must). The signs are taken in order, never inside the
    previous match: the same matches.

    Most keys name no secret; their matches only tell whether a later sign is inside
    one, and no match holds a line break. So a sign whose run is no secret key is put
    aside, and those put aside on a line are tried (in order) only when a sign with a
    secret key follows them on it: the same secret matches, most others never tried.
    """
    size = len(text)
    reversed_text = text[::-1]
    end = 0
    line_end = -1
    waiting: list[tuple[int, re.Match[str]]] = []

    def take(at: int, key: re.Match[str]) -> re.Match[str] | None:
        nonlocal end
        if at <= end or size - key.end() < end:
            return None  # (a run that starts inside the previous match starts no match)
        m = _ASSIGN.match(text, size - key.end())
        if m is not None:
            end = m.end()
        return m

    for at in _assign_signs(text):
        if at > line_end:
            waiting.clear()  # their matches end before this line
            line_end = text.find("\n", at)
            if line_end < 0:
                line_end = size
        key = _KEY_REVERSED.match(reversed_text, size - at)
        if key is None:
            continue
        if not is_secret_key(text[size - key.end():size - key.start("run")]):
            waiting.append((at, key))
            continue
        for earlier in waiting:
            take(*earlier)
        waiting.clear()
        m = take(at, key)
        if m is not None:
            yield m


def _key_values(text: str) -> Iterator[SecretSpan]:
    for m in _secret_assign_matches(text):
        key = m.group("key")
        if not is_secret_key(key):
            continue
        if m.group("list") is not None:  # "api_keys": ["...", "..."]: every item
            yield SecretSpan(m.start("list"), m.end("list"), 0.8)
            continue
        group = next(g for g in ("dq", "sq", "bare") if m.group(g) is not None)
        start, end = m.start(group), m.end(group)
        value = text[start:end]
        if group == "bare":
            stripped = value.rstrip(").!?")
            end -= len(value) - len(stripped)
            value = stripped
        if len(value) < 4 or _is_placeholder(value) or "://" in value:
            continue
        if _password_like(key):
            if key.lower().endswith("pass") and not _random_looking(value):
                continue
            yield SecretSpan(start, end, 0.8)
        elif len(value) >= 8 and _random_looking(value, min_entropy=3.0):
            yield SecretSpan(start, end, 0.85)


def _ends_public_key(window: str) -> bool:
    """``_PUBLIC_KEY.search(window) is not None``, the pattern tried only when an ASCII
    window holds one of its words (case-insensitively, an ASCII letter matches only
    ASCII letters there)."""
    if window.isascii():
        lower = window.lower()
        if "public" not in lower and "ssh-" not in lower and "ecdsa-sha2-" not in lower:
            return False
    return _PUBLIC_KEY.search(window) is not None


def _contextual_tokens(text: str, lower: str) -> Iterator[SecretSpan]:
    if not _has(lower, ("key", "secret", "token", "credential", "aws", "password")):
        return
    for word in word_matches(_SECRET_WORD, _SECRET_WORD_STARTS, text):
        if _ends_public_key(text[max(0, word.start() - 12):word.start()]):
            continue
        line_end = text.find("\n", word.end())
        window_end = min(len(text) if line_end < 0 else line_end, word.end() + 64)
        for m in _TOKEN.finditer(text, word.end(), window_end):
            # random-looking: two digits or more, a letter, entropy 3.5 or more (the
            # cheap tests first, the entropy once)
            value = m.group()
            if value.count("/") > 3 or sum(map(value.count, _DIGITS)) < 2 \
                    or not any(map(str.isalpha, value)) or _entropy(value) < 3.5:
                continue
            if _is_placeholder(value) or _ends_public_key(text[max(0, m.start() - 24):m.start()]):
                continue
            yield SecretSpan(m.start(), m.end(), 0.75)


# A run of 32 to 40 characters of the base64 alphabet, alone (possessive, and no such
# character, "_", "-", "." or "=" on either side): tried at run starts only, linear.
_BARE = re.compile(r"(?<![A-Za-z0-9_+/=.-])[A-Za-z0-9+/]{32,40}+(?![A-Za-z0-9_+/=.-])")
_HEX = frozenset("0123456789abcdef")
# Every byte to "a" if it may be in a bare token, else to " ": in UTF-8 translated so
# (C speed, ~0.5 ns a character) a run of 32 "a"s tells where ``_BARE`` may match, and
# most texts hold none (the pattern alone costs ~15 ns a character).
_BARE_BYTES: Final = bytes(
    97 if chr(i).isascii() and (chr(i).isalnum() or chr(i) in "+/") else 32 for i in range(256))
_BARE_RUN: Final = b"a" * 32
_ID_WORD = re.compile(r"(?i)(?:\b(?:run|id|ids|thread|span|trace|message|msg|step|commit|"
                      r"sha\d{0,3}|md5|hash|digest|checksum|etag|uuid)|_id)[\s\W]{0,4}$")


def _aws_secret_shaped(value: str) -> bool:
    """A 40-character AWS secret access key: random base64, so runs of capitals
    ("FEMI") and lower-to-upper turns inside words ("wJ", "bPx") a camel-case name
    has few of, a digit or "/" or "+", and high entropy."""
    if len(value) != 40 or "/" in value[:1] or value.count("/") > 4:
        return False
    upper_pairs = lower_upper = 0
    for a, b in pairwise(value):
        if b.isupper():
            if a.isupper():
                upper_pairs += 1
            elif a.islower():
                lower_upper += 1
    return upper_pairs >= 3 and lower_upper >= 3 \
        and any(ch.isdigit() or ch in "/+" for ch in value) and _entropy(value) >= 4.3


def _bare_tokens(text: str) -> Iterator[SecretSpan]:
    if len(text) < 32 or _BARE_RUN not in text.encode("utf-8", "surrogatepass").translate(
            _BARE_BYTES):
        return
    for m in _BARE.finditer(text):
        value = m.group()
        if len(value) == 40:
            if _aws_secret_shaped(value):
                yield SecretSpan(m.start(), m.end(), 0.8)
        elif len(value) == 32 and (set(value) <= _HEX or (set(value.lower()) <= _HEX
                                                             and value.isupper())):
            if value == text.strip() or not any(map(str.isdigit, value)) \
                    or not any(map(str.isalpha, value)) \
                    or _ID_WORD.search(text, max(0, m.start() - 24), m.start()):
                continue
            yield SecretSpan(m.start(), m.end(), 0.7)


def find_secrets(text: str) -> Iterator[SecretSpan]:
    """The secrets in ``text`` (spans may overlap; callers merge or rank them)."""
    lower = text.lower()
    yield from _vendor(text)
    yield from _url_passwords(text)
    yield from _assignments(text, lower)
    yield from _contextual_tokens(text, lower)
    yield from _bare_tokens(text)


# -- masking -----------------------------------------------------------------------

_MIN_SECRET: Final = 8  # no rule finds a secret in a shorter text ("pwd=abcd" is 8)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape_surrogates(text: str) -> str:
    """``text`` with its lone surrogates as ``\\udcff`` escapes: what is written to disk
    (a trace, a stored error message) is always valid UTF-8."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def mask_text(text: str, literals: Iterable[str] = ()) -> str:
    """``text`` with every secret (and every given literal) replaced by ``MASK``, and
    any lone surrogate (``"\\udcff"``, which UTF-8 cannot encode) escaped."""
    if not text.isascii():
        text = _escape_surrogates(text)
    for literal in literals:
        if literal:
            text = text.replace(literal, MASK)
    if len(text) < _MIN_SECRET:
        return text
    spans = sorted((s.start, s.end) for s in find_secrets(text))
    if not spans:
        return text
    out: list[str] = []
    done = 0
    for start, end in spans:
        if end <= done:
            continue
        out.append(text[done:max(start, done)])
        if start >= done:
            out.append(MASK)
        done = end
    out.append(text[done:])
    return "".join(out)


def mask_secrets(value: Any, literals: tuple[str, ...] = ()) -> Any:
    """A copy of JSON-ready ``value`` with its secrets masked.

    Strings under a secret key (``is_secret_key``) are replaced by ``MASK`` whole, at
    any depth below it (a list under ``api_keys``, a dict under ``credentials``);
    numbers and booleans stay (``token_count: 12``). Every other string - values and
    mapping keys alike - has its secret-shaped parts masked (``mask_text``).

    Args:
        value: JSON-ready data (dicts, lists, tuples, strings, numbers).
        literals: Exact secrets to mask wherever they appear (e.g. a configured API key).
    """
    if isinstance(value, str):
        return mask_text(value, literals)
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if isinstance(key, str):
                masked_key = mask_text(key, literals)
                out[masked_key] = (_mask_all(item) if is_secret_key(key)
                                   else mask_secrets(item, literals))
            else:
                out[key] = mask_secrets(item, literals)
        return out
    if isinstance(value, list | tuple):
        return [mask_secrets(item, literals) for item in value]
    return value


def _mask_all(value: Any) -> Any:
    if isinstance(value, str):
        return MASK if value else value
    if isinstance(value, Mapping):
        return {k: _mask_all(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_mask_all(v) for v in value]
    return value
