"""``RunBase``: what a ``Run`` holds, how it is made and restored from storage, and
small helpers the run modules share."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic

import anyio

from procflow.context import RequestContext
from procflow.errors import RunNotFoundError, RunStateError, SnapshotCorruptedError
from procflow.messages import new_secret_id
from procflow.records import RunSnapshot, RunStatus, Span, SpanEntry, StepResult
from procflow.runtime.defaults import resolve_storage
from procflow.runtime.distributed import Distributor
from procflow.runtime.execution import Durability, OutputT, PlanUnit, StepUnit
from procflow.runtime.executors import Executor
from procflow.runtime.leases import DEFAULT_LEASE_TTL, RunLease, lease_owner_id
from procflow.runtime.results import WorkflowResult
from procflow.runtime.tracing import ParentSpan, Tracer
from procflow.storage.null import NullStorage

if TYPE_CHECKING:
    from procflow.storage.base import Storage

__all__ = ["RunBase"]

_NULL_STORAGE = NullStorage()


class RunBase(Generic[OutputT]):
    """A run's attributes and stored state (see ``Run``, which adds the rest)."""

    lease_ttl: float = DEFAULT_LEASE_TTL

    def __init__(self, workflow: PlanUnit, *, run_id: str | None = None,
                 storage: Storage | None = None, durability: Durability | None = None,
                 tracing: bool = True, ephemeral: bool = False,
                 parent_span: ParentSpan | None = None) -> None:
        if run_id is not None and (not isinstance(run_id, str) or not run_id):
            raise ValueError(f"run_id must be a non-empty string, got {run_id!r}")
        self.workflow = workflow
        self.run_id = run_id or new_secret_id()
        self._id_unchecked = run_id is not None
        """The caller chose the id and nothing has looked yet whether a run is stored
        under it (starting must not replace one; a random id cannot collide)."""
        if ephemeral:
            if storage is not None:
                raise ValueError(
                    f"a run of workflow '{workflow.id}' cannot be ephemeral and have a "
                    "storage: an ephemeral run keeps nothing; drop storage= or ephemeral=True")
            self.storage: Storage = _NULL_STORAGE
            self.durability: Durability = "exit"
        else:
            self.storage = resolve_storage(storage, workflow)
            self.durability = durability or workflow.durability
        self.status: RunStatus = "pending"
        self._records: dict[str, StepResult] = {}
        self._input: Any = None
        self._state: dict[str, Any] = {}
        self._context = RequestContext()
        self._created_at = time.time()
        self._result: WorkflowResult[OutputT] | None = None
        self._suspended: list[str] = []
        self._cancel_scope: anyio.CancelScope | None = None
        self._cancel_requested = False
        self._active = False
        self.tracing = tracing
        self.trace_parent: tuple[Tracer, Span] | None = parent_span
        """Where this run's spans go inside another run's trace (instead of its own)."""
        self._spans: list[SpanEntry] = []
        self.internal = ephemeral
        """True for an ephemeral run (see ``Workflow.create_run``): nobody outside holds
        it, so it skips the cancel scope that ``cancel()`` needs (cancelling the caller
        still stops it) and ``cancel()`` refuses it."""
        self._replay_of: tuple[str, str] | None = None
        self._lease_owner: str | None = None
        self.private = False
        self._lease: RunLease | None = None
        self._executor: Executor | None = None
        self.distributor: Distributor | None = None
        """Where distributed fan-outs send their jobs (set by workers)."""
        self.mark_steps = False
        """Store each step as started before it runs (set by workers)."""

    async def _reload(self) -> None:
        """Take the stored run as this one's.

        Raises:
            RunNotFoundError: The run is not stored.
        """
        loaded = await self.storage.load_snapshot(self.workflow.id, self.run_id)
        if loaded is None:
            raise RunNotFoundError(
                f"workflow '{self.workflow.id}' has no stored run '{self.run_id}' in "
                f"{type(self.storage).__name__}; check the run id and the storage",
                workflow_id=self.workflow.id, run_id=self.run_id)
        self._restore(*loaded)

    def _restore(self, snap: RunSnapshot, steps: dict[str, StepResult]) -> None:
        """Take the stored header and step results as this run's."""
        workflow, run_id = self.workflow, self.run_id
        self.status = snap.status
        self._records = steps
        self._state = dict(snap.state)
        self._context = RequestContext.restored(snap.request_context)
        self._created_at = snap.created_at
        self._suspended = [".".join(p) for p in snap.suspended]
        try:
            self._input = (workflow.input.validate(snap.input)
                           if workflow.input is not None and snap.input is not None
                           else snap.input)
        except Exception as exc:
            raise SnapshotCorruptedError(
                f"stored input of run '{run_id}' (workflow '{workflow.id}') no longer matches "
                f"the workflow's input schema: {exc}", workflow_id=workflow.id,
                run_id=run_id) from exc
        self._result = None
        if snap.status not in ("pending", "running"):
            self._result = WorkflowResult(
                snap.status, snap.result, dict(steps), snap.error, dict(snap.state),
                [list(p) for p in snap.suspended], snap.tripwire, None, run_id)

    @property
    def lease_owner(self) -> str:
        """The id this run object takes its lease under (made when first needed)."""
        owner = self._lease_owner
        if owner is None:
            owner = self._lease_owner = lease_owner_id()
        return owner

    @property
    def last_result(self) -> WorkflowResult[OutputT] | None:
        """The result of this object's last execution (or of the stored run it was loaded
        from), if any; ``await run.result()`` waits for a submitted run instead."""
        return self._result

    def _check_idle(self, what: str) -> None:
        if self._active:
            raise RunStateError(
                f"run '{self.run_id}' is running; {what}() must wait until it ends",
                workflow_id=self.workflow.id, run_id=self.run_id)

    def __repr__(self) -> str:
        return f"Run(workflow={self.workflow.id!r}, run_id={self.run_id!r}, status={self.status!r})"


