"""Durations written as text: "30d", "12h", "15m", "90s", "2w" or a number of seconds."""

from __future__ import annotations

import re
from typing import Final

__all__ = ["DURATION_EXAMPLES", "parse_duration"]

_DURATION: Final = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw]?)")
_UNITS: Final = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
DURATION_EXAMPLES: Final = "30d, 12h, 15m, 90s, 2w or a number of seconds"


def parse_duration(text: str) -> float | None:
    """Seconds in ``text`` (one number and an optional unit: s, m, h, d or w), or
    ``None`` when it is not a duration."""
    found = _DURATION.fullmatch(text.strip().lower())
    if found is None:
        return None
    return float(found.group(1)) * _UNITS[found.group(2)]
