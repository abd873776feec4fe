"""The declarative plan a workflow builder records: one entry per builder call.

Every consumer of a plan goes through the ``Entry`` methods, so a new kind of entry
is one new subclass here:

- ``read(reader)``: what it means, as calls of a ``Reader`` (``then``, ``parallel``,
  ``branch``, ``map``, ...). The plan has two readers, so one meaning: the runtime's
  (``procflow.runtime.nodes.RUNTIME``: ``compile()`` is ``read(RUNTIME)``, the node
  a run calls) and the output stream's (``procflow.processors._compile``: a processor
  workflow as in-process stream stages). An entry made of existing calls runs on
  both unchanged; a new kind of call is one new ``Reader`` method, which mypy makes
  each reader define;
- ``units()``: the steps (or nested workflows) it runs, ``with_unit()`` one swapped;
- ``ids()``: the ids it claims, for the duplicate check;
- ``output_shape()``: what it outputs, checking what its steps take (``commit()``);
- ``layout()``: how it is drawn, as one of three shapes (``UnitLayout``,
  ``LanesLayout``, ``NodeLayout``) that ``wf.graph`` and the studio understand.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, TypeAlias, TypeVar

from procflow.runtime import nodes
from procflow.runtime.nodes import Condition
from procflow.steps.schema import Schema
from procflow.workflows.check import LIST, Keyed, Shape, check_edge, check_list_input

if TYPE_CHECKING:
    from procflow.runtime.execution import Node
    from procflow.steps.step import Step
    from procflow.workflows.workflow import Workflow

__all__ = [
    "BranchEntry",
    "Condition",
    "Entry",
    "ForeachEntry",
    "LanesLayout",
    "Layout",
    "LoopEntry",
    "MapEntry",
    "NodeLayout",
    "ParallelEntry",
    "ReadT",
    "Reader",
    "SleepEntry",
    "SleepUntilEntry",
    "StepEntry",
    "StepLike",
    "UnitLayout",
    "WhenEntry",
    "condition_name",
]

StepLike: TypeAlias = "Step | Workflow"


@dataclass(frozen=True, slots=True)
class UnitLayout:
    """One step, perhaps framed (a ``foreach`` or a loop around it).

    Attributes:
        step: The step or nested workflow.
        kind: The graph node's kind when not the step's own ("foreach", "loop").
        frame: The title of the box drawn around the step, if any.
        attributes: More attributes of the graph node.
    """

    step: StepLike
    kind: str | None = None
    frame: str | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LanesLayout:
    """Steps side by side, run at once (``parallel``, ``branch``).

    Attributes:
        kind: "parallel" or "branch" (the lane group's kind).
        lanes: ``(title, step)`` per lane; the title is ``None`` for plain lanes.
        conditional: Whether a lane runs only when its condition holds.
    """

    kind: str
    lanes: tuple[tuple[str | None, StepLike], ...]
    conditional: bool = False


@dataclass(frozen=True, slots=True)
class NodeLayout:
    """A node with no step of its own (``map``, sleeps).

    Attributes:
        id: The entry's id.
        kind: The graph node's kind ("map", "sleep", "sleep_until").
        label: What the studio writes on the node.
        has_result: Whether the node records a result (a ``map`` does not, so the
            studio shows no "pending" symbol for it).
    """

    id: str
    kind: str
    label: str
    has_result: bool = True


Layout: TypeAlias = UnitLayout | LanesLayout | NodeLayout


ReadT = TypeVar("ReadT")
ReadT_co = TypeVar("ReadT_co", covariant=True)


class Reader(Protocol[ReadT_co]):
    """What each builder call means to one interpreter of plans: one method a call.

    ``procflow.runtime.nodes.RUNTIME`` makes the ``Node`` a run calls; the output
    stream's reader (``procflow.processors._compile``) makes stream stages, and refuses
    what cannot run per chunk.
    """

    def then(self, unit: StepLike, /) -> ReadT_co: ...

    def parallel(self, steps: tuple[StepLike, ...], distribute: bool, /) -> ReadT_co: ...

    def branch(self, branches: tuple[tuple[Condition, StepLike], ...], /) -> ReadT_co: ...

    def when(self, condition: Condition, unit: StepLike, /) -> ReadT_co: ...

    def map(self, id: str, fn: Callable[[Any], Any], /) -> ReadT_co: ...

    def foreach(self, unit: StepLike, concurrency: int, distribute: bool, /) -> ReadT_co: ...

    def loop(self, unit: StepLike, condition: Condition, mode: Literal["dowhile", "dountil"],
             max_iterations: int | None, /) -> ReadT_co: ...

    def sleep(self, id: str, seconds: float | Callable[[Any], Any], /) -> ReadT_co: ...

    def sleep_until(self, id: str, until: datetime | Callable[[Any], Any], /) -> ReadT_co: ...


class Entry(ABC):
    """One builder call in a workflow's plan (see the module docstring)."""

    __slots__ = ()

    @abstractmethod
    def read(self, reader: Reader[ReadT]) -> ReadT:
        """What the entry means, as ``reader`` reads it (the one definition of it)."""

    def compile(self) -> Node:
        """The runtime node that runs this entry."""
        return self.read(nodes.RUNTIME)

    def units(self) -> tuple[StepLike, ...]:
        """The steps (and nested workflows) the entry runs; none by default."""
        return ()

    def with_unit(self, id: str, unit: StepLike) -> Entry:
        """This entry with ``unit`` in place of its step ``id`` (itself when it has none)."""
        return self

    @abstractmethod
    def ids(self) -> list[tuple[str, str]]:
        """``(id, builder call)`` for every id the entry claims in its workflow."""

    @abstractmethod
    def output_shape(self, wf: Workflow, shape: Shape) -> Shape:
        """Check that the entry can take ``shape``; return the shape it outputs.

        Raises:
            WorkflowDefinitionError: A step of the entry cannot take its input.
        """

    @abstractmethod
    def layout(self) -> Layout:
        """How the entry is drawn."""


@dataclass(frozen=True, slots=True)
class StepEntry(Entry):
    """``.then(step)``."""

    step: StepLike

    def read(self, reader: Reader[ReadT]) -> ReadT:
        return reader.then(self.step)

    def units(self) -> tuple[StepLike, ...]:
        return (self.step,)

    def with_unit(self, id: str, unit: StepLike) -> Entry:
        return replace(self, step=unit) if self.step.id == id else self

    def ids(self) -> list[tuple[str, str]]:
        return [(self.step.id, "then()")]

    def output_shape(self, wf: Workflow, shape: Shape) -> Shape:
        check_edge(wf, shape, self.step.input, target=self.step)
        return self.step.output

    def layout(self) -> Layout:
        return UnitLayout(self.step)


class _Lanes(Entry):
    """Steps that all take the same input; output keyed by step id."""

    __slots__ = ()
    method: ClassVar[str]

    def ids(self) -> list[tuple[str, str]]:
        return [(s.id, self.method) for s in self.units()]

    def output_shape(self, wf: Workflow, shape: Shape) -> Shape:
        steps = self.units()
        for s in steps:
            check_edge(wf, shape, s.input, target=s)
        return Keyed(frozenset(s.id for s in steps))


@dataclass(frozen=True, slots=True)
class ParallelEntry(_Lanes):
    """``.parallel([...])``: all run concurrently; output keyed by step id."""

    method: ClassVar[str] = "parallel()"
    steps: tuple[StepLike, ...]
    distribute: bool = False

    def read(self, reader: Reader[ReadT]) -> ReadT:
        return reader.parallel(self.steps, self.distribute)

    def units(self) -> tuple[StepLike, ...]:
        return self.steps

    def with_unit(self, id: str, unit: StepLike) -> Entry:
        return replace(self, steps=tuple(unit if s.id == id else s for s in self.steps))

    def layout(self) -> Layout:
        return LanesLayout("parallel", tuple((None, s) for s in self.steps))


@dataclass(frozen=True, slots=True)
class BranchEntry(_Lanes):
    """``.branch([(cond, step), ...])``: every step whose condition holds runs."""

    method: ClassVar[str] = "branch()"
    branches: tuple[tuple[Condition, StepLike], ...]
    labels: tuple[str | None, ...] = ()

    def read(self, reader: Reader[ReadT]) -> ReadT:
        return reader.branch(self.branches)

    def units(self) -> tuple[StepLike, ...]:
        return tuple(s for _, s in self.branches)

    def with_unit(self, id: str, unit: StepLike) -> Entry:
        return replace(self, branches=tuple((c, unit if s.id == id else s)
                                            for c, s in self.branches))

    def layout(self) -> Layout:
        labels = self.labels or (None,) * len(self.branches)
        return LanesLayout("branch", tuple((f"if {condition_name(c, label)}", s)
                                           for (c, s), label in zip(self.branches, labels,
                                                                    strict=True)),
                           conditional=True)


@dataclass(frozen=True, slots=True)
class WhenEntry(BranchEntry):
    """``.when(cond, step)``: the step when its condition holds, else the data passes
    on unchanged. One branch of one arm (``branches``) whose skipped output is its input."""

    method: ClassVar[str] = "when()"

    def read(self, reader: Reader[ReadT]) -> ReadT:
        ((condition, step),) = self.branches
        return reader.when(condition, step)

    def output_shape(self, wf: Workflow, shape: Shape) -> Shape:
        ((_, step),) = self.branches
        check_edge(wf, shape, step.input, target=step)
        out = step.output
        # the data leaves as it came or as the step made it: known only when both agree
        if isinstance(shape, Schema) and out is not None and out.model is not None \
                and out.model is shape.model:
            return out
        return None

    def layout(self) -> Layout:
        ((condition, step),) = self.branches
        label = self.labels[0] if self.labels else None
        return LanesLayout("branch", ((f"if {condition_name(condition, label)}", step),),
                           conditional=True)


@dataclass(frozen=True, slots=True)
class MapEntry(Entry):
    """``.map(fn)``: reshape the data; no step result of its own."""

    id: str
    fn: Callable[[Any], Any]

    def read(self, reader: Reader[ReadT]) -> ReadT:
        return reader.map(self.id, self.fn)

    def ids(self) -> list[tuple[str, str]]:
        return [(self.id, "map()")]

    def output_shape(self, wf: Workflow, shape: Shape) -> Shape:
        return None  # unknown: whatever fn returns

    def layout(self) -> Layout:
        return NodeLayout(self.id, "map", _marker("map", self.id), has_result=False)


@dataclass(frozen=True, slots=True)
class ForeachEntry(Entry):
    """``.foreach(step, concurrency=n)``: the step over each item of a list."""

    step: StepLike
    concurrency: int
    distribute: bool = False

    def read(self, reader: Reader[ReadT]) -> ReadT:
        return reader.foreach(self.step, self.concurrency, self.distribute)

    def units(self) -> tuple[StepLike, ...]:
        return (self.step,)

    def with_unit(self, id: str, unit: StepLike) -> Entry:
        return replace(self, step=unit) if self.step.id == id else self

    def ids(self) -> list[tuple[str, str]]:
        return [(self.step.id, "foreach()")]

    def output_shape(self, wf: Workflow, shape: Shape) -> Shape:
        check_list_input(wf, shape, self.step)
        return LIST

    def layout(self) -> Layout:
        return UnitLayout(self.step, "foreach", f"for each (concurrency {self.concurrency})",
                          {"concurrency": self.concurrency})


@dataclass(frozen=True, slots=True)
class LoopEntry(Entry):
    """``.dowhile`` / ``.dountil``: the body runs, then the condition decides."""

    step: StepLike
    condition: Condition
    mode: Literal["dowhile", "dountil"]
    max_iterations: int | None
    label: str | None = None

    def read(self, reader: Reader[ReadT]) -> ReadT:
        return reader.loop(self.step, self.condition, self.mode, self.max_iterations)

    def units(self) -> tuple[StepLike, ...]:
        return (self.step,)

    def with_unit(self, id: str, unit: StepLike) -> Entry:
        return replace(self, step=unit) if self.step.id == id else self

    def ids(self) -> list[tuple[str, str]]:
        return [(self.step.id, f"{self.mode}()")]

    def output_shape(self, wf: Workflow, shape: Shape) -> Shape:
        body = self.step
        check_edge(wf, shape, body.input, target=body)
        check_edge(wf, body.output, body.input, target=body, loop=True)
        return body.output

    def layout(self) -> Layout:
        mode = "while" if self.mode == "dowhile" else "until"
        frame = f"do … {mode} {condition_name(self.condition, self.label)}"
        if self.max_iterations is not None:
            frame += f" (max {self.max_iterations})"
        return UnitLayout(self.step, "loop", frame,
                          {"loop": self.mode, "max_iterations": self.max_iterations})


class _Wait(Entry):
    """A wait: an ``id`` of its own, the data passing through."""

    __slots__ = ()
    id: str

    def ids(self) -> list[tuple[str, str]]:
        return [(self.id, "sleep()")]

    def output_shape(self, wf: Workflow, shape: Shape) -> Shape:
        return shape  # the data passes through


@dataclass(frozen=True, slots=True)
class SleepEntry(_Wait):
    """``.sleep(seconds)``: wait, passing the data through."""

    id: str
    seconds: float | Callable[[Any], Any]

    def read(self, reader: Reader[ReadT]) -> ReadT:
        return reader.sleep(self.id, self.seconds)

    def layout(self) -> Layout:
        seconds = self.seconds
        amount = f"{seconds:g} s" if isinstance(seconds, int | float) else _computed(seconds)
        return NodeLayout(self.id, "sleep", f"{_marker('sleep', self.id)} {amount}")


@dataclass(frozen=True, slots=True)
class SleepUntilEntry(_Wait):
    """``.sleep_until(when)``: wait until a moment, passing the data through."""

    id: str
    until: datetime | Callable[[Any], Any]

    def read(self, reader: Reader[ReadT]) -> ReadT:
        return reader.sleep_until(self.id, self.until)

    def layout(self) -> Layout:
        until = self.until
        when = until.isoformat(sep=" ") if isinstance(until, datetime) else _computed(until)
        marker = _marker("sleep until", self.id, auto="sleep-until")
        return NodeLayout(self.id, "sleep_until", f"{marker} {when}")


def condition_name(condition: object, label: str | None = None) -> str:
    """How a condition is named: its ``label=``, its function's ``__name__``, a lambda's
    own source text ("ctx.input_data > 3"), else "condition"."""
    if label:
        return label
    name = getattr(condition, "__name__", None)
    if isinstance(name, str) and name and not name.startswith("<"):
        return name
    if name == "<lambda>":
        source = _lambda_source(condition)
        if source:
            return source
    return "condition"


def _parse(source: str) -> Any:
    """``ast.parse``, retried on a fresh thread when CPython 3.11's AST constructor
    reports a recursion-depth mismatch for a call made deep in the stack (a SystemError
    that depends only on the caller's stack depth)."""
    import ast

    try:
        return ast.parse(source)
    except SystemError:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(ast.parse, source).result()


def _lambda_source(fn: object) -> str | None:
    """A lambda's body as written, when its source can be found and told apart from
    other lambdas on the same line (by the columns its code covers)."""
    import ast
    import inspect

    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    try:
        lines, _ = inspect.findsource(code)
    except (OSError, TypeError):
        return None
    line = code.co_firstlineno
    try:
        tree = _parse("".join(lines))
    except SyntaxError:
        return None
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda) and n.lineno == line]
    if len(found) > 1:
        cols = {c for (ln, _, c, end) in code.co_positions()
                if ln == line and c is not None and end is not None and end > c}
        if cols:
            start = min(cols)
            found = [n for n in found if n.body.col_offset <= start
                     and (n.body.end_col_offset or 0) >= start and n.body.lineno == line]
    if len(found) != 1:
        return None
    text = " ".join(ast.unparse(found[0].body).split())
    return text if len(text) <= 60 else text[:59] + "…"


def _marker(kind: str, entry_id: str, *, auto: str | None = None) -> str:
    """ "map" for an auto id like "map-3", else "map <id>"."""
    stem = auto or kind
    rest = entry_id.removeprefix(f"{stem}-")
    if rest != entry_id and rest.isdigit():
        return kind
    return f"{kind} {entry_id}"


def _computed(fn: object) -> str:
    name = getattr(fn, "__name__", None)
    if isinstance(name, str) and name and not name.startswith("<"):
        return f"({name}(ctx))"
    return "(computed)"
