"""JSON encoding of run snapshots, shared by the persistent storage backends.

A run is stored as one header document (``dump_snapshot``) plus one document per step
path (``dump_step``). Values the user controls (inputs, outputs, state, payloads) are
encoded by ``procflow.storage.values``: losslessly, types included, or refused with
``UnstorableValueError`` (the runtime refuses them at the step, as a
``StepValidationError``, and caches the encoding on the ``StepResult``). Decoding is the
reverse, except that exceptions come back as ``StepExecutionError`` carrying the
original type name in their message.

Decoding validates the shape and the status values; anything wrong raises
``SnapshotCorruptedError`` naming the workflow, the run (and the step path).

A run's trace is one more document (``dump_trace``): the ``TraceRecord`` header fields
plus its spans, which are JSON-ready already but are encoded just as defensively.
``load_trace_json`` decodes it strictly (a trace is only ever written by procflow), and
``load_trace_header`` checks the header fields a backend keeps outside the document.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import pydantic_core
from pydantic import BaseModel, ConfigDict, ValidationError

from procflow.errors import SnapshotCorruptedError, StepExecutionError, StepTimeoutError
from procflow.records import (
    RunSnapshot,
    RunStatus,
    StepResult,
    StepStatus,
    TraceRecord,
    Tripwire,
)
from procflow.storage.values import (
    SKIP_BLOBS,
    UndecodableValueError,
    UnstorableValueError,
    decode_value,
    encode_value,
)

__all__ = [
    "BLOB_PREFIX",
    "BLOB_SIZE",
    "FORMAT_VERSION",
    "TRACE_FORMAT_VERSION",
    "FixedFields",
    "dump_run",
    "dump_snapshot",
    "dump_step",
    "dump_steps",
    "dump_trace",
    "encode_snapshot",
    "encode_step",
    "listed_snapshot",
    "load_job_run",
    "load_run",
    "load_snapshot_json",
    "load_step_json",
    "load_trace_header",
    "load_trace_json",
]

FORMAT_VERSION: Final = 1
"""Version of the stored header layout (the ``"v"`` key of a header document)."""

TRACE_FORMAT_VERSION: Final = 1
"""Version of the stored trace layout (the ``"v"`` key of a trace document)."""

# Procflow's own step errors are rebuilt as themselves; any other type is wrapped.
_STEP_ERRORS: Final[dict[str, type[StepExecutionError]]] = {
    f"{cls.__module__}.{cls.__qualname__}": cls
    for cls in (StepExecutionError, StepTimeoutError)
}
_MAX_CAUSE_DEPTH: Final = 3


# --------------------------------------------------------------------------- encoding


def _fallback(value: Any) -> Any:
    """Stand-in for a span value that cannot be encoded: its repr, or its type name."""
    try:
        return repr(value)
    except Exception:
        return f"<unrepresentable {type(value).__qualname__}>"


def _to_json(value: Any) -> str:
    return pydantic_core.to_json(
        value, fallback=_fallback, bytes_mode="base64", inf_nan_mode="null",
    ).decode()


def _jsonable(value: Any) -> Any:
    """``value`` as plain JSON data, or its repr when even that fails (cycles, bad bytes)."""
    try:
        return pydantic_core.to_jsonable_python(
            value, fallback=_fallback, bytes_mode="base64", inf_nan_mode="null",
        )
    except Exception:
        return _fallback(value)


def _type_name(exc: BaseException) -> str:
    cls = type(exc)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def _encode_error(exc: BaseException | None, depth: int = 0) -> dict[str, Any] | None:
    if exc is None:
        return None
    try:
        message = str(exc)
    except Exception:
        message = _fallback(exc)
    # Error messages are for people, not for resuming: secrets in them never reach disk.
    from procflow._secrets import mask_text  # its ~25 patterns compile on first use

    stored: dict[str, Any] = {"type": _type_name(exc), "message": mask_text(message)}
    step_id = getattr(exc, "step_id", None)
    if isinstance(step_id, str):
        stored["step_id"] = step_id
    attempt = getattr(exc, "attempt", None)
    if isinstance(attempt, int) and not isinstance(attempt, bool):
        stored["attempt"] = attempt
    cause = exc.__cause__
    if cause is not None and depth < _MAX_CAUSE_DEPTH:
        stored["cause"] = _encode_error(cause, depth + 1)
    return stored


def _encode_fields(document: dict[str, Any], keys: tuple[str, ...],
                   blobs: dict[str, str | bytes] | None, blob_size: int | None,
                   digests: dict[int, tuple[Any, str]] | None = None) -> str:
    """Encode the value fields of ``document`` in place, then the document as JSON.

    Raises:
        UnstorableValueError: A value cannot be stored; ``where()`` starts at its field.
    """
    for key in keys:
        value = document[key]
        if value is None:  # (most payload fields of most steps)
            continue
        try:
            document[key] = encode_value(value, blobs=blobs, blob_size=blob_size,
                                         digests=digests)
        except UnstorableValueError as exc:
            exc.parts.append(key)
            raise
    return pydantic_core.to_json(document).decode()


BLOB_SIZE: Final = 64 * 1024
"""Strings and bytes longer than this are stored once, as content-addressed blobs."""

BLOB_PREFIX: Final = "$blob:"
"""The path prefix of the blob rows stored beside a run's step rows."""

