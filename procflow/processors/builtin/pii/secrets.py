"""Rules for the "api-key" PII type: credentials and secrets.

Three tiers, strongest first:

1. Vendor formats with a fixed prefix (OpenAI/Anthropic ``sk-``, AWS ``AKIA``/``ASIA``,
   GitHub ``ghp_``/``github_pat_``, Slack ``xox?-``, Google ``AIza``, Stripe
   ``sk_live_``/``rk_live_``, GitLab ``glpat-``, npm, SendGrid, Hugging Face), JWTs and
   PEM private keys.
2. Assignments in config or prose: ``password=...``, ``"api_key": "..."``,
   ``Authorization: Bearer ...`` - the value only, placeholders excluded.
3. A long, high-entropy token right after a word such as "key", "token" or "secret".
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from procflow.processors.builtin._detection import PIIDetection
from procflow.processors.builtin.pii.checks import shannon_entropy

__all__ = ["find_api_keys"]

_B = r"(?<![A-Za-z0-9_-])"
_E = r"(?![A-Za-z0-9_-])"

_VENDOR: tuple[tuple[re.Pattern[str], float], ...] = tuple(
    (re.compile(pattern), confidence) for pattern, confidence in (
        (_B + r"sk-(?:proj-|svcacct-|admin-|ant-(?:api\d{2}-|admin\d{2}-)?)?"
              r"[A-Za-z0-9_-]{20,}" + _E, 0.95),
        (_B + r"(?:AKIA|ASIA)[0-9A-Z]{16}" + _E, 0.95),
        (_B + r"gh[pousr]_[A-Za-z0-9]{36,255}" + _E, 0.97),
        (_B + r"github_pat_[A-Za-z0-9_]{22,255}" + _E, 0.97),
        (_B + r"xox[baprs]-[A-Za-z0-9-]{10,}" + _E, 0.95),
        (_B + r"AIza[0-9A-Za-z_-]{35}" + _E, 0.95),
        (_B + r"(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{10,}" + _E, 0.97),
        (_B + r"glpat-[A-Za-z0-9_-]{20,}" + _E, 0.95),
        (_B + r"npm_[A-Za-z0-9]{36}" + _E, 0.95),
        (_B + r"SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}" + _E, 0.95),
        (_B + r"hf_[A-Za-z0-9]{30,40}" + _E, 0.9),
        (_B + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}" + _E, 0.9),
        (r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
         r"(?:[\s\S]{0,8000}?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
         r"|(?:\s*[A-Za-z0-9+/=]{16,})*)", 0.99),
    ))

_KEY_NAME = (r"(?:[A-Za-z0-9]+[_-])*(?:password|passwd|pwd|passphrase|pass|"
             r"api[_-]?key|apikey|secret(?:[_-]?(?:access[_-]?)?key)?|client[_-]?secret|"
             r"access[_-]?token|auth[_-]?token|refresh[_-]?token|session[_-]?token|"
             r"private[_-]?key|token)")
_ASSIGN = re.compile(
    r"(?i)(?<![\w-])(?P<key>" + _KEY_NAME + r")[\"']?[ \t]*[:=][ \t]*(?P<q>[\"']?)"
    r"(?P<value>[^\s\"'`,;<>]*[^\s\"'`,;<>).!?]{4,200})(?P=q)")
_PROSE_PASSWORD = re.compile(
    r"(?i)\b(?:password|passphrase|passcode|passwort|mot de passe|contraseña)"
    r"(?:[ \t]+(?:is|was|will be))?(?:[ \t]+(?:set to|now|changed to|reset to))?[ \t]+"
    r"(?P<value>[^\s\"'`,;<>()]{6,64})(?<![.!?])")
_PUBLIC_KEY = re.compile(r"(?i)(?:public|ssh-(?:rsa|ed25519|dss)|ecdsa-sha2-\S+)[\s:]*$")
_BEARER = re.compile(r"(?i)\bbearer[ \t]+(?P<value>[A-Za-z0-9._~+/-]{16,}=*)(?![\w.~+/=-])")
_SECRET_WORD = re.compile(
    r"(?i)\b(?:api[ _-]?keys?|access[ _-]?keys?|secrets?|tokens?|credentials?|keys?)\b")
_TOKEN = re.compile(r"(?<![\w/+=.-])[A-Za-z0-9_+/=-]{20,}(?![\w/+=.-])")

_PLACEHOLDER_WORDS = frozenset({
    "none", "null", "nil", "undefined", "true", "false", "redacted", "hidden", "masked",
    "required", "optional", "string", "empty", "secret", "password", "token", "unset",
    "yes", "no", "n/a", "na", "tbd", "todo",
})
_PLACEHOLDER = re.compile(r"(?i)^(?:[*•x.#_-]+|[<\[{$%].*|.*(?:your|xxxx|_here|example).*|"
                          r"[A-Za-z_][\w.]*\(.*)$")
_PASSWORD_KEYS = ("password", "passwd", "pwd", "passphrase", "pass")


def _is_placeholder(value: str) -> bool:
    return value.lower() in _PLACEHOLDER_WORDS or _PLACEHOLDER.match(value) is not None


def _random_looking(value: str, *, min_entropy: float = 3.3) -> bool:
    has_digit = any(ch.isdigit() for ch in value)
    has_alpha = any(ch.isalpha() for ch in value)
    return has_digit and has_alpha and shannon_entropy(value) >= min_entropy


def _assignments(text: str) -> Iterator[PIIDetection]:
    for m in _ASSIGN.finditer(text):
        key, value = m.group("key").lower(), m.group("value")
        if _is_placeholder(value):
            continue
        if key.endswith(_PASSWORD_KEYS):
            if key.endswith("pass") and not _random_looking(value):
                continue
            yield PIIDetection("api-key", m.start("value"), m.end("value"), value, 0.8)
        elif len(value) >= 8 and _random_looking(value):
            yield PIIDetection("api-key", m.start("value"), m.end("value"), value, 0.85)
    for m in _PROSE_PASSWORD.finditer(text):
        value = m.group("value")
        if not _is_placeholder(value) and _random_looking(value, min_entropy=2.5):
            yield PIIDetection("api-key", m.start("value"), m.end("value"), value, 0.7)
    for m in _BEARER.finditer(text):
        value = m.group("value")
        if not _is_placeholder(value) and _random_looking(value):
            yield PIIDetection("api-key", m.start("value"), m.end("value"), value, 0.85)


def _contextual_tokens(text: str) -> Iterator[PIIDetection]:
    for word in _SECRET_WORD.finditer(text):
        if _PUBLIC_KEY.search(text[max(0, word.start() - 12):word.start()]):
            continue
        line_end = text.find("\n", word.end())
        window_end = min(len(text) if line_end < 0 else line_end, word.end() + 64)
        for m in _TOKEN.finditer(text, word.end(), window_end):
            value = m.group()
            if value.count("/") > 2 or not _random_looking(value) or _is_placeholder(value):
                continue
            if _PUBLIC_KEY.search(text[max(0, m.start() - 24):m.start()]):
                continue
            if shannon_entropy(value) < 3.5 or sum(ch.isdigit() for ch in value) < 2:
                continue
            yield PIIDetection("api-key", m.start(), m.end(), value, 0.75)


def find_api_keys(text: str) -> Iterator[PIIDetection]:
    """Credentials and secrets in ``text`` (may overlap; the detector resolves that)."""
    for pattern, confidence in _VENDOR:
        for m in pattern.finditer(text):
            yield PIIDetection("api-key", m.start(), m.end(), m.group(), confidence)
    yield from _assignments(text)
    yield from _contextual_tokens(text)
