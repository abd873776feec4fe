"""Spending limits: ``CostGuardProcessor`` and the ledgers it records spending in.

``RedisCostLedger`` is imported on first access, so importing this package never
imports ``redis``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from procflow._lazy import lazy_exports
from procflow.processors.builtin.cost.guard import CostGuardProcessor, CostScope, ModelPrice
from procflow.processors.builtin.cost.ledger import CostLedger, InMemoryCostLedger

if TYPE_CHECKING:
    from procflow.processors.builtin.cost.redis import RedisCostLedger

__all__ = ["CostGuardProcessor", "CostLedger", "CostScope", "InMemoryCostLedger", "ModelPrice",
           "RedisCostLedger"]

__getattr__, __dir__ = lazy_exports(__name__, globals())
