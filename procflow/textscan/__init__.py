"""procflow's text engine (see ``syntax`` for the pattern parser)."""

from __future__ import annotations

__all__: list[str] = []
