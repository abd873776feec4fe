"""What ``procflow run`` prints after the run's final view: status, output, run id and,
for a suspended run, the command line that resumes it."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from procflow.studio.output import format_cost, mask, masked
from procflow.studio.states import short

if TYPE_CHECKING:
    from procflow.agent.output import FullOutput
    from procflow.runtime.results import WorkflowResult

__all__ = ["RUN_SYMBOLS", "print_agent_failure", "print_agent_summary",
           "print_workflow_summary", "to_json", "waiting_calls"]

RUN_SYMBOLS: dict[str, tuple[str, str]] = {
    "pending": ("○", "dim"),
    "running": ("◐", "yellow"),
    "stalled": ("◌", "bold yellow"),
    "success": ("●", "green"),
    "failed": ("✖", "red"),
    "tripwire": ("✖", "red"),
    "suspended": ("⏸", "magenta"),
    "canceled": ("■", "dim red"),
}
"""Run status → (symbol, style), the symbols of ``GraphView``'s node states."""


def to_json(value: Any) -> str:
    """``value`` as indented JSON (pydantic models and dataclasses included; anything
    else as its repr), secrets masked as in traces."""
    return json.dumps(mask(value), indent=2, ensure_ascii=False, default=repr)


def _status(status: str, note: str | None = None) -> Text:
    symbol, style = RUN_SYMBOLS.get(status, ("?", ""))
    text = Text.assemble((f"{symbol} {status}", f"bold {style}"))
    if note:
        text.append(f": {note}")
    return text


def print_workflow_summary(console: Console, result: WorkflowResult, *,
                           resume_command: Callable[[str], str]) -> None:
    """Print a workflow run's outcome.

    Args:
        console: Where to print.
        result: The run's result.
        resume_command: Step path → the command line resuming the run at that step.
    """
    status = result.status
    if status == "success":
        console.print(_status(status))
        output = to_json(result.result)
        separator = "\n" if "\n" in output else " "
        console.print(Text(f"output:{separator}{output}"), soft_wrap=True)
    elif status == "suspended":
        paths = result.suspended_at
        console.print(_status(status, f"waiting at {', '.join(paths)}"))
        for path in paths:
            payload = result.steps.get(path)
            if payload is not None and payload.suspend_payload is not None:
                console.print(Text(f"  {path} asks: {short(payload.suspend_payload, 200)}"),
                              soft_wrap=True)
    elif status == "tripwire":
        trip = result.tripwire
        by = f" (processor {trip.processor_id})" if trip and trip.processor_id else ""
        console.print(_status(status, f"{trip.reason if trip else ''}{by}"), soft_wrap=True)
    else:
        error = short(result.error, 300) if result.error is not None else None
        console.print(_status(status, error), soft_wrap=True)
    console.print(Text(f"run id: {result.run_id}"), soft_wrap=True)
    if status == "suspended":
        console.print(Text("resume with:"))
        for path in result.suspended_at:
            console.print(Text(f"  {resume_command(path)}"), soft_wrap=True)


def print_agent_summary(console: Console, output: FullOutput, *,
                        resume: Sequence[str] = ()) -> None:
    """Print an agent run's outcome: status, the answer (or the tool calls a suspended
    run waits on), usage, the run id and, for a suspended run, the ``resume`` lines."""
    if output.tripwire is not None:
        trip = output.tripwire
        by = f" (processor {trip.processor_id})" if trip.processor_id else ""
        console.print(_status("tripwire", f"{trip.reason}{by}"), soft_wrap=True)
    elif output.suspended:
        count = len(output.suspended)
        console.print(_status("suspended", f"waiting on {count} tool call"
                              f"{'' if count == 1 else 's'}"))
        for call in output.suspended:
            what = ("needs approval" if call.payload is None
                    else f"asks: {short(call.payload, 200)}")
            console.print(Text(f"  {call.tool_call_id}  {call.tool_name}"
                               f"({short(call.args, 80)}) {what}"), soft_wrap=True)
    else:
        console.print(_status("success", f"finish reason {output.finish_reason}"))
        if console.is_terminal:
            console.print(Panel(Text(masked(output.text)), title="answer", title_align="left",
                                expand=False))
        else:  # piped: the answer as it is, no frame (a long one is not one wide line)
            console.print(Text(f"answer:\n{masked(output.text)}"), soft_wrap=True)
    if output.usage:
        usage = ", ".join(f"{k} {format_cost(v) if k == 'cost' else v}"
                          for k, v in output.usage.to_dict().items())
        console.print(Text(f"usage: {usage}", style="dim"), soft_wrap=True)
    console.print(Text(f"run id: {output.run_id}"), soft_wrap=True)
    if resume:
        console.print(Text("resume with:"))
        for line in resume:
            console.print(Text(f"  {line}"), soft_wrap=True)


def waiting_calls(result: WorkflowResult) -> list[Mapping[str, Any]]:
    """The tool calls a suspended agent run waits on (``tool_call_id``, ``tool_name``,
    ``args`` and, for a tool that suspended itself, ``payload``), from its stored
    suspend payloads."""
    calls: list[Mapping[str, Any]] = []
    for path in result.suspended_at:
        record = result.steps.get(path)
        payload = None if record is None else record.suspend_payload
        if isinstance(payload, Mapping):
            calls.extend(c for c in payload.get("suspended") or () if isinstance(c, Mapping))
    return calls


def print_agent_failure(console: Console, error: BaseException, run_id: str | None) -> None:
    """Print an agent run that raised (a provider error nobody retried)."""
    console.print(_status("failed", f"{type(error).__name__}: {short(error, 300)}"),
                  soft_wrap=True)
    if run_id is not None:
        console.print(Text(f"run id: {run_id}"), soft_wrap=True)
