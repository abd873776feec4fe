"""The ``procflow`` command, run as a user types it: ``python -m procflow ...`` in a
fresh working directory holding small target files."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

FLOWS = '''
import os
from procflow import create_step, create_workflow

LOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.log")


def logged(name, fn):
    def execute(ctx):
        with open(LOG, "a") as log:
            log.write(name + "\\n")
        return fn(ctx)
    return create_step(id=name, execute=execute)


pipeline = (create_workflow(id="pipeline", description="doubles, fans out, squares")
            .then(logged("double", lambda ctx: ctx.input_data * 2))
            .parallel([logged("inc", lambda ctx: ctx.input_data + 1),
                       logged("dec", lambda ctx: ctx.input_data - 1)])
            .then(logged("to-list", lambda ctx: list(range(ctx.input_data["inc"]))))
            .foreach(logged("square", lambda ctx: ctx.input_data ** 2), concurrency=2)
            .then(logged("total", lambda ctx: sum(ctx.input_data)))
            .commit())


async def approve(ctx):
    if ctx.resume_data is None:
        await ctx.suspend({"question": f"approve {ctx.input_data}?"})
    return {"amount": ctx.input_data, "approved": ctx.resume_data["ok"]}


approval = (create_workflow(id="approval")
            .then(logged("prepare", lambda ctx: ctx.input_data))
            .then(create_step(id="approve", execute=approve))
            .commit())


def broken_step(ctx):
    raise RuntimeError("the disk is full")


broken = create_workflow(id="broken").then(create_step(id="oops", execute=broken_step)).commit()


def helper(x):
    return x
'''

AGENT = '''
from procflow import Agent
from procflow.errors import APICallError
from procflow.models import ScriptedModel

helper = Agent(id="helper", model=ScriptedModel(["Hello there, this is the helper speaking."]))
failing = Agent(id="failing", model=ScriptedModel([APICallError("provider is down")]))
'''


def procflow(cwd: Path, *args: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PROCFLOW_DEBUG", "NO_COLOR", "FORCE_COLOR", "COLUMNS")}
    env.update(extra_env)
    return subprocess.run([sys.executable, "-m", "procflow", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=30, check=False)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return result.stdout


def run_id_of(output: str) -> str:
    found = re.search(r"^run id: (\S+)$", output, re.MULTILINE)
    assert found, output
    return found.group(1)


def calls(workdir: Path) -> list[str]:
    return (workdir / "calls.log").read_text().split()


def make_project(root: Path) -> Path:
    (root / "flows.py").write_text(FLOWS)
    (root / "agent_target.py").write_text(AGENT)
    (root / "input.json").write_text("3")
    return root


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A project with runs r1 (input 2), r2 (input 3 from a file), a suspended run s1
    and an agent run, made once for the read-only tests."""
    root = make_project(tmp_path_factory.mktemp("shared"))
    return {
        "root": root,
        "r1": ok(procflow(root, "run", "flows.py:pipeline", "--input", "2", "--run-id", "r1")),
        "r2": ok(procflow(root, "run", "flows.py:pipeline", "--input", "@input.json",
                          "--run-id", "r2")),
        "s1": ok(procflow(root, "run", "flows.py:approval", "--input", "50", "--run-id", "s1")),
        "agent": ok(procflow(root, "run", "agent_target.py:helper", "--input",
                             '{"prompt": "hi"}')),
    }


# -- graph ------------------------------------------------------------------------


@pytest.mark.parametrize(("fmt", "expected"), [
    pytest.param("tree", ["workflow pipeline", "┏━ parallel (2 lanes)", "□ square"], id="tree"),
    pytest.param("mermaid", ["flowchart TD", '["for each (concurrency 2): square"]'],
                 id="mermaid"),
    pytest.param("dot", ['digraph "pipeline" {', '"double" [label="double"];'], id="dot"),
])
def test_graph_formats(project: Path, fmt: str, expected: list[str]) -> None:
    out = ok(procflow(project, "graph", "flows.py:pipeline", "--format", fmt))
    for text in expected:
        assert text in out


def test_graph_of_a_module_target(project: Path) -> None:
    out = ok(procflow(project, "graph", "flows:approval"))
    assert "□ prepare" in out and "□ approve" in out


def test_graph_of_an_agent_draws_its_loop(project: Path) -> None:
    out = ok(procflow(project, "graph", "agent_target.py:helper"))
    assert "workflow agent:helper" in out
    assert "□ llm-call" in out


# -- run ---------------------------------------------------------------------------


def test_run_prints_final_view_result_and_run_id(shared: dict[str, object]) -> None:
    out = str(shared["r1"])
    assert "● □ double" in out and "● □ total" in out
    assert "5/5 items" in out  # the foreach progress
    assert "● success" in out
    assert "output: 30" in out
    assert run_id_of(out) == "r1"


