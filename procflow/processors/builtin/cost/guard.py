"""``CostGuardProcessor``: stop (or flag) a resource, thread or run that spent its budget.

After every model call (``process_llm_response``) it prices the call's usage — the
"finish" chunk's ``usage`` times the model's per-million-token prices given to it, else
the cost the model computed from ``procflow.models.prices`` (``Usage.cost``) — and records it
in a ``CostLedger`` under the scope's key. Before every model call
(``process_input_step``) it sums the scope's costs over the window and, at or over
``max_cost``, aborts the request ("block") or reports a violation ("warn").

It is approximate by design: a call is priced after it ran, so the call that crosses
the budget completes and the next one is stopped. It fails open: a request without the
scope's id is not checked, and a failing ledger is logged and does not stop the call.

Only an agent's *input* processors receive ``process_llm_response``, so add it to
``input_processors``.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, Final, Literal, get_args
from uuid import uuid4

from procflow._durations import DURATION_EXAMPLES, parse_duration
from procflow.context import RESOURCE_ID_KEY, THREAD_ID_KEY
from procflow.messages import Finish
from procflow.models.prices import ModelPrice
from procflow.processors.args import ProcessInputStepArgs, ProcessLLMResponseArgs
from procflow.processors.base import Processor
from procflow.processors.builtin.cost.ledger import CostLedger, InMemoryCostLedger

__all__ = ["DEFAULT_COST_MESSAGE", "DEFAULT_WINDOW", "CostGuardProcessor", "CostScope",
           "ModelPrice"]

logger = logging.getLogger("procflow.processors.cost_guard")

CostScope = Literal["resource", "thread", "run"]
Strategy = Literal["block", "warn"]

DEFAULT_WINDOW: Final = 7 * 24 * 3600.0
"""Seconds of spending counted against the budget: 7 days."""
DEFAULT_COST_MESSAGE: Final = ("Cost limit exceeded: {usage} spent of the {limit} allowed "
                               "for this {scope}")


def _amount(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value < 0:
        raise ValueError(f"CostGuardProcessor: {what} must be a finite number >= 0, "
                         f"got {value!r}")
    return float(value)


def _money(value: float) -> str:
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return text or "0"


def _choice(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"CostGuardProcessor: {name} must be one of {list(allowed)}, "
                         f"got {value!r}")


class CostGuardProcessor(Processor):
    """Stops a scope (resource, thread or run) once its spending reaches ``max_cost``.

    Args:
        max_cost: The budget (> 0), in the currency of ``prices``.
        prices: ``"provider/model_id"`` -> ``ModelPrice``, ``{"input", "output"}`` dict or
            ``(input, output)`` pair, per million tokens. A model missing here is priced
            as its calls' ``Usage.cost`` says (``procflow.models.prices``).
        default_price: Used for models with neither; ``None`` (default) counts their
            calls as free, with a warning logged once per model.
        scope: Whose spending counts: "resource" (``RESOURCE_ID_KEY``, default), "thread"
            (``THREAD_ID_KEY``) or "run" (this request alone).
        window: The period counted: seconds, a ``timedelta`` or a string such as "30d",
            "1h", "15m" or "90s" (default 7 days).
        strategy: "block" aborts the request (a tripwire); "warn" reports a violation
            once per request and lets it go on.
        message: The reason given; ``{usage}``, ``{limit}``, ``{scope}`` and
            ``{scope_key}`` are filled in.
        ledger: Where costs are kept (default: a new ``InMemoryCostLedger``).
        clock: Returns the time in seconds (default ``time.time``; a shared ledger needs
            the same clock in every process).
        id: The processor id.

    Raises:
        ValueError: An invalid setting (the message names it).

    Example::

        guard = CostGuardProcessor(5.0, prices={"openai/gpt-5-mini": (0.25, 2.0)},
                                   scope="resource", window=timedelta(days=30))
        agent = Agent(..., input_processors=[guard])
    """

    def __init__(self, max_cost: float, *,
                 prices: Mapping[str, ModelPrice | Mapping[str, float] | tuple[float, float]]
                 | None = None,
                 default_price: ModelPrice | Mapping[str, float] | tuple[float, float]
                 | None = None,
                 scope: CostScope = "resource", window: float | timedelta | str = DEFAULT_WINDOW,
                 strategy: Strategy = "block", message: str = DEFAULT_COST_MESSAGE,
                 ledger: CostLedger | None = None, clock: Callable[[], float] = time.time,
                 id: str = "cost-guard") -> None:
        if not isinstance(id, str) or not id:
            raise ValueError(f"CostGuardProcessor: id must be a non-empty str, got {id!r}")
        self.id = id
        self.max_cost = _amount(max_cost, "max_cost")
        if self.max_cost <= 0:
            raise ValueError("CostGuardProcessor: max_cost must be > 0, got 0")
        self.prices = _prices(prices)
        self.default_price = (None if default_price is None
                              else _price_of(default_price, "default_price"))
        _choice("scope", scope, get_args(CostScope))
        _choice("strategy", strategy, get_args(Strategy))
        self.scope: CostScope = scope
        self.strategy: Strategy = strategy
        self.window = _seconds(window)
        self.message = _template(message)
        if ledger is not None and not isinstance(ledger, CostLedger):
            raise ValueError(f"CostGuardProcessor: ledger must have async add() and total() "
                             f"(a CostLedger), got {type(ledger).__name__}")
        self.ledger: CostLedger = ledger if ledger is not None else InMemoryCostLedger()
        self._clock = clock
        self._unpriced: set[str] = set()

    # -- scope ------------------------------------------------------------------------

    def _scope_id(self, args: ProcessInputStepArgs | ProcessLLMResponseArgs) -> str | None:
        if self.scope == "run":
            run_key: str | None = args.state.get("run_key")
            if run_key is None:
                run_key = args.state["run_key"] = uuid4().hex
            return run_key
        value = args.request_context.get(
            RESOURCE_ID_KEY if self.scope == "resource" else THREAD_ID_KEY)
        return str(value) if value not in (None, "") else None

    def _ledger_key(self, scope_id: str) -> str:
        return f"{self.scope}:{scope_id}"

    # -- pricing ----------------------------------------------------------------------

    def price_for(self, model: Any) -> ModelPrice | None:
        """The price of ``model`` (by ``"provider/model_id"``), else ``default_price``."""
        return self._price(self._name(model))

    @staticmethod
    def _name(model: Any) -> str:
        return f"{getattr(model, 'provider', '?')}/{getattr(model, 'model_id', '?')}"

    def _price(self, name: str) -> ModelPrice | None:
        price = self.prices.get(name, self.default_price)
        if price is None and name not in self._unpriced:
            self._unpriced.add(name)
            logger.warning("CostGuardProcessor %r: no price for model %r; its calls count as "
                           "free. Add it to prices= or give default_price=. Known: %s",
                           self.id, name, sorted(self.prices) or "none")
        return price

    # -- hooks ------------------------------------------------------------------------

    async def process_input_step(self, args: ProcessInputStepArgs) -> None:
        """Check the scope's spending in the window against ``max_cost``.

        Raises:
            TripwireError: Spending is at or over the budget and the strategy is "block"; its
                metadata is ``{usage, max_cost, scope, scope_key}``.
        """
        scope_id = self._scope_id(args)
        if scope_id is None:
            logger.debug("CostGuardProcessor %r: no %s id in the request context; not "
                         "checked", self.id, self.scope)
            return
        now = self._clock()
        try:
            spent = await self.ledger.total(self._ledger_key(scope_id), since=now - self.window)
        except Exception as exc:
            logger.warning("CostGuardProcessor %r: reading the ledger failed (%s); the call "
                           "proceeds unchecked", self.id, exc)
            return
        args.state["usage"] = spent
        if spent < self.max_cost:
            return
        reason = self.message.format(usage=_money(spent), limit=_money(self.max_cost),
                                     scope=self.scope, scope_key=scope_id)
        detail = {"usage": spent, "max_cost": self.max_cost, "scope": self.scope,
                  "scope_key": scope_id}
        if self.strategy == "block":
            args.abort(reason, metadata=detail)
        if not args.state.get("warned"):
            args.state["warned"] = True
            args.warn(reason, detail)

    async def process_llm_response(self, args: ProcessLLMResponseArgs) -> None:
        """Price the call's usage and record it in the ledger (not for cache replays)."""
        if args.from_cache:
            return
        usage = next((c.usage for c in reversed(args.chunks) if isinstance(c, Finish)), None)
        if usage is None:
            return
        name = self._name(args.model)
        if name not in self.prices and usage.cost is not None:
            cost = usage.cost  # the model priced its call (procflow.models.prices)
        else:
            price = self._price(name)
            cost = price.cost(usage) if price is not None else 0.0
        scope_id = self._scope_id(args)
        if cost <= 0 or scope_id is None:
            return
        args.state["spent"] = args.state.get("spent", 0.0) + cost
        try:
            await self.ledger.add(self._ledger_key(scope_id), cost, at=self._clock(),
                                  ttl=self.window)
        except Exception as exc:
            logger.warning("CostGuardProcessor %r: recording a cost of %s failed (%s); it is "
                           "not counted", self.id, _money(cost), exc)


