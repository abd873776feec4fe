"""``procflow run AGENT --resume RUN_ID``: a suspended agent run, stored in a SQLite file
by one process, is resumed by the command in another, approved, denied or answered."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from procflow.studio.output import SCHEMAS

TARGET = '''
import os
from pathlib import Path

from procflow import Agent
from procflow.agent import ToolContext, tool
from procflow.models import ScriptedModel, ToolCall
from procflow.storage import SQLiteStorage

HERE = Path(__file__).parent


@tool(requires_approval=True)
async def refund(order_id: str) -> str:
    """Refund an order."""
    with open(HERE / "refunds.log", "a") as log:
        log.write(order_id + "\\n")
    return f"refunded {order_id}"


@tool
async def ask_human(question: str, ctx: ToolContext) -> str:
    """Ask a person."""
    if ctx.resume_data is None:
        ctx.suspend({"question": question})
    return f"the human said {ctx.resume_data}"


# Every process has the same script: a ScriptedModel answers from the conversation, so
# the resuming process goes on with the turn after the tool call. ``plain`` is edited
# between the processes (a replay with the agent as it is now).
RESUMING = bool(os.environ.get("RESUMING"))
support = Agent(id="support", tools=[refund], model=ScriptedModel(
    [[ToolCall("refund", {"order_id": "A-1"}, id="call-1")], "all settled"]))
asker = Agent(id="asker", tools=[ask_human], model=ScriptedModel(
    [[ToolCall("ask_human", {"question": "ok?"}, id="q1")], "thanks"]))
plain = Agent(id="plain", model=ScriptedModel(
    ["the second answer"] if RESUMING else ["the first answer"]))
'''

SUSPENDER = '''
import sys

import anyio

sys.path.insert(0, sys.argv[1])
from support import support  # noqa: E402
from procflow.storage import SQLiteStorage  # noqa: E402


async def main() -> None:
    support.storage = SQLiteStorage(sys.argv[2])
    out = await support.generate("refund A-1")
    print(out.run_id, out.finish_reason)

anyio.run(main)
'''


def procflow(cwd: Path, *args: str, resuming: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PROCFLOW_DEBUG", "NO_COLOR", "FORCE_COLOR", "COLUMNS", "PROCFLOW_DB",
                        "RESUMING")}
    if resuming:
        env["RESUMING"] = "1"
    return subprocess.run([sys.executable, "-m", "procflow", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def document(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.returncode == 0, result.stderr + result.stdout
    assert result.stderr == ""
    doc: dict[str, Any] = json.loads(result.stdout)
    required = json.loads((SCHEMAS / "run.json").read_text())["oneOf"][1]["required"]
    assert sorted(doc) == sorted(required)
    return doc


def one_error_line(result: subprocess.CompletedProcess[str], *expected: str) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    line = result.stderr
    assert line.startswith("procflow: error: ") and line.count("\n") == 1, line
    for text in expected:
        assert text in line
    return line


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "support.py").write_text(TARGET)
    return tmp_path


def refunds(project: Path) -> list[str]:
    log = project / "refunds.log"
    return log.read_text().split() if log.exists() else []


def suspend(project: Path) -> dict[str, Any]:
    """A ``procflow run`` process whose run suspends on the approval tool."""
    doc = document(procflow(project, "--db", "runs.db", "run", "support.py:support",
                            "--input", "refund A-1", "--json"))
    assert doc["status"] == "suspended" and doc["finish_reason"] == "suspended"
    assert doc["suspended"] == [{"tool_call_id": "call-1", "tool_name": "refund",
                                 "args": {"order_id": "A-1"}, "payload": None}]
    return doc


def test_a_suspended_run_tells_how_to_resume_it(project: Path) -> None:
    doc = suspend(project)
    run_id = doc["run_id"]
    assert doc["resume_commands"] == [
        f"procflow --db runs.db run support.py:support --resume {run_id} --approve call-1",
        f"procflow --db runs.db run support.py:support --resume {run_id} --deny call-1"]
    listed = procflow(project, "--db", "runs.db", "runs", "--status", "suspended")
    assert run_id in listed.stdout and "agent:support" in listed.stdout
    plain = procflow(project, "--db", "runs.db", "run", "support.py:support", "--input",
                     "refund A-1", "--plain")
    assert plain.returncode == 0, plain.stderr
    assert "⏸ suspended: waiting on 1 tool call" in plain.stdout
    assert 'call-1  refund({"order_id": "A-1"}) needs approval' in plain.stdout
    assert "resume with:" in plain.stdout and "--approve call-1" in plain.stdout
    assert refunds(project) == []


def test_the_command_resumes_an_approved_call_from_another_process(project: Path) -> None:
    run_id = suspend(project)["run_id"]
    done = document(procflow(project, "--db", "runs.db", "run", "support.py:support",
                             "--resume", run_id[:10], "--approve", "call-1", "--json",
                             resuming=True))
    assert done["run_id"] == run_id and done["status"] == "success"
    assert done["text"] == "all settled" and done["suspended"] == []
    assert [r["result"] for r in done["tool_results"]] == ["refunded A-1"]
    assert refunds(project) == ["A-1"]
    listed = json.loads(procflow(project, "--db", "runs.db", "runs", "--json").stdout)
    assert [(r["run_id"], r["status"]) for r in listed["runs"]] == [(run_id, "success")]
    again = procflow(project, "--db", "runs.db", "run", "support.py:support", "--resume",
                     run_id, "--approve", "call-1", resuming=True)
    one_error_line(again, f"run '{run_id}' of agent 'support' is not suspended",
                   "status success")


def test_a_run_suspended_by_python_code_is_resumed_by_the_command(project: Path) -> None:
    script = project / "suspend.py"
    script.write_text(textwrap.dedent(SUSPENDER))
    made = subprocess.run([sys.executable, str(script), str(project), "runs.db"], cwd=project,
                          capture_output=True, text=True, timeout=60, check=False)
    assert made.returncode == 0, made.stderr
    run_id, reason = made.stdout.split()
    assert reason == "suspended"
    out = procflow(project, "--db", "runs.db", "run", "support.py:support", "--resume",
                   run_id, "--approve", "call-1", "--plain", resuming=True)
    assert out.returncode == 0, out.stderr
    assert "● success: finish reason stop" in out.stdout and "all settled" in out.stdout
    assert f"run id: {run_id}" in out.stdout
    assert refunds(project) == ["A-1"]


def test_a_denied_call_does_not_run_and_the_model_is_told(project: Path) -> None:
    run_id = suspend(project)["run_id"]
    done = document(procflow(project, "--db", "runs.db", "run", "support.py:support",
                             "--resume", run_id, "--deny", "call-1", "--json",
                             resuming=True))
    assert done["status"] == "success" and done["text"] == "all settled"
    [result] = done["tool_results"]
    assert result["is_error"] and "denied" in result["result"]
    assert refunds(project) == []


def test_a_tool_that_suspended_itself_gets_the_data(project: Path) -> None:
    doc = document(procflow(project, "--db", "runs.db", "run", "support.py:asker", "--input",
                            "go", "--json"))
    assert doc["suspended"][0]["payload"] == {"question": "ok?"}
    assert doc["resume_commands"] == [
        f"procflow --db runs.db run support.py:asker --resume {doc['run_id']} --data JSON"]
    done = document(procflow(project, "--db", "runs.db", "run", "support.py:asker",
                             "--resume", doc["run_id"], "--data", '"yes"', "--json",
                             resuming=True))
    assert done["text"] == "thanks"
    assert [r["result"] for r in done["tool_results"]] == ["the human said yes"]


def test_a_bad_run_id_is_one_line_and_exit_2(project: Path) -> None:
    suspend(project)
    bad = procflow(project, "--db", "runs.db", "run", "support.py:support", "--resume",
                   "no-such-run", "--approve", "call-1")
    one_error_line(bad, "no run 'no-such-run' of workflow 'agent:support'", "runs.db")


def test_a_call_the_run_does_not_wait_on_is_refused(project: Path) -> None:
    run_id = suspend(project)["run_id"]
    bad = procflow(project, "--db", "runs.db", "run", "support.py:support", "--resume",
                   run_id, "--approve", "call-9")
    one_error_line(bad, "not waiting on tool call(s) ['call-9']", "['call-1']")
    other = procflow(project, "--db", "runs.db", "run", "support.py:asker", "--resume", run_id)
    one_error_line(other, f"no run '{run_id}' of workflow 'agent:asker'",
                   "it is a run of workflow 'agent:support'")
    assert refunds(project) == []


@pytest.mark.parametrize(("args", "expected"), [
    pytest.param(["support.py:support", "--input", "x", "--approve", "c1"],
                 "--approve goes with --resume RUN_ID", id="approve-without-resume"),
    pytest.param(["support.py:support", "--input", "x", "--data", "1"],
                 "--data goes with --resume RUN_ID", id="data-without-resume"),
    pytest.param(["support.py:support", "--resume", "r", "--input", "x"],
                 "--input cannot be used with --resume", id="input-with-resume"),
    pytest.param(["support.py:support", "--resume", "r", "--approve", "c", "--deny", "c"],
                 "['c'] are both approved and denied", id="approve-and-deny"),
    pytest.param(["support.py:support", "--resume", "r", "--run", "r"],
                 "--run goes with --from-step STEP on an Agent", id="run-on-agent"),
    pytest.param(["support.py:support", "--from-step", "llm-call"],
                 "--from-step needs --run RUN_ID", id="from-step-without-run"),
    pytest.param(["support.py:support", "--from-step", "llm-call", "--run", "r", "--input",
                  "x"], "--input cannot be used with --from-step", id="input-with-from-step"),
    pytest.param(["flows.py:flow", "--resume", "s", "--run", "r", "--approve", "c"],
                 "--approve answers an agent's waiting tool calls", id="approve-on-workflow"),
])
def test_option_mistakes_are_one_line(project: Path, args: list[str], expected: str) -> None:
    (project / "flows.py").write_text(
        "from procflow import create_step, create_workflow\n"
        "flow = create_workflow(id='flow').then(create_step(id='s', execute=lambda c: 1))"
        ".commit()\n")
    one_error_line(procflow(project, "--db", "runs.db", "run", *args), expected)


def test_from_step_reruns_a_stored_agent_call_with_the_agent_as_it_is_now(
        project: Path) -> None:
    first = document(procflow(project, "--db", "runs.db", "run", "support.py:plain",
                              "--input", "hi", "--json"))
    assert first["text"] == "the first answer"
    # Another process, where the agent's model now answers differently.
    done = procflow(project, "--db", "runs.db", "run", "support.py:plain", "--from-step",
                    "llm-call", "--run", first["run_id"], "--json", resuming=True)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["text"] == "the second answer" and doc["replayed_from"] == first["run_id"]
    assert doc["run_id"] != first["run_id"]
    listed = json.loads(procflow(project, "--db", "runs.db", "runs", "--json").stdout)
    rows = listed if isinstance(listed, list) else listed["runs"]
    assert {r["run_id"] for r in rows} >= {first["run_id"], doc["run_id"]}
    plain = procflow(project, "--db", "runs.db", "run", "support.py:plain", "--from-step",
                     "llm-call", "--run", first["run_id"], resuming=True)
    assert plain.returncode == 0 and "the second answer" in plain.stdout
    assert f"replayed run {first['run_id']} from step llm-call" in plain.stdout


def test_from_step_with_an_unknown_step_names_the_known_ones(project: Path) -> None:
    first = document(procflow(project, "--db", "runs.db", "run", "support.py:plain",
                              "--input", "hi", "--json"))
    one_error_line(procflow(project, "--db", "runs.db", "run", "support.py:plain",
                            "--from-step", "nope", "--run", first["run_id"]),
                   "no stored step", "'agent-step.llm-call'")
