"""Regex filtering of text with presets and user patterns."""

from __future__ import annotations

from procflow.processors.builtin.regex.filter import RegexFilterProcessor, RegexRule

__all__ = ["RegexFilterProcessor", "RegexRule"]
