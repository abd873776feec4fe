"""What the studio prints for scripts: masked values, plain one-record-per-line text and
``--json`` documents (their JSON schemas are shipped in ``procflow/studio/schemas``).

Every value the studio prints passes through ``mask`` — the redaction traces use — so a
secret a step returned is no more visible on the terminal than in the stored trace.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic_core import to_jsonable_python

from procflow.runtime.tracing import redact_secrets

if TYPE_CHECKING:
    import argparse

    from rich.console import Console

    from procflow.agent.output import FullOutput
    from procflow.records import Usage
    from procflow.runtime.results import WorkflowResult
    from procflow.runtime.tracing import TraceRecord
    from procflow.workflows.workflow import Workflow

__all__ = ["DRAWING_WIDTH", "SCHEMAS", "agent_run_document", "drawing_width", "dump",
           "format_cost", "graph_document", "mask", "masked", "output_mode", "plain_duration",
           "plain_time", "run_row_document", "step_lines", "trace_document", "trace_lines",
           "workflow_run_document"]

SCHEMAS = Path(__file__).parent / "schemas"
"""The JSON schemas of the ``--json`` documents: runs.json, trace.json, graph.json,
run.json."""


DRAWING_WIDTH = 100
"""How wide a drawing is when stdout is not a terminal and ``COLUMNS`` is not set."""


def drawing_width(console: Console | None = None) -> int:
    """How wide a drawing (graph, trace tree, timeline, SVG) is: ``COLUMNS`` when set,
    else the terminal's width, else ``DRAWING_WIDTH`` (a pipe, a file)."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if console is not None and console.is_terminal:
        return shutil.get_terminal_size((DRAWING_WIDTH, 24)).columns
    return DRAWING_WIDTH


def mask(value: Any) -> Any:
    """``value`` as JSON-ready data with secrets replaced by "***" (as in traces)."""
    try:
        data = to_jsonable_python(value, fallback=repr, serialize_unknown=True)
    except Exception:  # anything unencodable is shown as its repr
        data = repr(value)
    return redact_secrets(data)


def masked(text: str) -> str:
    """``text`` with API-key-shaped secrets replaced by "***"."""
    result = redact_secrets(text)
    return result if isinstance(result, str) else str(result)


def dump(document: Mapping[str, Any]) -> str:
    """One JSON document, indented, non-ASCII kept."""
    return json.dumps(document, indent=2, ensure_ascii=False, default=repr)


def plain_duration(seconds: float | None) -> str:
    """Seconds with millisecond precision ("0.012"), or "-" when unknown."""
    return "-" if seconds is None else f"{max(0.0, seconds):.3f}"


def plain_time(timestamp: float | None) -> str | None:
    """An ISO 8601 local time without spaces ("2024-11-30T06:52:32")."""
    if timestamp is None:
        return None
    return datetime.fromtimestamp(timestamp).isoformat(timespec="seconds")


def format_cost(cost: float | None) -> str:
    """A USD amount, short: "$0.0042", "$1.25"; "?" when unknown."""
    if cost is None:
        return "?"
    if cost >= 1:
        return f"${cost:.2f}"
    text = f"{cost:.6f}".rstrip("0").rstrip(".")
    return f"${text}" if text != "0" or cost == 0 else "<$0.000001"


def run_row_document(run_id: str, workflow_id: str, status: str, started: float,
                     duration: float | None, suspended: Sequence[str],
                     usage: Usage | None = None) -> dict[str, Any]:
    """One run of ``procflow runs --json`` (``usage``: its tokens and USD ``cost``,
    ``null`` for a run that called no model)."""
    return {"run_id": run_id, "workflow_id": workflow_id, "status": status,
            "started_at": plain_time(started), "duration_s": duration,
            "suspended_at": list(suspended),
            "usage": None if usage is None else usage.to_dict()}


def trace_document(trace: TraceRecord) -> dict[str, Any]:
    """``procflow trace --json``: the stored trace (already redacted), spans in order."""
    return {"run_id": trace.run_id, "workflow_id": trace.workflow_id,
            "status": trace.status, "started_at": trace.started_at,
            "ended_at": trace.ended_at, "spans": [mask(dict(row)) for row in trace.spans]}


def trace_lines(trace: TraceRecord) -> Iterator[str]:
    """``procflow trace`` piped: a header, then one tab-separated line per span in tree
    order: status, seconds, kind, name (indented two spaces a level), notes."""
    from procflow.studio.trace import _label, _notes, _SpanTree

    took = None if trace.ended_at is None else trace.ended_at - trace.started_at
    yield (f"# workflow {trace.workflow_id}\trun {trace.run_id}\t{trace.status}\t"
           f"{plain_duration(took)}\t{len(trace.spans)} spans")
    tree = _SpanTree(trace.spans)
    for i, _, depth, _, _ in tree.walk():
        row = tree.rows[i]
        start, end = row.get("start"), row.get("end")
        seconds = None if end is None or start is None else end - start
        notes = _notes(row.get("attributes") or {})
        tripwire = (row.get("attributes") or {}).get("tripwire")
        if isinstance(tripwire, dict):
            notes.append(f"tripwire: {tripwire.get('reason')}")
        if row.get("error"):
            notes.append(f"error: {row['error']}")
        note = " ".join(masked(" · ".join(notes)).split())
        yield "\t".join([str(row.get("status")), plain_duration(seconds),
                         str(row.get("kind")), "  " * depth + masked(_label(row)), note])


