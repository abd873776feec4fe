"""An agent stream's chunks kept in its run's storage, so a reader that lost the stream
picks it up again: ``agent.stream(resume_from=run_id, after=n)``.

While ``agent.stream()`` (or ``resume_stream()``) runs, each chunk is appended to the
run's *stream log* (``Storage.append_stream``) before it is handed to the reader, and
the stream's end is appended last: the call's output, its error, or its cancellation.
A follower reads the log from a position on, waits for what is not written yet, and
ends where the stream ended; its final values (``await out.text``, ``out.usage``, ...)
are the call's own, read from the end entry.

The log holds the chunks as the reader got them (after output processors) as JSON: a
tool result that is no JSON value reaches a follower as its ``repr``. It is deleted
with the run (``delete_run``, ``prune_runs``).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import AsyncGenerator, Mapping
from typing import TYPE_CHECKING, Any, Final

import anyio
import pydantic_core

from procflow.agent.output import (
    AgentResponse,
    FullOutput,
    StepRecord,
    SuspendedCall,
    UIMessage,
)
from procflow.errors import RunNotFoundError, RunStateError, SnapshotCorruptedError
from procflow.messages import Chunk, Message, Start
from procflow.models.base import ModelFallback
from procflow.records import ToolCallRecord, ToolResultRecord, Tripwire, Usage
from procflow.runtime.leases import owner_is_dead

if TYPE_CHECKING:
    from procflow.agent.state import Emit
    from procflow.agent.structured import OutputSpec
    from procflow.storage.base import Storage

__all__ = ["ENDED_GRACE", "StreamLog", "follow_stream"]

_END: Final = "end"
"""The key of the entry that ends a stream (no chunk has it)."""
_STALL_POLLS: Final = 3
_STEP_FIELDS: Final = tuple(f.name for f in dataclasses.fields(StepRecord))
ENDED_GRACE: Final = 60.0
"""Seconds a stream whose run has ended may stay silent before a follower gives up on
it: after its run, a call still sends its last chunks and may hand off to another
agent, whose run streams on under its own id."""


class StreamLog:
    """An ``Emit`` that appends each chunk to the run's stream log, then passes it on.

    The log's key is the run id of the stream's ``Start`` chunk; a chunk before it
    (there is none in an agent's stream) is only passed on.
    """

    __slots__ = ("_emit", "_next", "_run_id", "_storage", "_workflow_id")

    def __init__(self, storage: Storage, workflow_id: str, emit: Emit) -> None:
        self._storage = storage
        self._workflow_id = workflow_id
        self._emit = emit
        self._run_id: str | None = None
        self._next = 0

    async def __call__(self, chunk: Chunk) -> None:
        if self._run_id is None and isinstance(chunk, Start) and chunk.run_id:
            self._run_id = chunk.run_id
        if self._run_id is not None:
            await self._append(_encode(chunk.to_dict()))
        await self._emit(chunk)

    async def end(self, output: FullOutput[Any] | None, error: BaseException | None) -> None:
        """Append the stream's end: the output, else the error (``None``: canceled)."""
        if self._run_id is None:
            return
        entry: dict[str, Any] = {_END: "canceled"}
        if output is not None:
            entry = {_END: "output", "output": _output_document(output)}
        elif error is not None:
            entry = {_END: "error", "error": f"{type(error).__name__}: {error}"}
        await self._append(_encode(entry))

    async def _append(self, item: str) -> None:
        assert self._run_id is not None
        await self._storage.append_stream(self._workflow_id, self._run_id, [item],
                                          start=self._next)
        self._next += 1


async def follow_stream(storage: Storage, workflow_id: str, run_id: str, after: int, *,
                        spec: OutputSpec[Any] | None, interval: float,
                        ) -> AsyncGenerator[Chunk | FullOutput[Any], None]:
    """The run's logged chunks from position ``after`` on as they are written, then the
    call's ``FullOutput`` (last).

    Raises:
        RunNotFoundError: The run is not stored, or has no stream log.
        RunStateError: The stream was canceled, or its process stopped before its end.
        WorkflowRunError: The call failed (the error's text is in the message).
        SnapshotCorruptedError: A log entry cannot be decoded.
    """
    at, quiet, news = after, 0, time.monotonic()
    while True:
        entries = await storage.read_stream(workflow_id, run_id, start=at)
        for entry in entries:
            data = _decode(entry, run_id, f"entry {at}")
            if _END in data:
                yield _ending(data, run_id, workflow_id, spec)
                return
            try:
                yield Chunk.from_dict(data)
            except (TypeError, ValueError) as exc:
                raise _corrupted(run_id, f"entry {at}", str(exc)) from exc
            at += 1
        if entries:
            quiet, news = 0, time.monotonic()
        else:
            quiet = await _check_alive(storage, workflow_id, run_id, at, quiet,
                                       time.monotonic() - news)
        await anyio.sleep(interval)


async def _check_alive(storage: Storage, workflow_id: str, run_id: str, at: int,
                       quiet: int, silent: float) -> int:
    """Raise if the stream cannot go on: no run, no log, or no live writer (a "running"
    run whose lease is gone for ``_STALL_POLLS`` polls, or an ended run whose stream
    has been silent for ``ENDED_GRACE`` seconds); else the count of quiet polls."""
    loaded = await storage.load_snapshot(workflow_id, run_id)
    if loaded is None:
        # The stream starts (its first chunk logged) just before its run is first stored.
        if silent < ENDED_GRACE and (at or await storage.read_stream(workflow_id, run_id)):
            return 0
        raise RunNotFoundError(f"no stream of run '{run_id}' of agent workflow "
                               f"'{workflow_id}' is stored", workflow_id=workflow_id,
                               run_id=run_id)
    status = loaded[0].status
    if status != "running":
        if at == 0 and not await storage.read_stream(workflow_id, run_id):
            raise RunNotFoundError(
                f"run '{run_id}' of agent workflow '{workflow_id}' has no stream log (it "
                f"is {status!r}; only a run of agent.stream() or resume_stream() has one)",
                workflow_id=workflow_id, run_id=run_id)
        if silent < ENDED_GRACE:
            return 0  # the call goes on after its run: final chunks, a handoff
        raise RunStateError(
            f"the stream of run '{run_id}' stopped at chunk {at}: its run is {status!r} "
            f"and nothing was written for {ENDED_GRACE:g}s (the process that streamed it "
            "stopped before the stream's end)", workflow_id=workflow_id, run_id=run_id)
    if storage.process_local:
        return 0  # the writer is in this process: it writes the end, whatever happens
    lease = await storage.get_lease(workflow_id, run_id)
    if lease is not None and lease.expires_at > time.time() \
            and not owner_is_dead(lease.owner):
        return 0
    if quiet + 1 < _STALL_POLLS:
        return quiet + 1
    raise RunStateError(
        f"the stream of run '{run_id}' stopped at chunk {at}: no live process holds the "
        "run (its process stopped before the stream's end); await run.restart() "
        "continues the run", workflow_id=workflow_id, run_id=run_id)


def _ending(data: Mapping[str, Any], run_id: str, workflow_id: str,
            spec: OutputSpec[Any] | None) -> FullOutput[Any]:
    kind = data[_END]
    if kind == "output":
        return _output_from(data.get("output"), spec, run_id)
    from procflow.errors import WorkflowRunError

    if kind == "error":
        raise WorkflowRunError(f"the streamed call of run '{run_id}' failed: "
                               f"{data.get('error')}", workflow_id=workflow_id, run_id=run_id)
    raise RunStateError(f"the stream of run '{run_id}' was canceled before its end",
                        workflow_id=workflow_id, run_id=run_id)


# -- encoding ---------------------------------------------------------------------


def _encode(data: Mapping[str, Any]) -> str:
    return pydantic_core.to_json(data, fallback=_repr, bytes_mode="base64",
                                 inf_nan_mode="null").decode()


def _repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception:
        return f"<unrepresentable {type(value).__qualname__}>"


def _decode(entry: str, run_id: str, where: str) -> dict[str, Any]:
    try:
        data = json.loads(entry)
    except ValueError as exc:
        raise _corrupted(run_id, where, f"not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise _corrupted(run_id, where, f"a JSON {type(data).__name__}, not an object")
    return data


def _corrupted(run_id: str, where: str, why: str) -> SnapshotCorruptedError:
    return SnapshotCorruptedError(f"stream log of run '{run_id}', {where}: {why}",
                                  run_id=run_id)


def _output_document(out: FullOutput[Any]) -> dict[str, Any]:
    """``out`` as plain data (``_output_from`` reads it back)."""
    return {
        "text": out.text, "finish_reason": out.finish_reason, "usage": out.usage.to_dict(),
        "steps": [{name: getattr(s, name) for name in _STEP_FIELDS} for s in out.steps],
        "tool_calls": [{"tool_call_id": c.tool_call_id, "tool_name": c.tool_name,
                        "args": dict(c.args)} for c in out.tool_calls],
        "tool_results": [{"tool_call_id": r.tool_call_id, "tool_name": r.tool_name,
                          "result": r.result, "is_error": r.is_error}
                         for r in out.tool_results],
        "tripwire": None if out.tripwire is None else out.tripwire.to_dict(),
        "messages": [m.model_dump(mode="json") for m in out.messages],
        "response": [m.model_dump(mode="json") for m in out.response.messages],
        "ui": [m.id for m in out.response.ui_messages],
        "model": out.response.model,
        "fallbacks": [f.to_dict() for f in out.response.fallbacks],
        "run_id": out.run_id, "agent_id": out.agent_id,
        "suspended": [{"tool_call_id": c.tool_call_id, "tool_name": c.tool_name,
                       "args": c.args, "payload": c.payload} for c in out.suspended],
    }


def _output_from(doc: Any, spec: OutputSpec[Any] | None, run_id: str) -> FullOutput[Any]:
    """The ``FullOutput`` an end entry holds."""
    if not isinstance(doc, dict):
        raise _corrupted(run_id, "the end entry", "it holds no output")
    try:
        messages = [Message.model_validate(m) for m in doc["messages"]]
        response = [Message.model_validate(m) for m in doc["response"]]
        by_id = {m.id: m for m in [*messages, *response]}
        suspended = [SuspendedCall(**c) for c in doc["suspended"]]
        text, reason = str(doc["text"]), str(doc["finish_reason"])
        trip = doc["tripwire"]
        return FullOutput(
            text=text, finish_reason=reason, usage=Usage.from_dict(doc["usage"]),
            steps=[StepRecord(**s) for s in doc["steps"]],
            tool_calls=[ToolCallRecord.from_dict(c) for c in doc["tool_calls"]],
            tool_results=[ToolResultRecord.from_dict(r) for r in doc["tool_results"]],
            tripwire=None if trip is None else Tripwire.from_dict(trip),
            messages=messages,
            response=AgentResponse(
                messages=response,
                ui_messages=[UIMessage.from_message(by_id[i]) for i in doc["ui"]
                             if i in by_id],
                model=doc["model"],
                fallbacks=[ModelFallback.from_dict(f) for f in doc["fallbacks"]]),
            run_id=str(doc["run_id"]), suspended=suspended,
            output=_parsed(spec, text) if spec is not None and reason not in (
                "suspended", "other") else None,
            agent_id=doc["agent_id"])
    except (KeyError, TypeError, ValueError) as exc:
        raise _corrupted(run_id, "the end entry", f"it cannot be read ({exc!r})") from exc


def _parsed(spec: OutputSpec[Any], text: str) -> Any:
    from pydantic import ValidationError

    try:
        return spec.parse(text)
    except ValidationError:
        return None
