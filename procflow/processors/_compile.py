"""A processor workflow compiled for the output stream, once per workflow.

On the stream a processor workflow never runs as a workflow (no run, no snapshot, no
span and no planning per chunk): its plan is read once into ``StreamNode``s that
``StreamPipeline`` runs in process, one chunk at a time, beside plain processors. The
plan's entries are read as the runtime reads them (``Entry.read``, with this module's
``Reader`` where the runtime has ``procflow.runtime.nodes.RUNTIME``):

- ``.then(processor step)``: the processor, as a stage of its own;
- ``.then(processor workflow)``: that workflow's nodes, in place;
- ``.parallel([...])`` / ``.branch([...])`` followed by ``.map(fn)``: a ``ForkNode``
  whose lanes each see the chunk; ``merge_processor_results`` merges them by the
  reducer's stream rules (see ``ForkNode``), any other ``fn`` gets the dict of lane
  envelopes for each chunk, as in a workflow run;
- ``.map(fn)`` on its own: a ``MapNode``, ``fn`` called on the chunk's envelope.

Anything else (``foreach``, loops, sleeps, plain steps) cannot run on the stream: a
``WorkflowDefinitionError`` when the array is built, naming the workflow and the call.
A workflow none of whose processors has a stream hook is not on the stream at all.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from procflow.errors import WorkflowDefinitionError
from procflow.processors._hooks import TABLE
from procflow.processors.base import Processor

if TYPE_CHECKING:
    from procflow.workflows.workflow import Workflow

__all__ = ["ForkNode", "Lane", "MapNode", "StreamNode", "compile_stream", "has_stream_hook"]

_HOOK = TABLE["process_output_stream"].name


@dataclass(frozen=True, slots=True)
class Lane:
    """One lane of a fork: a step id, its condition (``branch`` only) and its nodes."""

    id: str
    condition: Callable[[Any], Any] | None
    nodes: tuple[StreamNode, ...]


@dataclass(frozen=True, slots=True)
class ForkNode:
    """``.parallel``/``.branch`` then ``.map``: every lane sees each chunk.

    With ``merge`` ``None`` (``merge_processor_results``) the lanes' outputs merge by
    the reducer's stream rules: a chunk any lane drops is dropped; text edits from
    every lane are applied to the original text (``merge_text_edits``); a tripwire
    from any lane ends the stream. Text a lane still holds (a window, a batch) holds
    the fork's text back until every lane has answered for it: each lane's output
    stands for a known prefix of the original text, the fork emits up to the
    shortest one (cut where no lane's edit straddles), so the merge always compares
    the lanes' versions of the same original text and a guard in one lane is never
    bypassed by another. Lanes run one after another, in the order listed.

    Attributes:
        workflow_id: The workflow the fork belongs to (for error messages).
        kind: "parallel" or "branch" (conditions evaluated for each chunk).
        lanes: The lanes, in the order listed.
        merge: A user map over the lane envelopes, or ``None`` for the reducer.
    """

    workflow_id: str
    kind: Literal["parallel", "branch"]
    lanes: tuple[Lane, ...]
    merge: Callable[[Any], Any] | None


@dataclass(frozen=True, slots=True)
class MapNode:
    """``.map(fn)`` outside a fork: ``fn`` of the chunk's envelope, for each chunk."""

    workflow_id: str
    map_id: str
    fn: Callable[[Any], Any]


StreamNode: TypeAlias = "Processor | ForkNode | MapNode"

_CACHE: weakref.WeakKeyDictionary[Any, tuple[StreamNode, ...]] = weakref.WeakKeyDictionary()


def has_stream_hook(unit: Any) -> bool:
    """Whether a processor step or processor workflow runs ``process_output_stream``."""
    from procflow.processors.step import ProcessorStep, is_processor_workflow

    if isinstance(unit, ProcessorStep):
        return _HOOK in unit.processor.implemented_hooks()
    if is_processor_workflow(unit):
        return any(has_stream_hook(u) for entry in unit.entries for u in entry.units())
    return False


def compile_stream(wf: Workflow) -> tuple[StreamNode, ...]:
    """The stream nodes of a committed processor workflow (compiled once, then cached).

    Returns ``()`` for a workflow with no stream hook: it is not on the stream.

    Raises:
        WorkflowDefinitionError: The workflow has a stream hook and a call that cannot
            run on the stream.
    """
    nodes = _CACHE.get(wf)
    if nodes is None:
        nodes = _compile(wf) if has_stream_hook(wf) else ()
        _CACHE[wf] = nodes
    return nodes


@dataclass(frozen=True, slots=True)
class _Lanes:
    """``.parallel``/``.branch`` as read, waiting for the ``.map`` that makes it a fork."""

    method: Literal["parallel", "branch"]
    lanes: tuple[Lane, ...]


_Read: TypeAlias = "tuple[StreamNode, ...] | _Lanes | MapNode"


class _StreamReader:
    """The plan as the output stream reads it (``procflow.workflows.plan.Reader``): what
    each builder call does to one chunk, or a definition error for a call that cannot
    run per chunk."""

    def __init__(self, wf: Workflow) -> None:
        self.wf = wf

    def then(self, unit: Any, /) -> _Read:
        return _unit(self.wf, unit)

    def parallel(self, steps: tuple[Any, ...], distribute: bool, /) -> _Read:
        return _Lanes("parallel", tuple(Lane(s.id, None, _unit(self.wf, s)) for s in steps))

    def branch(self, branches: tuple[tuple[Callable[[Any], Any], Any], ...], /) -> _Read:
        return _Lanes("branch", tuple(Lane(s.id, cond, _unit(self.wf, s))
                                      for cond, s in branches))

    def when(self, condition: Callable[[Any], Any], unit: Any, /) -> _Read:
        raise WorkflowDefinitionError(
            f"processor workflow '{self.wf.id}': .when() cannot run on the output stream; "
            "use .branch([(condition, step)]) followed by .map(merge_processor_results)",
            workflow_id=self.wf.id)

    def map(self, id: str, fn: Callable[[Any], Any], /) -> _Read:
        return MapNode(self.wf.id, id, fn)

    def foreach(self, unit: Any, concurrency: int, distribute: bool, /) -> _Read:
        raise self._refused("foreach()")

    def loop(self, unit: Any, condition: Callable[[Any], Any],
             mode: Literal["dowhile", "dountil"], max_iterations: int | None, /) -> _Read:
        raise self._refused(f"{mode}()")

    def sleep(self, id: str, seconds: Any, /) -> _Read:
        raise self._refused("sleep()")

    def sleep_until(self, id: str, until: Any, /) -> _Read:
        raise self._refused("sleep_until()")

    def _refused(self, call: str) -> WorkflowDefinitionError:
        return WorkflowDefinitionError(
            f"processor workflow '{self.wf.id}' cannot run on the output stream: {call} is "
            "not supported there (use then, parallel or branch followed by map, and map); "
            "move the streaming processors to a workflow of their own",
            workflow_id=self.wf.id)


def _compile(wf: Workflow) -> tuple[StreamNode, ...]:
    from procflow.processors.reducer import merge_processor_results

    reader = _StreamReader(wf)
    out: list[StreamNode] = []
    fork: _Lanes | None = None  # a parallel or branch: the next entry must be its map
    for entry in wf.entries:
        got = entry.read(reader)
        if fork is not None:
            if not isinstance(got, MapNode):
                break
            out.append(ForkNode(wf.id, fork.method, fork.lanes,
                                None if got.fn is merge_processor_results else got.fn))
            fork = None
        elif isinstance(got, _Lanes):
            fork = got
        elif isinstance(got, MapNode):
            out.append(got)
        else:
            out += got
    else:
        if fork is None:
            return tuple(out)
    raise WorkflowDefinitionError(
        f"processor workflow '{wf.id}': .{fork.method}() must be followed by "
        ".map(merge_processor_results) (or a map picking one branch) to run "
        "on the output stream", workflow_id=wf.id)


def _unit(wf: Workflow, unit: Any) -> tuple[StreamNode, ...]:
    from procflow.processors.step import ProcessorStep, is_processor_workflow

    if isinstance(unit, ProcessorStep):
        return (unit.processor,)
    if is_processor_workflow(unit):
        return compile_stream(unit)
    raise WorkflowDefinitionError(
        f"processor workflow '{wf.id}': step '{unit.id}' is not a processor step, so the "
        "workflow cannot run on the output stream; use create_step(processor) or a nested "
        "processor workflow", workflow_id=wf.id, step_id=unit.id)
