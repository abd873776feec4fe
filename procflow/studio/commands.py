"""The ``procflow`` subcommands, as async functions of the parsed arguments.

Output follows the medium: a terminal gets Rich views sized to their content (ids
shortened to a unique prefix); a pipe (or ``--plain``) gets plain, untruncated lines,
one record per line; ``--json`` gets one JSON document (schemas in
``procflow/studio/schemas``). Every value printed is masked as traces are.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from procflow.errors import RunNotFoundError, RunStateError
from procflow.storage.locate import get_default_storage, set_default_storage
from procflow.studio.export import to_dot, to_mermaid
from procflow.studio.graph import GraphView
from procflow.studio.listing import print_runs
from procflow.studio.live import LiveRun
from procflow.studio.output import (
    agent_run_document,
    drawing_width,
    dump,
    graph_document,
    output_mode,
    step_lines,
    trace_document,
    trace_lines,
    workflow_run_document,
)
from procflow.studio.prune import prune_command
from procflow.studio.states import states_from_steps
from procflow.studio.store import NoStoreError, Store, find_store, resolve_run_id
from procflow.studio.summary import (
    print_agent_failure,
    print_agent_summary,
    print_workflow_summary,
    waiting_calls,
)
from procflow.studio.targets import is_agent, load_target
from procflow.studio.watch import watch_command
from procflow.workflows.workflow import Workflow

if TYPE_CHECKING:
    from procflow.agent.agent import Agent
    from procflow.agent.output import FullOutput, ModelOutput
    from procflow.runtime.results import WorkflowResult
    from procflow.runtime.run import Run

__all__ = ["UsageError", "interrupted_lines", "output_mode", "parse_input", "parse_json",
           "run_command"]

_active: list[LiveRun] = []


def interrupted_lines() -> list[str]:
    """After Ctrl-C: the interrupted run's id and how to inspect it (or nothing)."""
    return _active[-1].interrupted_lines() if _active else []


class UsageError(Exception):
    """The command line asks for something that cannot be done; one line for the user."""


def parse_json(value: str, option: str) -> Any:
    """An option's JSON value; ``@path`` reads the JSON from a file.

    Raises:
        UsageError: The file is missing or the text is not JSON.
    """
    text, where = _read(value, option)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"invalid {option} JSON{where}: {exc}") from exc


def parse_input(value: str, *, json_only: bool) -> Any:
    """``--input``: JSON when it parses as JSON, else the text itself (a prompt);
    ``json_only`` (``--json-input``) makes text that is not JSON an error."""
    if json_only:
        return parse_json(value, "--input")
    text, _ = _read(value, "--input")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _read(value: str, option: str) -> tuple[str, str]:
    if not value.startswith("@"):
        return _utf8(value, option), ""
    path = Path(value[1:])
    if not path.is_file():
        raise UsageError(f"no such file: {path} (from {option} {value})")
    try:
        return path.read_text(encoding="utf-8"), f" in {path}"
    except UnicodeDecodeError as exc:
        raise UsageError(f"{option} file {path} is not UTF-8 text (byte "
                         f"0x{exc.object[exc.start]:02x} at offset {exc.start})") from None


def _utf8(text: str, option: str) -> str:
    """An argument as given, refused if its bytes were not UTF-8 (Python decodes such
    bytes of the command line to lone surrogates, which no storage can keep)."""
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError as exc:
            code = ord(text[exc.start])
            what = (f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF
                    else f"lone surrogate U+{code:04X}")
            raise UsageError(f"{option} is not UTF-8 text ({what} at character "
                             f"{exc.start})") from None
    return text


async def run_command(args: argparse.Namespace, console: Console) -> int:
    """Run the parsed subcommand; returns the exit status."""
    if args.command == "graph":
        return _graph(args, console)
    if args.command == "run":
        return await _run(args, console)
    if args.command == "watch":
        return await watch_command(args, console)
    try:
        store = find_store(args.db, create=False)
    except NoStoreError as exc:
        if args.command == "runs":
            return _no_runs(args, console, str(exc))
        raise UsageError(str(exc)) from exc
    try:
        handler: Callable[[argparse.Namespace, Console, Store], Awaitable[int]] = {
            "runs": _runs, "trace": _trace, "prune": prune_command}[args.command]
        return await handler(args, console, store)
    finally:
        await store.storage.aclose()


