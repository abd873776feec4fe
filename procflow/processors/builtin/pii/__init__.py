"""Personal-data detection: the rule engine, checksums, names and addresses, redaction."""

from __future__ import annotations

from procflow.processors.builtin.pii.detector import ALL_PII_TYPES, DEFAULT_PII_TYPES, PIIDetector

__all__ = ["ALL_PII_TYPES", "DEFAULT_PII_TYPES", "PIIDetector"]