def _price_of(value: Any, where: str) -> ModelPrice:
    try:
        return ModelPrice.of(value)
    except ValueError as exc:
        raise ValueError(f"CostGuardProcessor: {where}: {exc}") from None


def _prices(prices: Mapping[str, Any] | None) -> dict[str, ModelPrice]:
    if prices is None:
        return {}
    if not isinstance(prices, Mapping):
        raise ValueError(f"CostGuardProcessor: prices must be a dict of 'provider/model_id' "
                         f"-> price, got {type(prices).__name__}")
    out: dict[str, ModelPrice] = {}
    for name, value in prices.items():
        if not isinstance(name, str) or "/" not in name:
            raise ValueError(f"CostGuardProcessor: price keys are 'provider/model_id' (e.g. "
                             f"'openai/gpt-5-mini'), got {name!r}")
        out[name] = _price_of(value, f"prices[{name!r}]")
    return out


def _seconds(window: float | timedelta | str) -> float:
    seconds = (window.total_seconds() if isinstance(window, timedelta)
               else parse_duration(window) if isinstance(window, str) else window)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) \
            or not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"CostGuardProcessor: window must be a duration > 0: seconds, a "
                         f"timedelta or a string such as {DURATION_EXAMPLES}; got {window!r}")
    return float(seconds)


def _template(message: str) -> str:
    if not isinstance(message, str):
        raise ValueError(f"CostGuardProcessor: message must be a str, got {message!r}")
    try:
        message.format(usage="1", limit="1", scope="resource", scope_key="k")
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"CostGuardProcessor: message {message!r} is not a valid template "
                         f"({type(exc).__name__}: {exc}); use the placeholders {{usage}}, "
                         "{limit}, {scope} and {scope_key}, and double other braces") from None
    return message