def _no_runs(args: argparse.Namespace, console: Console, message: str) -> int:
    if output_mode(args, console) == "json":
        print(dump({"store": None, "runs": []}))
    else:
        print(message, file=sys.stderr if output_mode(args, console) == "plain" else sys.stdout)
    return 0


def _graph(args: argparse.Namespace, console: Console) -> int:
    from procflow.studio.timeline import to_svg

    target = load_target(args.target)
    if args.depth is not None and args.depth < 0:
        raise UsageError(f"--depth must be 0 or more, got {args.depth}")
    if args.json:
        wf = target if isinstance(target, Workflow) else target.workflow
        print(dump(graph_document(wf)))
    elif args.format == "mermaid":
        print(to_mermaid(target, depth=args.depth), end="")
    elif args.format == "dot":
        print(to_dot(target), end="")
    elif args.format == "svg":
        print(to_svg(GraphView(target, depth=args.depth), width=drawing_width(),
                     title=f"procflow graph {args.target}"))
    else:
        console.print(GraphView(target, depth=args.depth), width=drawing_width(console))
    return 0


# -- run -------------------------------------------------------------------------


async def _run(args: argparse.Namespace, console: Console) -> int:
    target = load_target(args.target)
    _check_run_options(args, is_agent(target))
    own = target.storage  # a workflow's or an agent's own storage=
    store = find_store(args.db, create=True, own=own)
    previous = get_default_storage()
    set_default_storage(store.storage)  # agent runs store their traces through the default
    try:
        mode = output_mode(args, console)
        live = LiveRun(console, live=mode == "tty" and not args.no_live,
                       depth=None if args.depth is None else max(0, args.depth),
                       quiet=mode == "json")
        _active[:] = [live]
        if not isinstance(target, Workflow):
            return await _run_agent(args, console, store, target, live)
        return await _run_workflow(args, console, store, target, live)
    finally:
        set_default_storage(previous)
        if store.owned:
            await store.storage.aclose()


async def _run_workflow(args: argparse.Namespace, console: Console, store: Store,
                        wf: Workflow, live: LiveRun) -> int:
    storage = store.storage
    if args.run_id is not None and await storage.load_snapshot(wf.id, args.run_id):
        raise UsageError(f"run '{args.run_id}' already exists in {store.location}; choose "
                         "another --run-id")
    replayed = None
    if args.from_step is not None:
        stored = await _load_run(wf, args.run, store)
        started = time.time()
        new = await stored.replay_from(args.from_step, run_id=args.run_id)
        result = new.last_result
        if result is None:  # pragma: no cover - replay_from returns a finished run
            raise UsageError(f"replaying run '{args.run}' from '{args.from_step}' gave no result")
        replayed = stored.run_id
        if not live.quiet:
            live.print_final(wf, states_from_steps(result.steps, kept_before=started,
                                                   kept_note="kept, not re-run"))
            console.print(Text(f"replayed run {stored.run_id} from step {args.from_step} as "
                               "a new run"), soft_wrap=True)
    elif args.resume is not None:
        stored = await _load_run(wf, args.run, store)
        data = parse_json(args.data, "--data") if args.data is not None else None
        live.pending_run_id = stored.run_id
        live.hint = lambda: _inspect_lines(args, store, stored.run_id)
        before = states_from_steps(stored.last_result.steps) if stored.last_result else {}
        result = await live.workflow(wf, stored.resume_stream(args.resume, data),
                                     initial=before)
    else:
        data = (parse_input(args.input, json_only=args.json_input)
                if args.input is not None else None)
        run = wf.create_run(args.run_id, storage=storage)
        live.pending_run_id = run.run_id
        live.hint = lambda: _inspect_lines(args, store, run.run_id)
        result = await live.workflow(wf, run.stream(input_data=data))
    resume = [_resume_line(args, store, path, result) for path in result.suspended_at]
    if args.json:
        print(dump(workflow_run_document(result, resume=resume, replayed_from=replayed)))
    else:
        print_workflow_summary(console, result, resume_command=lambda step: _resume_line(
            args, store, step, result))
    return 0 if result.status in ("success", "suspended") else 1


