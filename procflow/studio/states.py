"""Node states of a run for ``GraphView``: followed live from a workflow's events or an
agent's chunks, or read afterwards from step results and trace spans."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from procflow.errors import StepExecutionError
from procflow.messages import (
    Chunk,
    ErrorChunk,
    Finish,
    Start,
    StepFinish,
    StepStart,
    TextDelta,
    ToolCallChunk,
    ToolResultChunk,
    TripwireChunk,
)
from procflow.runtime.tracing import redact_secrets
from procflow.studio.graph import NodeState, NodeStatus
from procflow.studio.output import mask
from procflow.workflows.workflow import Workflow

if TYPE_CHECKING:
    from procflow.runtime.events import WorkflowEvent
    from procflow.runtime.results import StepResult

__all__ = [
    "AgentTracker",
    "Progress",
    "WorkflowTracker",
    "node_paths",
    "short",
    "states_from_spans",
    "states_from_steps",
]

_ITEM = re.compile(r"^(?P<base>.*)\[(?P<index>\d+)\]$")
_INDEX = re.compile(r"\[\d+\]")
_DRAWN_KINDS = frozenset({"start", "end", "map"})
_CONTAINERS = frozenset({"loop", "parallel", "branch", "foreach"})
_FINAL: frozenset[str] = frozenset({"success", "failed", "suspended", "skipped", "canceled"})


def short(value: Any, limit: int = 60) -> str:
    """A one-line, at most ``limit`` characters, rendering of ``value`` (secrets masked)."""
    if isinstance(value, BaseException):
        text = str(value) or type(value).__name__
    elif isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(mask(value), default=repr, ensure_ascii=False)
        except (TypeError, ValueError):
            text = repr(value)
    text = " ".join(str(redact_secrets(text)).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def failure_note(error: Any) -> str:
    """A failed step's note on its row: the cause, not the runtime's wrapper that names
    the workflow and the step again (the row names the step; the run's summary line
    gives the whole message)."""
    cause = error.__cause__ if type(error) is StepExecutionError else None
    if isinstance(cause, BaseException):
        return short(f"{type(cause).__name__}: {cause}")
    return short(error)


def node_paths(wf: Workflow) -> tuple[list[str], list[str]]:
    """The step paths ``GraphView`` draws with a state, and the foreach paths among them."""
    graph = wf.graph
    paths = [n for n, a in graph.nodes(data=True) if a["kind"] not in _DRAWN_KINDS]
    foreach = [n for n in paths if graph.nodes[n]["kind"] == "foreach"]
    return paths, foreach


@dataclass(slots=True)
class Progress:
    """Items of one foreach: how many finished out of how many."""

    done: int = 0
    total: int | None = None


@dataclass(slots=True)
class _Node:
    status: NodeStatus = "pending"
    started: float | None = None
    duration: float | None = None
    retries: int = 0
    detail: str | None = None

    def state(self, now: float) -> NodeState:
        duration = self.duration
        if self.status == "running" and self.started is not None:
            duration = max(0.0, now - self.started)
        return NodeState(self.status, duration, self.retries, self.detail)


@dataclass(slots=True)
class _Board:
    nodes: dict[str, _Node] = field(default_factory=dict)

    def start(self, path: str, at: float, detail: str | None = None) -> None:
        node = self.nodes.setdefault(path, _Node())
        node.status, node.started, node.duration, node.detail = "running", at, None, detail

    def end(self, path: str, status: NodeStatus, at: float, detail: str | None = None,
            ) -> None:
        node = self.nodes.setdefault(path, _Node())
        if node.status in _FINAL and node.started is None and status == "success":
            return
        node.status = status
        node.duration = None if node.started is None else max(0.0, at - node.started)
        node.started = None
        if detail is not None:
            node.detail = detail

    def states(self, now: float | None = None) -> dict[str, NodeState]:
        at = time.time() if now is None else now
        return {path: node.state(at) for path, node in self.nodes.items()}


class WorkflowTracker:
    """Follows a workflow run's ``WorkflowEvent``s into node states and foreach progress.

    Args:
        wf: The workflow being run.
        initial: States known before the first event (e.g. the stored steps of a run
            being resumed); the others start pending.
    """

    def __init__(self, wf: Workflow, *, initial: Mapping[str, NodeState] | None = None,
                 ) -> None:
        paths, foreach = node_paths(wf)
        self.workflow = wf
        self._board = _Board({path: _Node() for path in paths})
        for path, state in (initial or {}).items():
            self._board.nodes[path] = _Node(state.status, None, state.duration,
                                            state.retries, state.detail)
        self.progress: dict[str, Progress] = {path: Progress() for path in foreach}

    def states(self, now: float | None = None) -> dict[str, NodeState]:
        """Path → state now (running nodes show the time so far)."""
        return self._board.states(now)

    def on_event(self, event: WorkflowEvent) -> None:
        """Update the states with one event."""
        path, at, payload = event.step_id, event.timestamp, event.payload
        if path is None:
            return
        item = _ITEM.match(path)
        if item is not None and item["base"] in self.progress:
            if event.type == "step-result":
                self.progress[item["base"]].done += 1
            return
        path = _INDEX.sub("", path)  # a step inside a foreach item: shown on its node
        board = self._board
        data = payload if isinstance(payload, Mapping) else {}
        if event.type == "step-start":
            board.start(path, at)
            if path in self.progress and isinstance(data.get("items"), int):
                self.progress[path] = Progress(0, data["items"])
        elif event.type == "step-result":
            board.end(path, "success", at)
        elif event.type == "step-error":
            board.end(path, "failed", at, failure_note(data.get("error")))
        elif event.type == "step-suspended":
            note = data.get("payload")
            board.end(path, "suspended", at, None if note is None else short(note))
        elif event.type == "step-skipped":
            board.end(path, "skipped", at)
        retries = data.get("retries", data.get("attempt"))
        if isinstance(retries, int) and path in board.nodes:
            board.nodes[path].retries = retries


class AgentTracker:
    """Follows an agent's stream chunks onto the nodes of its loop workflow.

    Attributes:
        text: The streamed text so far.
        tools: One line per tool call ("lookup({"id": 7}) → ..."), in order.
        problem: The tripwire or error, once one happened.
    """

    _IN, _STEP, _PREP = "input-processors", "agent-step", "agent-step.prepare-step"
    _LLM, _OUT, _TOOLS = "agent-step.llm-call", "agent-step.output-step", "agent-step.tool-calls"
    _AFTER = ("output-processors", "memory-save")

    def __init__(self, wf: Workflow) -> None:
        paths, _ = node_paths(wf)
        self.workflow = wf
        self._board = _Board({path: _Node() for path in paths})
        self.text = ""
        self.tools: list[str] = []
        self.problem: str | None = None
        self._calls: dict[str, int] = {}
        self._steps = 0

    def states(self, now: float | None = None) -> dict[str, NodeState]:
        """Path → state now."""
        return self._board.states(now)

    def on_chunk(self, chunk: Chunk, now: float | None = None) -> None:
        """Update the states with one chunk."""
        at = time.time() if now is None else now
        board = self._board
        match chunk:
            case Start():
                board.start(self._IN, at)
            case StepStart():
                self._finish_running(at, keep=(self._STEP,))
                self._steps += 1
                if board.nodes.get(self._STEP, _Node()).status != "running":
                    board.start(self._STEP, at)
                board.nodes[self._STEP].detail = f"step {self._steps}"
                board.end(self._PREP, "success", at)
                board.start(self._LLM, at)
            case TextDelta(text=text):
                self.text += text
            case ToolCallChunk(tool_call_id=call_id, tool_name=name, args=args):
                self._calls[call_id] = len(self.tools)
                self.tools.append(f"{name}({short(args or {}, 40)})")
            case ToolResultChunk():
                self._tool_result(chunk, at)
            case StepFinish():
                board.end(self._LLM, "success", at)
                board.end(self._OUT, "success", at)
                if self._calls:
                    board.start(self._TOOLS, at)
            case Finish():
                self._finish_running(at)
                for path in (self._STEP, *self._AFTER):
                    board.end(path, "success", at)
            case TripwireChunk(reason=what) | ErrorChunk(error=what):
                self.problem = f"{chunk.type}: {short(what, 200)}"
                self._fail_running(at, f"{chunk.type}: {short(what, 40)}")

    def _tool_result(self, chunk: ToolResultChunk, at: float) -> None:
        index = self._calls.pop(chunk.tool_call_id, None)
        mark = "✖" if chunk.is_error else "→"
        line = f"{mark} {short(chunk.result, 60)}"
        if index is not None:
            self.tools[index] += f" {line}"
        if not self._calls:
            self._board.end(self._TOOLS, "success", at)

    def _finish_running(self, at: float, keep: Iterable[str] = ()) -> None:
        for path, node in self._board.nodes.items():
            if node.status == "running" and path not in keep:
                self._board.end(path, "success", at)

    def _fail_running(self, at: float, detail: str) -> None:
        running = [p for p, n in self._board.nodes.items() if n.status == "running"]
        for path in running or [self._LLM]:
            self._board.end(path, "failed", at, detail)


def states_from_steps(steps: Mapping[str, StepResult], *, kept_before: float | None = None,
                      kept_note: str = "kept") -> dict[str, NodeState]:
    """Node states from a result's step records (``WorkflowResult.steps``).

    Args:
        steps: Step path → result.
        kept_before: Results that ended before this time were not run by this
            execution (kept from an earlier run); they are noted with ``kept_note``.
        kept_note: The note of such results.
    """
    states: dict[str, NodeState] = {}
    for path, rec in steps.items():
        if "[" in path:  # foreach items are drawn on their foreach node
            continue
        duration = None if rec.ended_at is None else max(0.0, rec.ended_at - rec.started_at)
        detail = None
        if rec.status == "failed" and rec.error is not None:
            detail = failure_note(rec.error)
        elif rec.status == "suspended" and rec.suspend_payload is not None:
            detail = short(rec.suspend_payload)
        if rec.iterations > 1:
            detail = f"{rec.iterations} iterations" + (f" · {detail}" if detail else "")
        if kept_before is not None and rec.ended_at is not None and rec.ended_at < kept_before:
            detail = kept_note + (f" · {detail}" if detail else "")
        states[path] = NodeState(rec.status, duration, max(0, rec.attempts - 1), detail)
    return states


def states_from_spans(spans: Iterable[Mapping[str, Any]],
                      paths: Iterable[str]) -> dict[str, NodeState]:
    """Node states from a stored trace's spans, for the given node paths.

    A path seen several times (a loop body) shows its last status, its summed time and
    the number of runs.
    """
    wanted = set(paths)
    seen: dict[str, list[Mapping[str, Any]]] = {}
    by_id: dict[Any, Mapping[str, Any]] = {}
    for span in spans:
        by_id[span.get("span_id")] = span
        path = span.get("path")
        if path is None:
            path = _drawn_path(span, by_id)
        if isinstance(path, str) and path in wanted and span.get("kind") != "run":
            seen.setdefault(path, []).append(span)
    states: dict[str, NodeState] = {}
    for path, spans_of_path in seen.items():
        # a loop's container span shares its body's path: count the body's runs
        group = [s for s in spans_of_path if s.get("kind") not in _CONTAINERS] or spans_of_path
        last = group[-1]
        total = sum(float(s["end"]) - float(s["start"]) for s in group if s.get("end"))
        notes = [f"×{len(group)}"] if len(group) > 1 else []
        if last.get("error"):
            notes.append(short(last["error"]))
        attempts = (last.get("attributes") or {}).get("attempts", 1)
        status = last.get("status", "success")
        states[path] = NodeState("failed" if status == "tripwire" else status,
                                 total if any(s.get("end") for s in group) else None,
                                 max(0, int(attempts) - 1), " · ".join(notes) or None)
    return states


def _drawn_path(span: Mapping[str, Any], by_id: Mapping[Any, Mapping[str, Any]],
                ) -> str | None:
    """The node an agent loop draws for a processor or tool span (which has no path of
    its own): ``<stage>.processor:<id>`` or ``<tool step>.tool:<name>``."""
    kind, name = span.get("kind"), span.get("name")
    if kind not in ("processor", "tool") or not isinstance(name, str) or ": " not in name:
        return None
    parent = by_id.get(span.get("parent_id"))
    where = None if parent is None else parent.get("path")
    if not isinstance(where, str):
        return None
    ident = name.rsplit(": ", 1)[1]
    if kind == "processor":
        return f"{where}.processor:{ident}"
    return f"{where.removesuffix('.run')}.tool:{ident}"
