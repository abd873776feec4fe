"""Rules for the "api-key" PII type: credentials and secrets.

The rules themselves live in ``procflow._secrets``, shared with the masking of traces
and stored errors, so what the detector calls a secret is exactly what never reaches
disk: vendor formats with a fixed prefix, JWTs, PEM private keys, passwords in URLs,
assignments in config or prose (``password=...``, ``"api_key": "..."``,
``Authorization: Bearer ...``) and long random tokens right after a word such as
"key", "token" or "secret".
"""

from __future__ import annotations

from collections.abc import Iterator

from procflow._secrets import find_secrets
from procflow.processors.builtin._detection import PIIDetection

__all__ = ["find_api_keys"]


def find_api_keys(text: str) -> Iterator[PIIDetection]:
    """Credentials and secrets in ``text`` (may overlap; the detector resolves that)."""
    for found in find_secrets(text):
        yield PIIDetection("api-key", found.start, found.end, text[found.start:found.end],
                           found.confidence)