def _check_run_options(args: argparse.Namespace, agent: bool) -> None:
    if args.resume is not None and args.from_step is not None:
        raise UsageError("--resume and --from-step cannot be used together")
    if agent:
        _check_agent_options(args)
        return
    if args.approve or args.deny:
        option = "--approve" if args.approve else "--deny"
        raise UsageError(f"{option} answers an agent's waiting tool calls, and {args.target} "
                         "is a Workflow (resume it with --resume STEP --run RUN_ID --data "
                         "JSON)")
    stored = args.resume is not None or args.from_step is not None
    option = "--resume" if args.resume is not None else "--from-step"
    if stored and args.run is None:
        raise UsageError(f"{option} needs --run RUN_ID (the stored run; see 'procflow runs')")
    if not stored and args.run is not None:
        raise UsageError("--run needs --resume STEP or --from-step STEP")
    if stored and args.input is not None:
        raise UsageError(f"--input cannot be used with {option}: the run's stored input "
                         "is used")
    if args.resume is not None and args.run_id is not None:
        raise UsageError("--run-id cannot be used with --resume: the run keeps its id")
    if args.data is not None and args.resume is None:
        raise UsageError("--data goes with --resume STEP")


def _check_agent_options(args: argparse.Namespace) -> None:
    """An agent run is resumed as ``--resume RUN_ID`` (it waits in one place: its tool
    calls), answered with ``--approve``/``--deny`` call ids and ``--data``; a stored
    run is re-run with ``--from-step STEP --run RUN_ID``."""
    if args.from_step is not None:
        if args.run is None:
            raise UsageError("--from-step needs --run RUN_ID (the stored agent run to "
                             "re-run; see 'procflow runs')")
        for option, given in (("--approve", args.approve), ("--deny", args.deny),
                              ("--data", args.data), ("--input", args.input)):
            if given is not None:
                raise UsageError(f"{option} cannot be used with --from-step (the re-run "
                                 "takes the stored run's input)")
        return
    if args.run is not None:
        raise UsageError("--run goes with --from-step STEP on an Agent (resume a suspended "
                         "agent run with --resume RUN_ID)")
    if args.resume is None:
        for option, given in (("--approve", args.approve), ("--deny", args.deny),
                              ("--data", args.data)):
            if given is not None:
                raise UsageError(f"{option} goes with --resume RUN_ID (the suspended "
                                 "agent run; see 'procflow runs --status suspended')")
        return
    if args.input is not None:
        raise UsageError("--input cannot be used with --resume: the run's stored messages "
                         "are used")
    if args.run_id is not None:
        raise UsageError("--run-id cannot be used with --resume: the run keeps its id")
    both = sorted(set(args.approve or ()) & set(args.deny or ()))
    if both:
        raise UsageError(f"tool call(s) {both} are both approved and denied; give each "
                         "call id once, to --approve or to --deny")


async def _load_run(wf: Workflow, run_id: str, store: Store) -> Run:
    storage = store.storage
    with contextlib.suppress(RunNotFoundError):  # no trace yet: get_run says what is missing
        run_id = await resolve_run_id(storage, run_id, store.location)
    try:
        return await wf.get_run(run_id, storage=storage)
    except RunNotFoundError as exc:
        trace = await storage.load_trace(run_id)
        also = f" (it is a run of workflow '{trace.workflow_id}')" if trace else ""
        raise RunNotFoundError(f"no run '{run_id}' of workflow '{wf.id}' in "
                               f"{store.location}{also}", workflow_id=wf.id,
                               run_id=run_id) from exc


def _command(args: argparse.Namespace, store: Store, *words: str) -> str:
    line = ["procflow", *store.db_words(), *words]
    return " ".join(shlex.quote(w) for w in line)


def _resume_line(args: argparse.Namespace, store: Store, step: str,
                 result: WorkflowResult) -> str:
    """The command resuming ``step``: with the data that approves every call an agent
    step waits on (``deny`` in its place refuses them), else ``--data JSON``."""
    record = result.steps.get(step)
    payload = record.suspend_payload if record is not None else None
    if isinstance(payload, Mapping) and "agent_id" in payload and payload.get("calls"):
        ids = [str(c.get("tool_call_id")) for c in payload["calls"] if isinstance(c, Mapping)]
        return _command(args, store, "run", args.target, "--resume", step, "--run",
                        result.run_id, "--data", json.dumps({"approve": ids}))
    return _command(args, store, "run", args.target, "--resume", step, "--run",
                    result.run_id, "--data") + " JSON"


