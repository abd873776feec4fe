"""``LiveRun``: a run drawn as it goes — its graph with each node's state and time,
foreach progress bars, and an agent's streamed text — then drawn once more, final."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Text

from procflow.studio.graph import GraphView, NodeState
from procflow.studio.output import drawing_width, masked
from procflow.studio.states import (
    AgentTracker,
    Progress,
    WorkflowTracker,
    states_from_spans,
    states_from_steps,
)

if TYPE_CHECKING:
    from procflow.agent.agent import Agent
    from procflow.agent.output import FullOutput, ModelOutput
    from procflow.runtime.results import WorkflowResult
    from procflow.runtime.stream import RunStream
    from procflow.storage.base import Storage
    from procflow.workflows.workflow import Workflow

__all__ = ["LiveRun", "RunView"]

_RUNNING = "◐"
_DONE = ("●", "✖", "⊘")
_DIM_STYLE = Style(dim=True)

_T = TypeVar("_T")


class RunView:
    """A Rich renderable of a run at one moment: the graph with node states, then a
    progress bar per foreach and, for an agent, its tool calls and streamed text.

    Args:
        workflow: The workflow drawn (an agent's loop workflow for an agent).
        states: A function giving path → state now (called at each render).
        depth: Nested-workflow levels drawn expanded (default: one, and every level
            holding a processor or tool the user configured).
        progress: Foreach path → item progress.
        tools: Tool call lines.
        text: Streamed text (``None``: no text panel).
        problem: A tripwire or error line.
        max_height: The most lines to draw (a live view: the terminal's height); a
            taller view shows the window around the running steps, saying how many
            lines are above and below.
    """

    def __init__(self, workflow: Workflow, states: Callable[[], Mapping[str, NodeState]], *,
                 depth: int | None = None, progress: Mapping[str, Progress] | None = None,
                 tools: list[str] | None = None, text: Callable[[], str] | None = None,
                 problem: Callable[[], str | None] | None = None,
                 max_height: Callable[[], int] | None = None) -> None:
        self.workflow = workflow
        self.max_height = max_height
        self.states = states
        self.depth = depth
        self.progress = progress or {}
        self.tools = tools if tools is not None else []
        self.text = text
        self.problem = problem

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        group = self._group()
        if self.max_height is None:
            yield group
            return
        lines = console.render_lines(group, options.update(height=None), pad=False)
        yield from _window(lines, max(4, self.max_height()))

    def _group(self) -> Group:
        parts: list[RenderableType] = [GraphView(self.workflow, depth=self.depth,
                                                 states=self.states())]
        bars = [(path, p) for path, p in self.progress.items() if p.total]
        if bars:
            grid = Table.grid(padding=(0, 1))
            for path, p in bars:
                total = p.total or 0
                grid.add_row(Text(f"for each {path}", style="bold"),
                             ProgressBar(total=total, completed=min(p.done, total), width=30),
                             Text(f"{p.done}/{total} items"))
            parts.append(grid)
        if self.tools:
            parts.append(Text("tool calls", style="bold"))
            parts.extend(Text(f"  {masked(line)}") for line in self.tools)
        if self.text is not None and self.text():
            streamed = self.text()
            title = f"streamed text · {len(streamed)} chars, ≈{max(1, len(streamed) // 4)} tokens"
            parts.append(Panel(Text(masked(streamed)), title=title, title_align="left"))
        problem = self.problem() if self.problem is not None else None
        if problem:
            parts.append(Text(f"✖ {masked(problem)}", style="bold red"))
        return Group(*parts)


class LiveRun:
    """Runs a workflow or an agent while drawing it.

    With ``live`` the view is redrawn in place (``rich.live.Live``, refreshed on each
    event at most ``fps`` times a second, and ten times a second so running times move);
    without it nothing is drawn until the end. Either way the final view is printed
    once the run has ended.

    Args:
        console: Where to draw.
        live: Redraw while the run goes (needs a terminal).
        depth: Nested-workflow levels drawn expanded (default: one, and every level
            holding a processor or tool the user configured).
        fps: Most redraws a second caused by events.
        quiet: Draw nothing at all (``--json`` prints only its document).
    """

    def __init__(self, console: Console, *, live: bool, depth: int | None = None,
                 fps: float = 20.0, quiet: bool = False) -> None:
        self.console = console
        self.live = live and not quiet
        self.quiet = quiet
        self.depth = depth
        self.pending_run_id: str | None = None
        """The id of the run being drawn, when known before it ends (for Ctrl-C)."""
        self.hint: Callable[[], list[str]] | None = None
        """Lines telling how to inspect the run, printed when it is interrupted."""
        self._view: RunView | None = None
        self._interval = 1.0 / fps
        self._last = 0.0
        self._display: Live | None = None
        self.run_id: str | None = None
        """The id of the last run, once known (also when an agent run raised)."""

    async def workflow(self, wf: Workflow, stream: RunStream, *,
                       initial: Mapping[str, NodeState] | None = None) -> WorkflowResult:
        """Run a workflow through its event stream (from ``run.stream(...)`` or
        ``run.resume_stream(...)``) and print its final view.

        Args:
            wf: The workflow.
            stream: The run's event stream, not entered yet.
            initial: States known before the stream starts (the stored steps of a
                resumed run).

        Returns:
            The run's result.
        """
        tracker = WorkflowTracker(wf, initial=initial)

        async def consume() -> WorkflowResult:
            async with stream as events:
                async for event in events:
                    tracker.on_event(event)
                    self.changed()
            if stream.result is None:  # pragma: no cover - the stream always sets it
                raise RuntimeError("the run ended without a result")
            return stream.result

        view = RunView(wf, tracker.states, depth=self.depth, progress=tracker.progress,
                       max_height=self._height)
        result = await self._drive(view, consume)
        self.run_id = result.run_id
        final = {**tracker.states(), **states_from_steps(result.steps)}
        self.print_final(wf, final, progress=tracker.progress)
        return result

    def _height(self) -> int:
        return self.console.size.height - 2  # the cursor line stays free: no scroll

    def interrupted_lines(self) -> list[str]:
        """What to print when the run is interrupted (Ctrl-C): its id and how to look
        at it (empty when no run has started)."""
        run_id = self.run_id or self.pending_run_id
        if run_id is None:
            return []
        lines = [f"run {run_id} interrupted (canceled)", f"run id: {run_id}"]
        if self.hint is not None:
            lines += self.hint()
        return lines

    def print_final(self, wf: Workflow, states: Mapping[str, NodeState], *,
                    progress: Mapping[str, Progress] | None = None,
                    tools: list[str] | None = None) -> None:
        """Print a run's view once (no live redraw)."""
        if self.quiet:
            return
        frozen = dict(states)
        self.console.print(RunView(wf, lambda: frozen, depth=self.depth, progress=progress,
                                   tools=tools), width=drawing_width(self.console))

    async def agent(self, agent: Agent, messages: Any, storage: Storage, *,
                    stream: Callable[[], Awaitable[ModelOutput[Any]]] | None = None,
                    ) -> FullOutput:
        """Run an agent, drawing its loop and its streamed text, and print its final view.

        Args:
            agent: The agent.
            messages: What ``agent.stream`` takes (a prompt string, message dicts...).
            storage: Where the run's trace is stored (read back for the final view).
            stream: What starts the run instead of ``agent.stream(messages)`` (say
                ``lambda: agent.resume_stream(run_id, approve=[...])``).

        Returns:
            The agent's ``FullOutput``.

        Raises:
            Exception: What the agent raised (e.g. ``APICallError``), after the final view.
        """
        wf = agent.workflow
        tracker = AgentTracker(wf)

        async def consume() -> FullOutput:
            out = await (agent.stream(messages) if stream is None else stream())
            async with out:
                async for chunk in out.full_stream:
                    tracker.on_chunk(chunk)
                    self.changed()
            return await out.output

        view = RunView(wf, tracker.states, depth=self.depth, tools=tracker.tools,
                       text=lambda: tracker.text, problem=lambda: tracker.problem,
                       max_height=self._height)
        started = time.time()
        try:
            output = await self._drive(view, consume)
        except Exception:
            self.run_id, traced = await _trace_states(storage, wf, None, started)
            self.print_final(wf, _agent_final(tracker, traced), tools=tracker.tools)
            raise
        self.run_id, traced = await _trace_states(storage, wf, output.run_id, 0)
        self.print_final(wf, _agent_final(tracker, traced), tools=tracker.tools)
        return output

    def changed(self) -> None:
        """Note a change; redraw now unless the last redraw was under 1/fps s ago."""
        display = self._display
        if display is None:
            return
        now = time.monotonic()
        if now - self._last >= self._interval:
            self._last = now
            display.refresh()

    async def _drive(self, view: RunView, consume: Callable[[], Awaitable[_T]]) -> _T:
        if not self.live:
            return await consume()
        error: Exception | None = None
        results: list[_T] = []
        self._view = view
        with Live(view, console=self.console, auto_refresh=False, transient=True,
                  redirect_stdout=False, redirect_stderr=False,
                  vertical_overflow="crop") as display:
            self._display = display
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._tick, display)
                    try:
                        results.append(await consume())
                    except Exception as exc:  # re-raised below, outside the task group
                        error = exc
                    finally:
                        tg.cancel_scope.cancel()
            except BaseException:  # Ctrl-C or a cancellation: the last frame stays
                display.transient = False
                raise
            finally:
                self._display = None
        if error is not None:
            raise error
        return results[0]

    @staticmethod
    async def _tick(display: Live) -> None:
        while True:
            await anyio.sleep(0.1)
            display.refresh()


def _window(lines: list[list[Segment]], height: int) -> Iterator[Segment]:
    """``height`` lines of ``lines``: all of them when they fit, else the window that
    shows the first running step (a third from the top), with "n more" lines."""
    if len(lines) <= height:
        for line in lines:
            yield from line
            yield Segment.line()
        return
    room = height - 2
    running = next((n for n, line in enumerate(lines)
                    if any(_RUNNING in seg.text for seg in line)), None)
    if running is None:  # nothing running: the newest finished work, at the bottom
        done = [n for n, line in enumerate(lines) if any(
            mark in seg.text for seg in line for mark in _DONE)]
        top = max(0, (done[-1] if done else 0) - room + 2)
    else:
        top = max(0, running - room // 3)
    top = min(top, len(lines) - room)
    above, below = top, len(lines) - top - room
    yield Segment(f"↑ {above} more line{'' if above == 1 else 's'} above" if above else "",
                  _DIM_STYLE)
    yield Segment.line()
    for line in lines[top:top + room]:
        yield from line
        yield Segment.line()
    yield Segment(f"↓ {below} more line{'' if below == 1 else 's'} below" if below else "",
                  _DIM_STYLE)
    yield Segment.line()


def _agent_final(tracker: AgentTracker, traced: Mapping[str, NodeState],
                 ) -> dict[str, NodeState]:
    """The trace's states (exact times), except where the stream showed a failure: the
    loop's steps record tripwires and provider errors instead of failing."""
    live = tracker.states()
    failed = {path: state for path, state in live.items() if state.status == "failed"}
    return {**live, **traced, **failed}


async def _trace_states(storage: Storage, wf: Workflow, run_id: str | None,
                        since: float) -> tuple[str | None, dict[str, NodeState]]:
    """The run id and the states from its stored trace (with no run id: the newest
    trace of ``wf`` started since ``since``)."""
    if run_id is None:
        recent = await storage.list_traces(workflow_id=wf.id, limit=1)
        if not recent or recent[0].started_at < since:
            return None, {}
        run_id = recent[0].run_id
    trace = await storage.load_trace(run_id)
    if trace is None:
        return run_id, {}
    paths = [str(n) for n, a in wf.graph.nodes(data=True) if a["kind"] not in ("start", "end")]
    return run_id, states_from_spans(trace.spans, paths)
