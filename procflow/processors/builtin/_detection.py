"""Result types shared by the detectors (PII, prompt injection, moderation)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["DetectionResult", "Evidence", "PIIDetection", "PIIType"]

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
        source: What found it: "rules" or "judge".
        view: The text the rule read: "original", or "normalised" when the value
            only matched after Unicode normalisation (no-break spaces, full-width
            characters, non-ASCII digits...); the span is in the original text.
    """

    type: PIIType
    start: int
    end: int
    value: str
    confidence: float = 1.0
    source: str = "rules"
    view: str = "original"


@dataclass(frozen=True, slots=True)
class Evidence:
    """Why a detector scored what it did: one rule, classifier or judge verdict.

    Attributes:
        source: "rule", "signal" (an obfuscation signal), "classifier" or "judge".
        name: The rule's name, or the classifier's / judge model's name.
        category: The category it scored.
        score: Its contribution (a rule's weight, the classifier's score), 0..1.
        view: The text it read: "base" (folded original), "joined", "leet-i",
            "squashed", "rot13", "reversed", "base64:joined", ... ("text" for a
            classifier or judge reading the whole text).
        start: Where the match starts in the ORIGINAL text (``None``: no span).
        end: Just past its end in the original text.
        snippet: The matched text as the view read it (shortened).
    """

    source: str
    name: str
    category: str
    score: float
    view: str = "text"
    start: int | None = None
    end: int | None = None
    snippet: str = ""


@dataclass(frozen=True, slots=True)
class DetectionResult:
    """A detector's verdict on a text.

    Attributes:
        flagged: Whether the text crosses the detector's threshold.
        score: The highest category score, 0..1.
        categories: Category -> score, for every category that scored above 0.
        reason: A short readable explanation (which rule or category fired).
        evidence: Every rule, classifier and judge verdict behind the score, strongest
            first, with the view it read and its span in the original text.
        complete: ``False`` when the detector stopped reading once the verdict was
            certain (a flagged text, see ``PromptInjectionDetector(exhaustive=...)``):
            ``flagged`` is what a full read gives, ``score`` and ``categories`` are at
            least what they show, and ``evidence`` is what was found up to there.
    """

    flagged: bool
    score: float = 0.0
    categories: dict[str, float] = field(default_factory=dict)
    reason: str = ""
    evidence: tuple[Evidence, ...] = ()
    complete: bool = True