def _inspect_lines(args: argparse.Namespace, store: Store, run_id: str) -> list[str]:
    return [f"inspect it:  {_command(args, store, 'trace', run_id)}",
            f"run it again from a step:  "
            f"{_command(args, store, 'run', args.target, '--from-step', 'STEP', '--run', run_id)}"]


async def _run_agent(args: argparse.Namespace, console: Console, store: Store,
                     agent: Agent, live: LiveRun) -> int:
    live.hint = lambda: ([f"inspect it:  {_command(args, store, 'trace', live.run_id)}"]
                         if live.run_id else [])
    if args.from_step is not None:
        return await _replay_agent(args, console, store, agent)
    if args.resume is not None:
        open_stream = await _agent_resume(args, store, agent, live)
    elif args.input is None:
        raise UsageError('an Agent needs --input: a prompt, or JSON ({"prompt": "..."} or '
                         "messages); or --resume RUN_ID to continue a suspended run")
    else:
        messages = _agent_messages(parse_input(args.input, json_only=args.json_input))
        if args.run_id is not None and await store.storage.load_snapshot(agent.workflow.id,
                                                                         args.run_id):
            raise UsageError(f"run '{args.run_id}' already exists in {store.location}; "
                             "choose another --run-id")

        def open_stream() -> Awaitable[ModelOutput[Any]]:
            if args.run_id is not None:
                return agent.stream(messages, run_id=args.run_id)
            return agent.stream(messages)
    try:
        output = await live.agent(agent, None, store.storage, stream=open_stream)
    except Exception as exc:
        if not args.json:
            print_agent_failure(console, exc, live.run_id)
        raise
    resume = _agent_resume_lines(args, store, output)
    if args.json:
        print(dump(agent_run_document(output, resume=resume)))
    else:
        print_agent_summary(console, output, resume=resume)
    return 0 if output.tripwire is None and output.finish_reason != "error" else 1


async def _replay_agent(args: argparse.Namespace, console: Console, store: Store,
                        agent: Agent) -> int:
    """``--from-step STEP --run RUN_ID``: the stored call run again from a loop step
    with the agent as it is now (its model, tools and processors), as a new run."""
    storage = store.storage
    if args.run_id is not None and await storage.load_snapshot(agent.workflow.id,
                                                               args.run_id):
        raise UsageError(f"run '{args.run_id}' already exists in {store.location}; choose "
                         "another --run-id")
    stored = await _load_run(agent.workflow, args.run, store)
    try:
        output = await agent.replay_from(stored.run_id, args.from_step,
                                         new_run_id=args.run_id)
    except RunStateError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        document = agent_run_document(output, resume=[])
        document["replayed_from"] = stored.run_id
        print(dump(document))
    else:
        print_agent_summary(console, output, resume=[])
        console.print(Text(f"replayed run {stored.run_id} from step {args.from_step} as "
                           f"run {output.run_id}"), soft_wrap=True)
    return 0 if output.tripwire is None and output.finish_reason != "error" else 1


async def _agent_resume(args: argparse.Namespace, store: Store, agent: Agent,
                        live: LiveRun) -> Callable[[], Awaitable[ModelOutput[Any]]]:
    """What resumes the suspended agent run ``--resume`` names, checked first: the run
    exists, is this agent's, is suspended, and waits on the calls answered."""
    stored = await _load_run(agent.workflow, args.resume, store)
    result = stored.last_result
    if result is None or result.status != "suspended":
        status = result.status if result is not None else stored.status
        raise UsageError(f"run '{stored.run_id}' of agent '{agent.id}' is not suspended "
                         f"(status {status}); only a suspended run can be resumed")
    waiting = [str(c.get("tool_call_id")) for c in waiting_calls(result)]
    unknown = sorted((set(args.approve or ()) | set(args.deny or ())) - set(waiting))
    if unknown:
        raise UsageError(f"run '{stored.run_id}' is not waiting on tool call(s) {unknown}; "
                         f"it waits on {waiting}")
    data = parse_json(args.data, "--data") if args.data is not None else None
    run_id = live.pending_run_id = stored.run_id

    def open_stream() -> Awaitable[ModelOutput[Any]]:
        return agent.resume_stream(run_id, approve=args.approve or [], deny=args.deny or [],
                                   resume_data=data)
    return open_stream