def test_run_reads_input_from_a_file(shared: dict[str, object]) -> None:
    assert "output: 91" in str(shared["r2"])


def test_a_failed_run_prints_the_error_and_exits_1(project: Path) -> None:
    result = procflow(project, "run", "flows.py:broken")
    assert result.returncode == 1
    assert "✖ □ oops" in result.stdout
    assert "✖ failed: workflow 'broken', step 'oops' failed: RuntimeError" in result.stdout
    # the reason is said once: the step's row gives the cause, stderr stays quiet
    assert (result.stdout + result.stderr).count("step 'oops' failed") == 1
    assert run_id_of(result.stdout)
    assert "Traceback" not in result.stdout + result.stderr


def test_agent_run_shows_streamed_text(shared: dict[str, object]) -> None:
    out = str(shared["agent"])
    assert "Hello there, this is the helper speaking." in out
    assert "● □ llm-call" in out
    assert "● success" in out
    assert run_id_of(out)


def test_a_failing_agent_run_exits_1(project: Path) -> None:
    result = procflow(project, "run", "agent_target.py:failing", "--input", '"hi"')
    assert result.returncode == 1
    assert "✖ failed: APICallError: provider is down" in result.stdout
    assert run_id_of(result.stdout)
    assert_one_error_line(result, "provider is down")


def test_db_option_goes_before_or_after_the_command(project: Path) -> None:
    out = ok(procflow(project, "--db", "store/runs.db", "run", "flows.py:pipeline",
                      "--input", "1"))
    assert (project / "store" / "runs.db").is_file()
    assert not (project / ".procflow").exists()
    listed = ok(procflow(project, "runs", "--db", "store/runs.db"))
    assert run_id_of(out) in listed


def test_no_color_strips_styles(project: Path) -> None:
    styled = ok(procflow(project, "graph", "flows.py:approval", FORCE_COLOR="1"))
    plain = ok(procflow(project, "--no-color", "graph", "flows.py:approval", FORCE_COLOR="1"))
    assert "\x1b[" in styled
    assert "\x1b[" not in plain


# -- runs and trace ------------------------------------------------------------------


def test_runs_lists_every_run(shared: dict[str, object]) -> None:
    out = ok(procflow(Path(str(shared["root"])), "runs"))
    for run_id in ("r1", "r2", "s1", run_id_of(str(shared["agent"]))):
        assert run_id in out
    assert "agent:helper" in out
    # piped: one tab-separated record per line, full ids, nothing cut
    assert re.search(r"^s1\tapproval\tsuspended\t\S+\t[\d.]+\t-\t-\tapprove$", out,
                     re.MULTILINE)
    assert all(len(line.split("\t")) in (7, 8) for line in out.splitlines())
    # an agent run: its tokens and cost (a ScriptedModel has no price: "?")
    [agent_row] = [line for line in out.splitlines() if "\tagent:helper\t" in line]
    tokens, cost = agent_row.split("\t")[5:7]
    assert int(tokens) > 0 and cost == "?"


def test_runs_filters_by_status(shared: dict[str, object]) -> None:
    out = ok(procflow(Path(str(shared["root"])), "runs", "--status", "suspended"))
    assert "s1" in out
    assert "r1" not in out and "pipeline" not in out


def test_trace_shows_the_span_tree(shared: dict[str, object]) -> None:
    out = ok(procflow(Path(str(shared["root"])), "trace", "r1"))
    assert "run: pipeline" in out
    for step in ("double", "inc", "dec", "to-list", "square[4]", "total"):
        assert step in out


def test_trace_of_one_step(shared: dict[str, object]) -> None:
    out = ok(procflow(Path(str(shared["root"])), "trace", "r1", "--step", "total"))
    assert "total" in out
    assert "30" in out  # the step's output, in its detail


def test_trace_diff_shows_where_two_runs_diverged(shared: dict[str, object]) -> None:
    out = ok(procflow(Path(str(shared["root"])), "trace", "r1", "--diff", "r2"))
    assert "first divergence" in out
    assert "r1" in out and "r2" in out


# -- resume and time travel ----------------------------------------------------------


def test_resume_a_suspended_run_from_the_command_line(project: Path) -> None:
    first = ok(procflow(project, "run", "flows.py:approval", "--input", "50"))
    assert "⏸ suspended: waiting at approve" in first
    assert 'approve asks: {"question": "approve 50?"}' in first
    command = next(line.strip() for line in first.splitlines()
                   if line.strip().startswith("procflow run"))
    words = shlex.split(command)
    assert words[-2:] == ["--data", "JSON"]
    second = ok(procflow(project, *words[1:-1], json.dumps({"ok": True})))
    assert '"approved": true' in second
    assert run_id_of(second) == run_id_of(first)
    assert calls(project) == ["prepare"]  # the step before the suspended one ran once


