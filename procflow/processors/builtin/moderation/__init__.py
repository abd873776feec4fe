"""Content moderation: the weighted lexicon, idiom masking and the processor."""

from __future__ import annotations

from procflow.processors.builtin.moderation.detector import ModerationProcessor

__all__ = ["ModerationProcessor"]