def _agent_resume_lines(args: argparse.Namespace, store: Store,
                        output: FullOutput[Any]) -> list[str]:
    """The command lines that resume a suspended agent run (empty when it is not)."""
    if not output.suspended:
        return []
    base = _command(args, store, "run", args.target, "--resume", output.run_id)
    asks = [c for c in output.suspended if c.payload is not None]
    approvals = [c.tool_call_id for c in output.suspended if c.payload is None]
    lines = []
    if approvals:
        approve = " ".join(f"--approve {shlex.quote(i)}" for i in approvals)
        deny = " ".join(f"--deny {shlex.quote(i)}" for i in approvals)
        lines += [f"{base} {approve}", f"{base} {deny}"]
    if asks:
        lines.append(f"{base} --data JSON")
    return lines


def _agent_messages(data: Any) -> Any:
    if isinstance(data, str):
        return data
    if isinstance(data, dict) and "prompt" in data:
        if not isinstance(data["prompt"], str):
            raise UsageError(f'"prompt" must be a string, got {type(data["prompt"]).__name__}')
        return data["prompt"]
    if (isinstance(data, dict) and "role" in data) or (isinstance(data, list) and data):
        return data
    if isinstance(data, int | float | bool):
        return json.dumps(data)  # "42" typed as a prompt parses as JSON: send it as text
    raise UsageError('an Agent\'s --input is a prompt, {"prompt": "..."} or messages, got '
                     f"{json.dumps(data)[:60]}")


# -- runs and trace ----------------------------------------------------------------


async def _runs(args: argparse.Namespace, console: Console, store: Store) -> int:
    if args.limit < 1:
        raise UsageError(f"--limit must be 1 or more, got {args.limit}")
    return await print_runs(console, store, mode=output_mode(args, console),
                            workflow=args.workflow, status=args.status, limit=args.limit)


async def _trace(args: argparse.Namespace, console: Console, store: Store) -> int:
    from procflow.studio.diff import TraceDiff
    from procflow.studio.timeline import TimelineView, timeline_lines, to_svg
    from procflow.studio.trace import TraceView

    storage, where = store.storage, store.location
    run_id = await resolve_run_id(storage, args.run_id, where)
    trace = await storage.load_trace(run_id)
    if trace is None:
        raise RunNotFoundError(f"run '{run_id}' in {where} has no trace (a run that has "
                               "not finished an execution yet)", run_id=run_id)
    mode = output_mode(args, console)
    if args.diff is not None:
        if args.step is not None:
            raise UsageError("--step and --diff cannot be used together")
        other_id = await resolve_run_id(storage, args.diff, where)
        other = await storage.load_trace(other_id)
        if other is None:
            raise RunNotFoundError(f"run '{other_id}' in {where} has no trace", run_id=other_id)
        if args.timeline:
            raise UsageError("--diff and --timeline cannot be used together")
        if mode == "json":
            print(dump({"a": trace_document(trace), "b": trace_document(other)}))
        elif args.format == "svg":
            print(to_svg(TraceDiff(trace, other), width=drawing_width(),
                         title=f"procflow trace {run_id} --diff {other_id}"))
        else:
            console.print(TraceDiff(trace, other))
        return 0
    if args.timeline and args.step is not None:
        raise UsageError("--step and --timeline cannot be used together")
    view: Any = (TimelineView(trace) if args.timeline
                 else TraceView(trace, step=args.step))  # raises naming what exists
    if mode == "json":
        document = trace_document(trace)
        if args.step is not None:
            keep = {row.get("span_id") for row in view.selected}
            document["spans"] = [s for s in document["spans"] if s["span_id"] in keep]
        print(dump(document))
    elif args.format == "svg":
        print(to_svg(view, width=drawing_width(), title=f"procflow trace {run_id}"))
    elif mode == "plain":
        lines = (timeline_lines(trace) if args.timeline
                 else step_lines(view.selected) if args.step is not None
                 else trace_lines(trace))
        for line in lines:
            print(line)
    else:
        console.print(view, width=drawing_width(console))
    return 0
