"""Result types shared by the detectors (PII, prompt injection, moderation)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["DetectionResult", "PIIDetection", "PIIType"]

PIIType = Literal["email", "phone", "credit-card", "ssn", "api-key", "ip-address", "url",
                  "uuid", "iban", "crypto-wallet", "date-of-birth", "name", "address"]


@dataclass(frozen=True, slots=True)
class PIIDetection:
    """One piece of personal data found in a text.

    Attributes:
        type: What kind of data it is.
        start: Index of its first character in the text.
        end: Index just past its last character.
        value: The matched text (``text[start:end]``).
        confidence: 0..1; rule matches with a passing checksum are near 1.
    """

    type: PIIType
    start: int
    end: int
    value: str
    confidence: float = 1.0


@dataclass(frozen=True, slots=True)
class DetectionResult:
    """A detector's verdict on a text.

    Attributes:
        flagged: Whether the text crosses the detector's threshold.
        score: The highest category score, 0..1.
        categories: Category -> score, for every category that scored above 0.
        reason: A short readable explanation (which rule or category fired).
    """

    flagged: bool
    score: float = 0.0
    categories: dict[str, float] = field(default_factory=dict)
    reason: str = ""