_STEP_VALUES: Final = ("output", "suspend_payload", "resume_data", "partial")
_RUN_VALUES: Final = ("input", "state", "result", "suspended", "tripwire",
                      "request_context")


_FIXED_VALUES: Final = ("input", "request_context")
_CHANGING_VALUES: Final = ("state", "result", "suspended", "tripwire")


class FixedFields:
    """The part of a run's header that stays the same while the run executes (ids,
    creation time, input, persisted request context), encoded once: ``encode_snapshot``
    given one reuses that JSON while the snapshots hold the same input and request
    context objects, and encodes only the rest at each write. One per execution."""

    __slots__ = ("_blobs", "_input", "_json", "_key", "_request_context")

    def __init__(self) -> None:
        self._key: tuple[str, str, float] | None = None
        self._input: Any = None
        self._request_context: Any = None
        self._json = ""
        self._blobs: dict[str, str | bytes] = {}

    def encoded(self, snapshot: RunSnapshot, blob_size: int | None,
                digests: dict[int, tuple[Any, str]] | None,
                ) -> tuple[str, dict[str, str | bytes]]:
        """The fixed fields' JSON object without its closing brace, and their blobs.

        Raises:
            UnstorableValueError: A value cannot be stored.
        """
        key = (snapshot.workflow_id, snapshot.run_id, snapshot.created_at)
        if (key != self._key or snapshot.input is not self._input
                or snapshot.request_context is not self._request_context):
            document: dict[str, Any] = {
                "v": FORMAT_VERSION, "workflow_id": key[0], "run_id": key[1],
                "created_at": key[2], "input": snapshot.input,
                "request_context": snapshot.request_context}
            blobs: dict[str, str | bytes] = {}
            text = _encode_fields(document, _FIXED_VALUES, blobs, blob_size, digests)
            self._key, self._input = key, snapshot.input
            self._request_context = snapshot.request_context
            self._json, self._blobs = text[:-1], blobs
        return self._json, self._blobs


def encode_snapshot(snapshot: RunSnapshot, *, blob_size: int | None = BLOB_SIZE,
                    digests: dict[int, tuple[Any, str]] | None = None,
                    fixed: FixedFields | None = None,
                    ) -> tuple[str, dict[str, str | bytes]]:
    """Encode a run header: its JSON document and the blobs it references.

    Args:
        snapshot: The header to encode.
        blob_size: Strings and bytes longer than this become blob references.
        digests: Known digests of large values by identity (see ``encode_value``).
        fixed: The run's fields that do not change, encoded once (see ``FixedFields``;
            the document then holds the same fields in another order).

    Raises:
        UnstorableValueError: A value cannot be stored (its path starts at the field,
            e.g. ``"state.cart[2]"``).
    """
    if fixed is not None:
        head, fixed_blobs = fixed.encoded(snapshot, blob_size, digests)
        rest: dict[str, Any] = {
            "status": snapshot.status,
            "updated_at": snapshot.updated_at,
            "state": snapshot.state,
            "result": snapshot.result,
            "error": _encode_error(snapshot.error),
            "suspended": snapshot.suspended,
            "tripwire": None if snapshot.tripwire is None else snapshot.tripwire.to_dict(),
        }
        blobs: dict[str, str | bytes] = dict(fixed_blobs)
        text = _encode_fields(rest, _CHANGING_VALUES, blobs, blob_size, digests)
        return head + "," + text[1:], blobs
    document: dict[str, Any] = {
        "v": FORMAT_VERSION,
        "workflow_id": snapshot.workflow_id,
        "run_id": snapshot.run_id,
        "status": snapshot.status,
        "created_at": snapshot.created_at,
        "updated_at": snapshot.updated_at,
        "input": snapshot.input,
        "state": snapshot.state,
        "result": snapshot.result,
        "error": _encode_error(snapshot.error),
        "suspended": snapshot.suspended,
        "tripwire": None if snapshot.tripwire is None else snapshot.tripwire.to_dict(),
        "request_context": snapshot.request_context,
    }
    blobs = {}
    return _encode_fields(document, _RUN_VALUES, blobs, blob_size, digests), blobs