def _as_context(value: Any) -> RequestContext:
    if value is None:
        return RequestContext()
    if isinstance(value, RequestContext):
        return value
    if isinstance(value, Mapping):
        return RequestContext(value)
    raise TypeError(f"request_context must be a RequestContext or a mapping, got "
                    f"{type(value).__name__}")


def _path_of(step: Any) -> str:
    if isinstance(step, str):
        return step
    if isinstance(step, Sequence):
        return ".".join(str(s) for s in step)
    step_id = getattr(step, "id", None)
    if isinstance(step_id, str):
        return step_id
    raise TypeError(f"expected a step, a step id or a path, got {step!r}")


def _find_unit(wf: PlanUnit, path: str) -> StepUnit | PlanUnit | None:
    """The step or nested workflow at a dotted path, or ``None``."""
    current: StepUnit | PlanUnit | None = wf
    for segment in path.split("."):
        if current is None or not current.is_workflow:
            return None
        current = current.get_step(segment.split("[", 1)[0])
    return current


async def _earlier_spans(store: Storage, run_id: str) -> list[SpanEntry]:
    """The spans of a run's stored trace; a damaged trace reads as missing (the run's
    snapshot is what loading and resuming need)."""
    try:
        trace = await store.load_trace(run_id)
        if trace is None:
            return []
        return [_span_from_row(row) for row in trace.spans]
    except (SnapshotCorruptedError, KeyError, TypeError, ValueError) as exc:
        # The message says what and where; a traceback would only bury it.
        reason = (str(exc) if isinstance(exc, SnapshotCorruptedError)
                  else f"the stored trace of run {run_id} cannot be read "
                       f"({type(exc).__name__}: {exc})")
        logging.getLogger("procflow").warning("%s; the run is loaded without its trace",
                                              reason.rstrip("."))
        return []


def _span_from_row(row: Mapping[str, Any]) -> Span:
    """A span of an earlier execution, from its stored row."""
    return Span(str(row["span_id"]), row.get("parent_id"), str(row["name"]), row["kind"],
                row.get("path"), float(row["start"]), row.get("end"), row["status"],
                row.get("input"), row.get("output"), row.get("error"),
                dict(row.get("attributes") or {}))
