"""What model calls cost: prices per million tokens, and the USD cost of a ``Usage``.

``PRICES`` holds list prices of common models (USD per million tokens); ``set_prices``
adds or replaces entries (your negotiated prices, models missing here). A hosted
model prices every call it makes (``Usage.cost``); a model without a price costs
``None``, never a guess.

A price applies to its model id and to that id's dated snapshots:
``"openai/gpt-4o"`` prices ``"openai/gpt-4o-2024-08-06"`` but not ``"openai/gpt-4o-mini"``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from procflow.records import Usage

__all__ = ["PRICES", "ModelPrice", "PriceLike", "price_of", "priced", "set_prices"]

_PER: Final = 1_000_000
_SNAPSHOT = re.compile(r"-(?:\d{4}-?\d{2}-?\d{2}|\d{3}|latest|(?:preview|exp)(?:-[\d-]+)?)")


def _amount(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value < 0:
        raise ValueError(f"ModelPrice: {what} must be a finite number >= 0, got {value!r}")
    return float(value)


def _count(usage: Mapping[str, Any], key: str) -> int:
    value = usage.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return 0
    return max(int(value), 0)


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """A model's prices, in USD per million tokens.

    Attributes:
        input: Per million input (prompt) tokens.
        output: Per million output tokens (reasoning tokens included).
        cached_input: Per million cached input tokens, when the usage reports
            ``cached_input_tokens``; ``None`` prices them as ``input``.

    Raises:
        ValueError: A price is negative or not a finite number.
    """

    input: float
    output: float
    cached_input: float | None = None

    def __post_init__(self) -> None:  # prices are floats, whatever number was given
        object.__setattr__(self, "input", _amount(self.input, "an input price"))
        object.__setattr__(self, "output", _amount(self.output, "an output price"))
        if self.cached_input is not None:
            object.__setattr__(self, "cached_input",
                               _amount(self.cached_input, "a cached input price"))

    def cost(self, usage: Usage | Mapping[str, Any]) -> float:
        """The cost of ``usage`` (``input_tokens``, ``output_tokens``, optionally
        ``cached_input_tokens``); missing or malformed counts count as 0."""
        counts = usage.to_dict() if isinstance(usage, Usage) else usage
        tokens_in = _count(counts, "input_tokens")
        cached = min(_count(counts, "cached_input_tokens"), tokens_in) \
            if self.cached_input is not None else 0
        total = ((tokens_in - cached) * self.input
                 + _count(counts, "output_tokens") * self.output
                 + cached * (self.cached_input or 0.0))
        return total / _PER

    @classmethod
    def of(cls, value: PriceLike) -> ModelPrice:
        """A price from a ``ModelPrice``, a ``{"input", "output", "cached_input"}`` dict or
        an ``(input, output)`` pair.

        Raises:
            ValueError: Any other shape, or a bad price.
        """
        if isinstance(value, ModelPrice):
            return value
        if isinstance(value, Mapping):
            unknown = sorted(str(k) for k in value if k not in ("input", "output",
                                                                 "cached_input"))
            if unknown or "input" not in value or "output" not in value:
                raise ValueError(f"ModelPrice: a price dict needs 'input' and 'output' "
                                 f"(and optionally 'cached_input'), got {sorted(map(str, value))}")
            return cls(**value)
        if isinstance(value, tuple) and len(value) == 2:
            return cls(*value)
        raise ValueError(f"ModelPrice: a price is a ModelPrice, a dict or an "
                         f"(input, output) pair per million tokens, got {value!r}")


PriceLike: TypeAlias = ModelPrice | Mapping[str, float] | tuple[float, float]
"""A ``ModelPrice``, a ``{"input", "output"[, "cached_input"]}`` dict or a pair."""

PRICES: Final[dict[str, ModelPrice]] = {name: ModelPrice(*price) for name, price in {
    # OpenAI, standard tier
    "openai/gpt-5": (1.25, 10.0, 0.125),
    "openai/gpt-5-mini": (0.25, 2.0, 0.025),
    "openai/gpt-5-nano": (0.05, 0.40, 0.005),
    "openai/gpt-4.1": (2.0, 8.0, 0.50),
    "openai/gpt-4.1-mini": (0.40, 1.60, 0.10),
    "openai/gpt-4.1-nano": (0.10, 0.40, 0.025),
    "openai/gpt-4o": (2.50, 10.0, 1.25),
    "openai/gpt-4o-mini": (0.15, 0.60, 0.075),
    "openai/o3": (2.0, 8.0, 0.50),
    "openai/o4-mini": (1.10, 4.40, 0.275),
    # Anthropic (cache reads; cache writes are priced as input)
    "anthropic/claude-opus-4-1": (15.0, 75.0, 1.50),
    "anthropic/claude-sonnet-4-5": (3.0, 15.0, 0.30),
    "anthropic/claude-sonnet-4": (3.0, 15.0, 0.30),
    "anthropic/claude-sonnet-4-0": (3.0, 15.0, 0.30),
    "anthropic/claude-opus-4": (15.0, 75.0, 1.50),
    "anthropic/claude-haiku-4-5": (1.0, 5.0, 0.10),
    "anthropic/claude-3-5-haiku": (0.80, 4.0, 0.08),
    # Google, prompts up to 200k tokens
    "google/gemini-2.5-pro": (1.25, 10.0, 0.31),
    "google/gemini-2.5-flash": (0.30, 2.50, 0.075),
    "google/gemini-2.5-flash-lite": (0.10, 0.40, 0.025),
    "google/gemini-2.0-flash": (0.10, 0.40, 0.025),
}.items()}
"""List prices (USD per million tokens: input, output, cached input) by
``"provider/model_id"``; change them with ``set_prices``."""


def set_prices(prices: Mapping[str, PriceLike]) -> None:
    """Add or replace prices in ``PRICES`` (e.g. your contract's, or a model not listed).

    Args:
        prices: ``"provider/model_id"`` -> ``ModelPrice``, ``{"input", "output"}`` dict or
            ``(input, output)`` pair, per million tokens.

    Raises:
        ValueError: A key is not "provider/model_id" or a price is invalid (nothing is
            changed then).

    Example::

        set_prices({"ollama/llama3.2": (0, 0), "openai/gpt-4o": (2.0, 8.0)})
    """
    checked: dict[str, ModelPrice] = {}
    for name, value in prices.items():
        if not isinstance(name, str) or "/" not in name:
            raise ValueError(f"price keys are 'provider/model_id' (e.g. 'openai/gpt-5-mini'), "
                             f"got {name!r}")
        checked[name] = ModelPrice.of(value)
    PRICES.update(checked)


def price_of(model: str) -> ModelPrice | None:
    """The price of ``model`` (``"provider/model_id"``): its own entry, else the entry
    of the model it is a dated snapshot of; ``None`` when unknown."""
    price = PRICES.get(model)
    if price is not None:
        return price
    best: str | None = None
    for name in PRICES:
        if model.startswith(name) and _SNAPSHOT.fullmatch(model[len(name):]) \
                and (best is None or len(name) > len(best)):
            best = name
    return None if best is None else PRICES[best]


def priced(usage: Usage, model: str) -> Usage:
    """``usage`` with its ``cost`` from ``model``'s price (unchanged when unknown)."""
    price = price_of(model)
    if price is None:
        return usage
    return dataclasses.replace(usage, cost=price.cost(usage))