def dump_snapshot(snapshot: RunSnapshot) -> str:
    """Encode a run header as one JSON document, every value inline (no blobs).

    Raises:
        UnstorableValueError: A value cannot be stored.
    """
    return encode_snapshot(snapshot, blob_size=None)[0]


def encode_step(result: StepResult, *, blob_size: int | None = BLOB_SIZE,
                digests: dict[int, tuple[Any, str]] | None = None,
                ) -> tuple[str, dict[str, str | bytes]]:
    """Encode one step result: its JSON document and the blobs it references.

    Args:
        result: The step result to encode.
        blob_size: Strings and bytes longer than this become blob references.
        digests: Known digests of large values by identity (see ``encode_value``).

    Raises:
        UnstorableValueError: A value cannot be stored (its path starts at the field,
            e.g. ``"output.items[3].price"``).
    """
    document: dict[str, Any] = {
        "status": result.status,
        "output": result.output,
        "error": _encode_error(result.error),
        "started_at": result.started_at,
        "ended_at": result.ended_at,
        "attempts": result.attempts,
        "suspend_payload": result.suspend_payload,
        "resume_data": result.resume_data,
        "iterations": result.iterations,
        "partial": result.partial,
    }
    if result.lost:  # (rare: left out otherwise; a document without it reads as 0)
        document["lost"] = result.lost
    blobs: dict[str, str | bytes] = {}
    return _encode_fields(document, _STEP_VALUES, blobs, blob_size, digests), blobs


def dump_step(result: StepResult) -> str:
    """Encode one step result as one JSON document, every value inline (no blobs).

    Raises:
        UnstorableValueError: A value cannot be stored.
    """
    return encode_step(result, blob_size=None)[0]


def dump_run(snapshot: RunSnapshot, steps: Mapping[str, StepResult],
             ) -> tuple[str, list[tuple[str, str]]]:
    """Encode a run header and step results as a backend stores them.

    Large strings and bytes (over ``BLOB_SIZE``) are stored once, as content-addressed
    blob rows beside the step rows (path ``"$blob:<sha256>"``), and referenced by digest
    from the documents. The runtime encodes each result when its step ends and the
    header at each write (``encoded``, with only the blobs this execution has not
    written yet); anything else is encoded here.

    Args:
        snapshot: The run's header.
        steps: The step results to write.

    Returns:
        The header document and the ``(path, document)`` rows to upsert, blobs included.

    Raises:
        UnstorableValueError: A value cannot be stored.
    """
    given = snapshot.encoded is not None
    header, blobs = snapshot.encoded if given else encode_snapshot(snapshot)
    rows: list[tuple[str, str]] = []
    for path, result in steps.items():
        text, found = result.encoded if result.encoded is not None else encode_step(result)
        rows.append((path, text))
        if not given:
            blobs = {**blobs, **found}
    rows.extend((BLOB_PREFIX + digest, _blob_row(content))
                for digest, content in blobs.items())
    return header, rows


def dump_steps(steps: Mapping[str, StepResult]) -> list[tuple[str, str]]:
    """Encode step results without their run's header (a distributed job writes only
    its own rows): ``dump_run``'s rows, blobs included.

    Raises:
        UnstorableValueError: A value cannot be stored.
    """
    rows: list[tuple[str, str]] = []
    blobs: dict[str, str | bytes] = {}
    for path, result in steps.items():
        text, found = result.encoded if result.encoded is not None else encode_step(result)
        rows.append((path, text))
        blobs.update(found)
    rows.extend((BLOB_PREFIX + digest, _blob_row(content))
                for digest, content in blobs.items())
    return rows