def test_run_from_step_reruns_only_the_later_steps(project: Path) -> None:
    ok(procflow(project, "run", "flows.py:pipeline", "--input", "2", "--run-id", "orig"))
    (project / "calls.log").write_text("")
    out = ok(procflow(project, "run", "flows.py:pipeline", "--from-step", "to-list",
                      "--run", "orig"))
    assert run_id_of(out) != "orig"
    assert "output: 30" in out
    assert "● □ double" in out and "kept, not re-run" in out
    assert calls(project) == ["to-list", *["square"] * 5, "total"]


# -- errors --------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "message"), [
    pytest.param(["graph", "nope.py:wf"], "no such file: nope.py", id="missing-file"),
    pytest.param(["graph", "flows.py:nothere"],
                 "flows.py has no attribute 'nothere' (it defines: pipeline, approval, broken)",
                 id="missing-name"),
    pytest.param(["graph", "flows.py:helper"],
                 "'helper' is a function, not a Workflow or an Agent", id="wrong-kind"),
    pytest.param(["graph", "flows.py"], "TARGET must look like path/to/file.py:name",
                 id="bad-target-syntax"),
    pytest.param(["graph", "no_such_pkg.flows:wf"], "no module named 'no_such_pkg.flows'",
                 id="missing-module"),
    pytest.param(["run", "flows.py:pipeline", "--json-input", "--input", "{bad"],
                 "invalid --input JSON: ", id="invalid-json"),
    pytest.param(["run", "flows.py:pipeline", "--input", "@nope.json"],
                 "no such file: nope.json", id="missing-input-file"),
    pytest.param(["trace", "nope"], "no runs stored yet: no .procflow/procflow.db in this "
                 "directory or its parents", id="trace-without-database"),
    pytest.param(["run", "flows.py:approval", "--resume", "approve", "--run", "nope",
                  "--data", "{}"], "no run 'nope' of workflow 'approval'",
                 id="unknown-run-resume"),
    pytest.param(["run", "flows.py:pipeline", "--from-step", "x"], "--from-step needs --run",
                 id="from-step-without-run"),
])
def test_errors_are_one_line_without_traceback(project: Path, args: list[str],
                                               message: str) -> None:
    result = procflow(project, *args)
    assert result.returncode == 2
    assert_one_error_line(result, message)


def test_unknown_steps_are_errors(shared: dict[str, object]) -> None:
    root = Path(str(shared["root"]))
    step = procflow(root, "trace", "r1", "--step", "nosuch")
    assert step.returncode != 0
    assert_one_error_line(step, "'nosuch'")
    resume = procflow(root, "run", "flows.py:approval", "--resume", "nosuch", "--run", "s1",
                      "--data", "{}")
    assert resume.returncode != 0
    assert_one_error_line(resume, "step 'nosuch' of run 's1' is not suspended")


def assert_one_error_line(result: subprocess.CompletedProcess[str], message: str) -> None:
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("procflow: error: ")
    assert message in lines[0]
    assert "Traceback" not in result.stdout + result.stderr


# -- prune ---------------------------------------------------------------------------


def test_prune_deletes_finished_runs_and_keeps_the_suspended(project: Path) -> None:
    for args in (["flows.py:pipeline", "--input", "2", "--run-id", "p1"],
                 ["flows.py:broken", "--run-id", "b1"],
                 ["flows.py:approval", "--input", "5", "--run-id", "s1"]):
        procflow(project, "run", *args)
    agent_run = run_id_of(ok(procflow(project, "run", "agent_target.py:helper", "--input",
                                      "hi")))

    old = procflow(project, "prune", "--older-than", "1d")
    assert old.returncode == 0 and old.stdout == ""
    assert old.stderr.startswith("no finished runs last updated before ")

    dry = procflow(project, "prune", "--older-than", "0", "--dry-run", "--status", "failed")
    assert [line.split("\t")[:3] for line in dry.stdout.splitlines()] == [
        ["b1", "broken", "failed"]]
    assert "would delete 1 finished run last updated before" in dry.stderr
    assert "(failed 1)" in dry.stderr

    done = procflow(project, "prune", "--older-than", "0s")
    assert sorted(line.split("\t")[0] for line in done.stdout.splitlines()) == sorted(
        [agent_run, "b1", "p1"])
    assert "deleted 3 finished runs" in done.stderr and "(failed 1, success 2)" in done.stderr
    left = ok(procflow(project, "runs"))
    assert [line.split("\t")[0] for line in left.splitlines()] == ["s1"]
    gone = procflow(project, "trace", "p1")
    assert gone.returncode == 2
    assert_one_error_line(gone, "no run 'p1'")
    # the suspended run still resumes
    resumed = ok(procflow(project, "run", "flows.py:approval", "--resume", "approve",
                          "--run", "s1", "--data", '{"ok": true}'))
    assert "success" in resumed


