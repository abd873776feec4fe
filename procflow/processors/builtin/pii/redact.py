"""Redaction of detected PII: mask, hash, remove or placeholder."""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Iterable
from typing import Literal

from procflow.processors.builtin._detection import PIIDetection, PIIType

__all__ = ["REDACTION_METHODS", "RedactionMethod", "redact_text", "replacement_for",
           "resolve_overlaps"]

RedactionMethod = Literal["mask", "hash", "remove", "placeholder"]
REDACTION_METHODS: tuple[RedactionMethod, ...] = ("mask", "hash", "remove", "placeholder")

# Types whose last four characters are conventionally left visible ("****-1234").
_KEEP_LAST_FOUR: frozenset[PIIType] = frozenset({"credit-card", "phone", "iban", "ssn"})


def _tag(pii_type: PIIType) -> str:
    return pii_type.upper().replace("-", "_")


def _mask(detection: PIIDetection, preserve_format: bool) -> str:
    """The masked value; never equal to the value (every detected type changes)."""
    value = detection.value
    if not preserve_format:
        return "*" * len(value)
    masked = _mask_keeping_format(detection)
    if masked == value:  # too short to keep anything: hide every letter and digit
        masked = "".join("*" if ch.isalnum() else ch for ch in value)
    return masked if masked != value else "*" * len(value)


def _mask_keeping_format(detection: PIIDetection) -> str:
    value = detection.value
    if detection.type == "email" and "@" in value:
        local, domain = value.rsplit("@", 1)
        shown = local[:1] if len(local) > 1 else ""
        return shown + "*" * (len(local) - len(shown)) + "@" + domain
    keep = 4 if detection.type in _KEEP_LAST_FOUR else 0
    if sum(ch.isalnum() for ch in value) <= keep:
        keep = 0
    out: list[str] = []
    for ch in reversed(value):
        if ch.isalnum():
            out.append(ch if keep > 0 else "*")
            keep -= 1
        else:
            out.append(ch)
    return "".join(reversed(out))


def replacement_for(detection: PIIDetection, *, method: RedactionMethod,
                    preserve_format: bool = True) -> str:
    """What replaces one detection's value.

    Args:
        detection: The detection.
        method: "mask" (``*``; with ``preserve_format`` separators stay, an email keeps
            its first letter and domain and cards, phones, IBANs and SSNs their last
            four characters), "hash" (``[<TYPE>:<first 8 hex of SHA-256>]``), "remove"
            (nothing) or "placeholder" (``[<TYPE>]``, e.g. ``[CREDIT_CARD]``).
        preserve_format: Only used by "mask".
    """
    if method == "mask":
        return _mask(detection, preserve_format)
    if method == "hash":
        digest = hashlib.sha256(detection.value.encode("utf-8")).hexdigest()[:8]
        return f"[{_tag(detection.type)}:{digest}]"
    if method == "remove":
        return ""
    return f"[{_tag(detection.type)}]"


def resolve_overlaps(detections: Iterable[PIIDetection]) -> list[PIIDetection]:
    """Sorted by start, without overlaps.

    When two detections overlap, a detection that contains the other wins (so a URL
    keeps the email inside it covered); otherwise the higher confidence wins, the
    longer one on a tie.
    """
    ordered = sorted(detections, key=lambda d: (d.start - d.end, -d.confidence, d.start))
    starts: list[int] = []  # kept detections, non-overlapping, sorted by start
    kept: list[PIIDetection] = []
    for det in ordered:
        # the kept detections overlapping ``det`` are contiguous in start order
        first = bisect_left(starts, det.start)
        if first > 0 and kept[first - 1].end > det.start:
            first -= 1
        last = bisect_left(starts, det.end, lo=first)
        clashes = kept[first:last]
        if not clashes:
            starts.insert(first, det.start)
            kept.insert(first, det)
        elif not any(k.start <= det.start and det.end <= k.end for k in clashes) and all(
                det.confidence > k.confidence for k in clashes):
            starts[first:last] = [det.start]
            kept[first:last] = [det]
    return kept


def redact_text(text: str, detections: Iterable[PIIDetection], *, method: RedactionMethod,
                preserve_format: bool = True) -> str:
    """``text`` with every detection replaced (overlapping detections are resolved first).

    Args:
        text: The text the detections were found in.
        detections: Spans into ``text``.
        method: See ``replacement_for``.
        preserve_format: See ``replacement_for``.
    """
    parts: list[str] = []
    pos = 0
    for det in resolve_overlaps(detections):
        parts.append(text[pos:det.start])
        parts.append(replacement_for(det, method=method, preserve_format=preserve_format))
        pos = det.end
    parts.append(text[pos:])
    return "".join(parts)