def _blob_row(content: str | bytes) -> str:
    if isinstance(content, str):
        return "s" + content
    return "b" + base64.b64encode(content).decode("ascii")


def load_run(header: str | bytes, rows: Iterable[tuple[str, str | bytes]], *,
             workflow_id: str, run_id: str) -> tuple[RunSnapshot, dict[str, StepResult]]:
    """Decode what ``dump_run`` stored: the header and the step rows, blobs included.

    Args:
        header: The header document.
        rows: Every ``(path, document)`` row stored for the run.
        workflow_id: The workflow the run is stored under.
        run_id: The run.

    Raises:
        SnapshotCorruptedError: A part cannot be decoded (its message names the part:
            the snapshot, the result of step ``x``, or blob ``sha``).
    """
    snapshot, steps, _ = _load_run(header, rows, workflow_id=workflow_id, run_id=run_id,
                                   defer_input=False)
    return snapshot, steps


def load_job_run(header: str | bytes, rows: Iterable[tuple[str, str | bytes]], *,
                 workflow_id: str, run_id: str,
                 ) -> tuple[RunSnapshot, dict[str, StepResult], Callable[[], Any]]:
    """``load_run`` for a distributed job, which rarely reads its run's input (a foreach's
    input may hold every item): the snapshot's ``input`` is left undecoded (``None``) and
    the returned function decodes it.

    Raises:
        SnapshotCorruptedError: A part cannot be decoded (the input: when the function is
            called).
    """
    return _load_run(header, rows, workflow_id=workflow_id, run_id=run_id, defer_input=True)


def _load_run(header: str | bytes, rows: Iterable[tuple[str, str | bytes]], *,
              workflow_id: str, run_id: str, defer_input: bool,
              ) -> tuple[RunSnapshot, dict[str, StepResult], Callable[[], Any]]:
    blobs: dict[str, str | bytes] = {}
    documents: list[tuple[str, str | bytes]] = []
    for path, text in rows:
        if path.startswith(BLOB_PREFIX):
            digest = path.removeprefix(BLOB_PREFIX)
            blobs[digest] = _blob_content(text, digest, workflow_id=workflow_id,
                                          run_id=run_id)
        else:
            documents.append((path, text))
    stored = parse_snapshot_json(header, workflow_id=workflow_id, run_id=run_id)
    snapshot = _snapshot(stored, blobs, workflow_id=workflow_id, run_id=run_id,
                         with_input=not defer_input)
    steps = {path: load_step_json(text, workflow_id=workflow_id, run_id=run_id, path=path,
                                  blobs=blobs)
             for path, text in documents}

    def load_input() -> Any:
        return _decoded("snapshot", stored.input, blobs, workflow_id=workflow_id,
                        run_id=run_id)

    return snapshot, steps, load_input


def _blob_content(text: str | bytes, digest: str, *, workflow_id: str,
                  run_id: str) -> str | bytes:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "surrogateescape")
    try:
        if text[:1] == "s":
            return text[1:]
        if text[:1] == "b":
            return base64.b64decode(text[1:], validate=True)
    except ValueError:
        pass
    raise _corrupted(f"blob {digest!r}", "it is neither text nor base64 bytes",
                     workflow_id=workflow_id, run_id=run_id)


def _jsonable_span(span: Any) -> dict[str, Any]:
    """A span as a JSON object whatever it holds (a non-mapping is kept as its repr)."""
    if isinstance(span, Mapping):
        return {str(key): _jsonable(item) for key, item in span.items()}
    return {"repr": _fallback(span)}


def _span_list(spans: Any) -> list[Any]:
    """The spans as a list: ``TraceRecord.spans`` may be any sequence, e.g. a lazy
    ``SpanRows`` that converts the spans when first iterated (which could fail)."""
    if isinstance(spans, list):
        return spans
    try:
        return list(spans)
    except Exception as exc:
        return [{"span_id": "?", "parent_id": None, "name": "unserialisable spans",
                 "error": f"the spans could not be converted: {_fallback(exc)}"}]