def test_prune_deletes_traces_stored_without_a_run(project: Path) -> None:
    # an ephemeral run (``create_run(ephemeral=True)``) keeps no record, only its trace
    import anyio

    from procflow.records import TraceRecord
    from procflow.storage import SQLiteStorage

    ok(procflow(project, "run", "flows.py:pipeline", "--input", "2", "--run-id", "p1"))

    async def lone_trace() -> None:
        store = SQLiteStorage(project / ".procflow" / "procflow.db")
        try:
            await store.save_trace(TraceRecord("lone", "pipeline", "success", 100.0, 101.0,
                                               []))
        finally:
            await store.aclose()

    anyio.run(lone_trace)

    old = procflow(project, "prune", "--older-than", "1d")
    assert old.returncode == 0
    assert [line.split("\t") for line in old.stdout.splitlines()] == [
        ["lone", "pipeline", "success", "1970-01-01T00:01:41", "trace only"]]
    assert old.stderr.startswith("deleted 1 trace stored without a run (ended before ")
    assert old.stderr.rstrip().endswith("; no finished runs")
    gone = procflow(project, "trace", "lone")
    assert gone.returncode == 2
    assert [line.split("\t")[0] for line in ok(procflow(project, "runs")).splitlines()] == [
        "p1"]


@pytest.mark.parametrize(("args", "message"), [
    pytest.param(["--older-than", "5x"], "argument --older-than: must be an age such as 30d",
                 id="bad-age"),
    pytest.param(["--older-than=-3d"], "argument --older-than: must be an age",
                 id="negative-age"),
    pytest.param([], "the following arguments are required: --older-than", id="no-age"),
    pytest.param(["--older-than", "1d", "--status", "suspended"], "invalid choice: "
                 "'suspended'", id="unfinished-status"),
])
def test_prune_errors_are_one_line(project: Path, args: list[str], message: str) -> None:
    procflow(project, "run", "flows.py:pipeline", "--input", "2")
    result = procflow(project, "prune", *args)
    assert result.returncode == 2
    assert_one_error_line(result, message)


def test_a_bad_age_is_named_before_any_store_is_looked_for(tmp_path: Path) -> None:
    # no runs stored here: the argument is still what the error is about
    result = procflow(tmp_path, "prune", "--older-than", "3x")
    assert result.returncode == 2
    assert_one_error_line(result, "argument --older-than: must be an age such as 30d")
    assert not (tmp_path / ".procflow").exists()


def test_an_agent_run_takes_the_run_id_given(project: Path) -> None:
    out = ok(procflow(project, "run", "agent_target.py:helper", "--input", "hi",
                      "--run-id", "ask-1"))
    assert run_id_of(out) == "ask-1"
    again = procflow(project, "run", "agent_target.py:helper", "--input", "hi",
                     "--run-id", "ask-1")
    assert again.returncode == 2
    assert_one_error_line(again, "run 'ask-1' already exists in")
    assert "ask-1\tagent:helper\tsuccess" in ok(procflow(project, "runs"))


AGENT_IN_FLOW = '''
from procflow import Agent, Finish, TextDelta, ToolCallChunk, Usage, create_workflow, tool


@tool(requires_approval=True)
async def refund(order_id: str) -> str:
    """Refund an order."""
    return "refunded " + order_id


class Clerk:
    """Calls the tool, then answers from its result (the same in every process)."""

    provider = "local"
    model_id = "clerk"

    async def stream(self, request):
        last = request.prompt[-1]
        if last.get("role") == "tool":
            yield TextDelta("answered after the tool")
            yield Finish("stop", Usage(1, 1, 2))
        else:
            yield ToolCallChunk("c7", "refund", {"order_id": "A-1"})
            yield Finish("tool-calls", Usage(1, 0, 1))


support = Agent(id="support", model=Clerk(), tools=[refund])
orders = create_workflow(id="orders").then(support).commit()
'''


def test_a_workflow_waiting_on_an_agent_approval_prints_the_command_that_approves(
        tmp_path: Path) -> None:
    (tmp_path / "flow.py").write_text(AGENT_IN_FLOW)
    out = ok(procflow(tmp_path, "run", "flow.py:orders", "--input", "refund A-1"))
    assert "suspended: waiting at agent:support" in out
    line = next(x.strip() for x in out.splitlines() if "--resume agent:support" in x)
    assert line.endswith("""--data '{"approve": ["c7"]}'""")
    done = ok(procflow(tmp_path, *shlex.split(line)[1:]))  # pasted, in another process
    assert "answered after the tool" in done and "success" in done