def step_lines(rows: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    """``procflow trace --step`` piped: for each matching span a header line, then one
    tab-separated ``field<TAB>value`` line per field and attribute (values as JSON on
    one line, masked, nothing truncated)."""
    for row in rows:
        start, end = row.get("start"), row.get("end")
        seconds = None if end is None or start is None else end - start
        yield (f"# span {row.get('span_id')}\t{row.get('name')}\t{row.get('path') or '-'}\t"
               f"{row.get('status')}\t{plain_duration(seconds)}")
        fields = [(key, row.get(key)) for key in ("kind", "input", "output", "error")]
        fields += [(f"attributes.{k}", v) for k, v in (row.get("attributes") or {}).items()]
        for key, value in fields:
            if value is not None:
                text = value if isinstance(value, str) else json.dumps(
                    mask(value), ensure_ascii=False, default=repr)
                yield f"{key}\t{' '.join(masked(text).split())}"


def graph_document(wf: Workflow) -> dict[str, Any]:
    """``procflow graph --json``: the workflow's nodes (step paths with their kind) and
    edges, with the label of each conditional edge's condition."""
    from procflow.studio.export import condition_name
    from procflow.workflows.plan import BranchEntry, LoopEntry

    labels: dict[str, str] = {}

    def walk(flow: Workflow, prefix: str) -> None:
        for entry in flow.entries:
            if isinstance(entry, BranchEntry):
                names = entry.labels or (None,) * len(entry.branches)
                for (condition, step), label in zip(entry.branches, names, strict=True):
                    labels[prefix + step.id] = condition_name(condition, label)
            elif isinstance(entry, LoopEntry):
                labels[prefix + entry.step.id] = condition_name(entry.condition, entry.label)
            for step in _steps_of(entry):
                if isinstance(step, type(flow)):
                    walk(step, prefix + step.id + ".")

    walk(wf, "")
    graph = wf.graph
    nodes = []
    for node, attrs in graph.nodes(data=True):
        item: dict[str, Any] = {"id": str(node), "kind": str(attrs.get("kind")),
                                "label": str(attrs.get("label", node))}
        if attrs.get("parent") is not None:
            item["parent"] = str(attrs["parent"])
        if attrs.get("hooks"):
            item["hooks"] = [str(h) for h in attrs["hooks"]]
        if attrs.get("loop"):
            item["loop"] = str(attrs["loop"])
        if str(node) in labels:
            item["condition"] = labels[str(node)]
        nodes.append(item)
    edges = [{"from": str(a), "to": str(b), "conditional": bool(d.get("conditional", False))}
             for a, b, d in graph.edges(data=True)]
    return {"workflow_id": wf.id, "description": wf.description, "nodes": nodes,
            "edges": edges}


def _steps_of(entry: Any) -> list[Any]:
    if hasattr(entry, "steps"):
        return list(entry.steps)
    if hasattr(entry, "branches"):
        return [step for _, step in entry.branches]
    step = getattr(entry, "step", None)
    return [step] if step is not None else []


def workflow_run_document(result: WorkflowResult, *, resume: Sequence[str] = (),
                          replayed_from: str | None = None) -> dict[str, Any]:
    """``procflow run --json`` for a workflow: status, output, steps, how to resume."""
    steps = {path: {"status": rec.status, "output": mask(rec.output),
                    "error": None if rec.error is None else masked(str(rec.error)),
                    "attempts": rec.attempts}
             for path, rec in result.steps.items()}
    return {"kind": "workflow", "run_id": result.run_id, "status": result.status,
            "output": mask(result.result),
            "error": None if result.error is None else masked(str(result.error)),
            "tripwire": mask(result.tripwire.to_dict()) if result.tripwire else None,
            "suspended_at": result.suspended_at,
            "resume_commands": list(resume), "replayed_from": replayed_from,
            "steps": steps}


def agent_run_document(output: FullOutput, *, resume: Sequence[str] = ()) -> dict[str, Any]:
    """``procflow run --json`` for an agent: the answer, finish reason, usage, run id and,
    for a suspended run, the tool calls it waits on and the commands resuming it."""
    return {"kind": "agent", "run_id": output.run_id,
            "status": "tripwire" if output.tripwire is not None else
            "suspended" if output.suspended else
            "failed" if output.finish_reason == "error" else "success",
            "text": masked(output.text), "finish_reason": output.finish_reason,
            "usage": mask(output.usage.to_dict()),
            "tripwire": None if output.tripwire is None else mask(output.tripwire.to_dict()),
            "tool_calls": mask(output.tool_calls), "tool_results": mask(output.tool_results),
            "suspended": [mask({"tool_call_id": c.tool_call_id, "tool_name": c.tool_name,
                                "args": c.args, "payload": c.payload})
                          for c in output.suspended],
            "resume_commands": list(resume)}


def output_mode(args: argparse.Namespace, console: Console) -> str:
    """ "json", "plain" (``--plain`` or not a terminal) or "tty"."""
    if getattr(args, "json", False):
        return "json"
    return "plain" if getattr(args, "plain", False) or not console.is_terminal else "tty"