def dump_trace(record: TraceRecord) -> str:
    """Encode a trace (header fields and spans) as a JSON document.

    Args:
        record: The trace to encode; ``dataclasses.replace(record, spans=[])`` encodes
            just its header. ``spans`` may be any sequence of span dicts.

    Returns:
        The JSON text; span values that cannot be encoded are stored as their ``repr``.
    """
    spans = _span_list(record.spans)
    document: dict[str, Any] = {
        "v": TRACE_FORMAT_VERSION,
        "run_id": record.run_id,
        "workflow_id": record.workflow_id,
        "status": record.status,
        "started_at": record.started_at,
        "ended_at": record.ended_at,
        "spans": spans,
    }
    try:
        return _to_json(document)
    except Exception:
        # Spans should be JSON-ready; if one is not (a cycle...), degrade span by span.
        document["spans"] = [_jsonable_span(span) for span in spans]
        for key in ("run_id", "workflow_id", "status", "started_at", "ended_at"):
            document[key] = _jsonable(document[key])
        return _to_json(document)


# --------------------------------------------------------------------------- decoding


class _StoredError(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    type: str
    message: str
    step_id: str | None = None
    attempt: int | None = None
    cause: _StoredError | None = None


class _StoredStep(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    status: StepStatus
    output: Any
    error: _StoredError | None
    started_at: float
    ended_at: float | None
    attempts: int
    suspend_payload: Any
    resume_data: Any
    iterations: int
    partial: Any
    lost: int = 0


class _StoredRun(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    v: int
    workflow_id: str
    run_id: str
    status: RunStatus
    created_at: float
    updated_at: float
    input: Any
    state: dict[str, Any]
    result: Any
    error: _StoredError | None
    suspended: list[list[str]]
    tripwire: dict[str, Any] | None
    request_context: dict[str, Any]


class _StoredTraceHeader(BaseModel):
    # Strict: a trace is only written by ``dump_trace``, so nothing needs coercing.
    model_config = ConfigDict(extra="ignore", strict=True, defer_build=True)

    run_id: str
    workflow_id: str
    status: str
    started_at: float
    ended_at: float | None


class _StoredTrace(_StoredTraceHeader):
    v: int
    spans: list[dict[str, Any]]


def _short(value: Any, limit: int = 60) -> str:
    text = str(_fallback(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(exc: ValidationError) -> str:
    parts: list[str] = []
    for error in exc.errors()[:3]:
        if error["type"] == "json_invalid":
            parts.append(error["msg"])
            continue
        location = ".".join(str(item) for item in error["loc"]) or "<document>"
        detail = f"{location}: {error['msg']}"
        if error["type"] != "missing":
            detail += f" (got {_short(error['input'])})"
        parts.append(detail)
    extra = exc.error_count() - len(parts)
    if extra > 0:
        parts.append(f"and {extra} more problem(s)")
    return "; ".join(parts)


def _corrupted(what: str, detail: str, *, workflow_id: str,
               run_id: str) -> SnapshotCorruptedError:
    return SnapshotCorruptedError(
        f"Stored {what} of run {run_id!r} of workflow {workflow_id!r} is corrupted: "
        f"{detail}. The stored data was left as it is; delete the run with "
        "delete_run() or restore it from a backup.",
        workflow_id=workflow_id, run_id=run_id,
    )


def _decode_error(stored: _StoredError | None, *, workflow_id: str,
                  run_id: str) -> StepExecutionError | None:
    if stored is None:
        return None
    cls = _STEP_ERRORS.get(stored.type)
    if cls is None:
        cls = StepExecutionError
        message = f"{stored.type}: {stored.message}" if stored.message else stored.type
    else:
        message = stored.message
    error = cls(message, workflow_id=workflow_id, run_id=run_id, step_id=stored.step_id,
                attempt=stored.attempt if stored.attempt is not None else 1)
    cause = _decode_error(stored.cause, workflow_id=workflow_id, run_id=run_id)
    if cause is not None:
        error.__cause__ = cause
    return error


def _decoded(what: str, raw: Any, blobs: Any, *, workflow_id: str, run_id: str) -> Any:
    try:
        return decode_value(raw, blobs)
    except UndecodableValueError as exc:
        raise _corrupted(what, str(exc), workflow_id=workflow_id, run_id=run_id) from exc


def load_snapshot_json(text: str | bytes, *, workflow_id: str, run_id: str,
                       blobs: Any = SKIP_BLOBS) -> RunSnapshot:
    """Decode a run header written by ``dump_snapshot``.

    Args:
        text: The stored JSON document.
        workflow_id: The workflow the header is stored under (for checks and messages).
        run_id: The run the header is stored under.
        blobs: sha256 digest to content, for the blobs the header references
            (default: they decode as ``UnreadBlob``, as listings need).

    Returns:
        The header; its ``error`` (if any) is a ``StepExecutionError``.

    Raises:
        SnapshotCorruptedError: The document is not valid JSON, has the wrong shape, an
            unknown status, an unsupported version, or belongs to another run.
    """
    stored = parse_snapshot_json(text, workflow_id=workflow_id, run_id=run_id)
    return _snapshot(stored, blobs, workflow_id=workflow_id, run_id=run_id)


def _snapshot(stored: _StoredRun, blobs: Any, *, workflow_id: str, run_id: str,
              with_input: bool = True) -> RunSnapshot:
    """The header of a parsed document (``with_input=False``: its input left ``None``)."""
    values = _decoded("snapshot", [stored.input if with_input else None, stored.state,
                                   stored.result, stored.tripwire, stored.request_context],
                      blobs, workflow_id=workflow_id, run_id=run_id)
    input_, state, result, tripwire, request_context = values
    if not isinstance(state, dict) or not isinstance(request_context, dict) or not (
            tripwire is None or isinstance(tripwire, dict)):
        raise _corrupted("snapshot", "state, tripwire or request_context is not an object",
                         workflow_id=workflow_id, run_id=run_id)
    return RunSnapshot(
        workflow_id=stored.workflow_id,
        run_id=stored.run_id,
        status=stored.status,
        input=input_,
        state=state,
        result=result,
        error=_decode_error(stored.error, workflow_id=workflow_id, run_id=run_id),
        suspended=stored.suspended,
        tripwire=None if tripwire is None else Tripwire.from_dict(tripwire),
        request_context=request_context,
        created_at=stored.created_at,
        updated_at=stored.updated_at,
    )


def listed_snapshot(text: str | bytes, *, workflow_id: str, run_id: str,
                    updated_at: float = 0.0) -> RunSnapshot:
    """A header for a listing: decoded, or a stand-in with status "corrupted".

    One damaged row must not hide the other runs: the stand-in names the run, its
    ``error`` is the ``SnapshotCorruptedError`` saying what is wrong.

    Args:
        text: The stored JSON document.
        workflow_id: The workflow the header is stored under.
        run_id: The run the header is stored under.
        updated_at: When the row was last written, if the backend keeps it apart.
    """
    try:
        return load_snapshot_json(text, workflow_id=workflow_id, run_id=run_id,
                                  blobs=SKIP_BLOBS)
    except SnapshotCorruptedError as exc:
        return RunSnapshot(workflow_id=workflow_id, run_id=run_id, status="corrupted",
                           error=exc, created_at=updated_at, updated_at=updated_at)


def parse_snapshot_json(text: str | bytes, *, workflow_id: str, run_id: str) -> _StoredRun:
    """Parse and check a header document, leaving its values encoded."""
    try:
        stored = _StoredRun.model_validate_json(text)
    except ValidationError as exc:
        raise _corrupted("snapshot", _describe(exc), workflow_id=workflow_id,
                         run_id=run_id) from exc
    if stored.v != FORMAT_VERSION:
        raise _corrupted("snapshot", f"unsupported format version {stored.v} "
                         f"(this procflow reads version {FORMAT_VERSION})",
                         workflow_id=workflow_id, run_id=run_id)
    if (stored.workflow_id, stored.run_id) != (workflow_id, run_id):
        raise _corrupted("snapshot", f"it names run {stored.run_id!r} of workflow "
                         f"{stored.workflow_id!r}", workflow_id=workflow_id, run_id=run_id)
    return stored


def load_step_json(text: str | bytes, *, workflow_id: str, run_id: str,
                   path: str, blobs: Any = SKIP_BLOBS) -> StepResult:
    """Decode a step result written by ``dump_step``.

    Args:
        text: The stored JSON document.
        workflow_id: The workflow of the run (for messages).
        run_id: The run the step belongs to.
        path: The step's path ("step", "outer.inner", ...).
        blobs: sha256 digest to content, for the blobs the result references
            (default: they decode as ``UnreadBlob``).

    Returns:
        The step result; ``partial`` keys are ints again, ``error`` a ``StepExecutionError``.

    Raises:
        SnapshotCorruptedError: The document is not valid JSON, has the wrong shape or an
            unknown status.
    """
    what = f"result of step {path!r}"
    try:
        stored = _StoredStep.model_validate_json(text)
    except ValidationError as exc:
        raise _corrupted(what, _describe(exc), workflow_id=workflow_id,
                         run_id=run_id) from exc
    output, suspend_payload, resume_data, partial = _decoded(
        what, [stored.output, stored.suspend_payload, stored.resume_data, stored.partial],
        blobs, workflow_id=workflow_id, run_id=run_id)
    if partial is not None and not (isinstance(partial, dict)
                                    and all(type(k) is int for k in partial)):
        raise _corrupted(what, "partial is not a mapping of item numbers",
                         workflow_id=workflow_id, run_id=run_id)
    return StepResult(
        status=stored.status,
        output=output,
        error=_decode_error(stored.error, workflow_id=workflow_id, run_id=run_id),
        started_at=stored.started_at,
        ended_at=stored.ended_at,
        attempts=stored.attempts,
        suspend_payload=suspend_payload,
        resume_data=resume_data,
        iterations=stored.iterations,
        partial=partial,
        lost=stored.lost,
    )


def _trace_corrupted(detail: str, *, run_id: str,
                     workflow_id: str | None = None) -> SnapshotCorruptedError:
    return SnapshotCorruptedError(
        f"Stored trace of run {run_id!r} is corrupted: {detail}. The stored data was left "
        "as it is; save a new trace for the run or restore it from a backup.",
        workflow_id=workflow_id, run_id=run_id,
    )


def load_trace_json(text: str | bytes, *, run_id: str) -> TraceRecord:
    """Decode a trace written by ``dump_trace``.

    Args:
        text: The stored JSON document.
        run_id: The run the trace is stored under (for checks and messages).

    Returns:
        The trace, spans included (``[]`` for a document written without them).

    Raises:
        SnapshotCorruptedError: The document is not valid JSON, has the wrong shape or
            field types, an unsupported version, or belongs to another run.
    """
    try:
        stored = _StoredTrace.model_validate_json(text)
    except ValidationError as exc:
        raise _trace_corrupted(_describe(exc), run_id=run_id) from exc
    if stored.v != TRACE_FORMAT_VERSION:
        raise _trace_corrupted(f"unsupported format version {stored.v} (this procflow "
                               f"reads version {TRACE_FORMAT_VERSION})",
                               run_id=run_id, workflow_id=stored.workflow_id)
    if stored.run_id != run_id:
        raise _trace_corrupted(f"it names run {stored.run_id!r}", run_id=run_id,
                               workflow_id=stored.workflow_id)
    return TraceRecord(stored.run_id, stored.workflow_id, stored.status, stored.started_at,
                       stored.ended_at, stored.spans)


def load_trace_header(fields: Mapping[str, Any], *, run_id: str) -> TraceRecord:
    """Check a trace's header fields kept outside its document (e.g. table columns).

    Args:
        fields: ``run_id``, ``workflow_id``, ``status``, ``started_at`` and ``ended_at``.
        run_id: The run the header is stored under (for checks and messages).

    Returns:
        The trace without its spans (``spans == []``).

    Raises:
        SnapshotCorruptedError: A field is missing or has the wrong type, or the header
            belongs to another run.
    """
    try:
        stored = _StoredTraceHeader.model_validate(fields)
    except ValidationError as exc:
        raise _trace_corrupted(f"header: {_describe(exc)}", run_id=run_id) from exc
    if stored.run_id != run_id:
        raise _trace_corrupted(f"its header names run {stored.run_id!r}", run_id=run_id,
                               workflow_id=stored.workflow_id)
    return TraceRecord(stored.run_id, stored.workflow_id, stored.status, stored.started_at,
                       stored.ended_at, [])
