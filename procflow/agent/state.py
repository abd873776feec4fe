"""``AgentRun``: the in-memory state one ``generate``/``stream`` call carries through the
agent's loop workflow."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from procflow.errors import TripWire
from procflow.messages import Chunk, Message, MessageList
from procflow.models.base import LanguageModel
from procflow.processors._hooks import StepInfo, StepOverrides
from procflow.processors._runner import ProcessorRunner
from procflow.processors.args import ProcessorContext

if TYPE_CHECKING:
    from procflow.agent.agent import Agent
    from procflow.agent.output import StepRecord
    from procflow.tools import Tool

__all__ = ["AgentRun", "Emit"]

Emit = Callable[[Chunk], Awaitable[None]]


@dataclass(eq=False)
class AgentRun:
    """Everything one agent call needs and produces; passed between the loop's steps.

    Attributes:
        done: The loop should stop (final answer, max steps, tripwire or error).
        redo: The current step is being retried (a processor asked, with feedback);
            the rest of this iteration is skipped.
    """

    agent: Agent
    model: LanguageModel
    tools: dict[str, Tool]
    ml: MessageList
    inputs: ProcessorRunner
    outputs: ProcessorRunner
    errors: ProcessorRunner
    ctx: ProcessorContext
    max_steps: int
    tool_choice: Any
    emit: Emit
    api_retry_budget: int
    steps: list[StepRecord] = field(default_factory=list)
    step_number: int = 0
    current: StepOverrides = field(default_factory=StepOverrides)
    pending_calls: list[dict[str, Any]] = field(default_factory=list)
    tripwire: TripWire | None = None
    error: BaseException | None = None
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=lambda: {
        "input_tokens": 0, "output_tokens": 0, "total_tokens": 0})
    done: bool = False
    redo: bool = False
    api_retries: int = 0
    run_id: str = ""
    streaming: bool = True  # False for generate(): chunks need not be emitted

    __procflow_untraced__ = True  # spans do not record this (mutable, internal) object

    def __repr__(self) -> str:
        return f"AgentRun(agent={self.agent.id!r}, step={self.step_number}, done={self.done})"

    def info(self) -> StepInfo:
        """Where the loop is, for processor hooks."""
        return StepInfo(self.step_number, list(self.steps))

    async def trip(self, trip: TripWire) -> None:
        """End the loop on a processor's abort, telling the caller with a tripwire chunk."""
        if self.tripwire is None:
            self.tripwire = trip
            await self.emit(Chunk.tripwire(trip.reason, trip.processor_id, trip.retry,
                                           trip.metadata))
        self.done = True

    def feedback(self, trip: TripWire) -> None:
        """Give a processor's retry reason to the model as a hidden reminder."""
        pid = trip.processor_id or "processor"
        msg = Message.user(f'<system-reminder type="processor-feedback" processor="{pid}">'
                           f"{trip.reason}</system-reminder>")
        msg.content.metadata["signal"] = {"type": "processor-feedback", "processor_id": pid,
                                          "hidden": True, "transient": True}
        self.ml.add(msg, source="input")

    def add_usage(self, usage: dict[str, Any] | None) -> dict[str, int]:
        """Add one call's usage to the total; returns it normalised."""
        got = {k: int((usage or {}).get(k) or 0)
               for k in ("input_tokens", "output_tokens", "total_tokens")}
        if not got["total_tokens"]:
            got["total_tokens"] = got["input_tokens"] + got["output_tokens"]
        for key, value in got.items():
            self.usage[key] += value
        return got
