"""``procflow eval``, run as a user types it, in a fresh working directory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

EV = '''
import os, time
from pathlib import Path
from procflow import Agent
from procflow.evals import Case, Contains, Dataset, ExactMatch
from procflow.models import FunctionModel

HERE = Path(__file__).parent


def reply(request):
    return "Paris" if "France" in str(request.prompt[-1]["content"]) else "I don't know"


agent = Agent(id="geo", model=FunctionModel(reply))
capitals = Dataset("capitals", cases=[Case(input="Capital of France?", expected="Paris"),
                                      Case(input="Capital of Peru?", expected="Lima")],
                   scorers=[Contains()])

numbers = Dataset("numbers", cases=[Case(input=i, expected=i, name=f"n{i}") for i in range(6)],
                  scorers=[ExactMatch()])


def echo(x):
    with open(HERE / "calls.log", "a") as log:
        log.write(f"{x}\\n")
    if (HERE / f"hang{x}").exists():
        (HERE / f"hang{x}").unlink()
        time.sleep(60)
    wrong = (HERE / "wrong").read_text().split() if (HERE / "wrong").exists() else []
    return -1 if str(x) in wrong else x
'''


def procflow(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PROCFLOW_DEBUG", "NO_COLOR", "FORCE_COLOR", "COLUMNS", "PROCFLOW_DB")}
    return subprocess.run([sys.executable, "-m", "procflow", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "ev.py").write_text(EV)
    return tmp_path


def test_below_the_threshold_exits_1_with_a_json_report(project: Path) -> None:
    result = procflow(project, "eval", "ev.py:capitals", "--target", "ev.py:agent",
                      "--fail-under", "0.9", "--json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert (report["dataset"], report["scorers"], report["averages"]) == (
        "capitals", ["Contains"], {"Contains": 0.5})
    assert [c["scores"] for c in report["cases"]] == [{"Contains": 1.0}, {"Contains": 0.0}]
    assert report["below_threshold"] == ["Contains: 0.5 < 0.9"]
    listed = procflow(project, "runs", "--workflow", "eval:capitals")
    assert report["run_id"] in listed.stdout


def test_the_plain_table_and_a_named_threshold_that_holds(project: Path) -> None:
    result = procflow(project, "eval", "ev.py:capitals", "--target", "ev.py:agent",
                      "--fail-under", "Contains=0.5")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("experiment ") and "on dataset capitals" in lines[0]
    assert [line.split() for line in lines[1:]] == [
        ["case", "Contains"], ["case-1", "1.00"], ["case-2", "0.00"], ["average", "0.50"]]


@pytest.mark.parametrize(("args", "message"), [
    pytest.param(["ev.py:capitals", "--target", "ev.py:agent", "--fail-under", "Nope=1"],
                 "--fail-under names no scorer of dataset 'capitals': Nope", id="scorer"),
    pytest.param(["ev.py:agent", "--target", "ev.py:agent"],
                 "ev.py:agent is an Agent, not a procflow.evals.Dataset", id="not-dataset"),
    pytest.param(["ev.py:capitals"], "give a DATASET and a --target", id="no-target"),
    pytest.param(["ev.py:capitals", "--target", "ev.py:agent", "--fail-under", "2"],
                 "a threshold is between 0 and 1", id="threshold-range"),
])
def test_usage_errors_are_one_line(project: Path, args: list[str], message: str) -> None:
    result = procflow(project, "eval", *args)
    assert result.returncode == 2
    assert result.stderr.startswith("procflow: error:") and message in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_a_killed_experiment_continues_with_only_its_unfinished_cases(project: Path) -> None:
    (project / "hang3").touch()
    env = {k: v for k, v in os.environ.items() if k not in ("PROCFLOW_DB", "PROCFLOW_DEBUG")}
    args = ["eval", "ev.py:numbers", "--target", "ev.py:echo", "--concurrency", "1",
            "--run-id", "exp-1"]
    first = subprocess.Popen([sys.executable, "-m", "procflow", *args], cwd=project, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = project / "calls.log"
    deadline = time.monotonic() + 30
    while (project / "hang3").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    assert log.read_text().split() == ["0", "1", "2", "3"]
    result = procflow(project, *args, "--json")
    assert result.returncode == 0, result.stderr
    assert log.read_text().split() == ["0", "1", "2", "3", "3", "4", "5"]
    report = json.loads(result.stdout)
    assert (report["status"], report["averages"]) == ("success", {"ExactMatch": 1.0})


def test_compare_lists_the_case_whose_score_dropped_first(project: Path) -> None:
    def experiment() -> str:
        result = procflow(project, "eval", "ev.py:numbers", "--target", "ev.py:echo",
                          "--json")
        return str(json.loads(result.stdout)["run_id"])

    (project / "wrong").write_text("1")
    before = experiment()
    (project / "wrong").write_text("4")
    after = experiment()
    result = procflow(project, "eval", "--compare", before, after)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "1 regression(s), 1 improvement(s)" in lines
    changes = lines[lines.index("1 regression(s), 1 improvement(s)") + 1:]
    assert changes == ["regressed: n4 ExactMatch 1.00 -> 0.00 (-1.00)",
                       "improved: n1 ExactMatch 0.00 -> 1.00 (+1.00)"]
    data = json.loads(procflow(project, "eval", "--compare", before[:10], after,
                               "--json").stdout)
    assert [(c["case"], c["regression"]) for c in data["changes"]] == [("n4", True),
                                                                      ("n1", False)]


def test_stored_agent_runs_are_scored_from_the_command_line(project: Path) -> None:
    (project / "checks.py").write_text(
        "from procflow.evals import Contains, NoPII\nscorers = [Contains('Paris'), NoPII()]\n")
    for question in ("Capital of France?", "Capital of Peru?"):
        assert procflow(project, "run", "ev.py:agent", "--input", question).returncode == 0
    result = procflow(project, "eval", "--runs", "--agent", "geo", "--since", "1h",
                      "--scorers", "checks.py:scorers", "--fail-under", "Contains=0.9",
                      "--json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert (report["workflow_id"], report["averages"]) == (
        "eval:runs-geo", {"Contains": 0.5, "NoPII": 1.0})
    assert sorted(c["input"] for c in report["cases"]) == ["Capital of France?",
                                                           "Capital of Peru?"]
    missing = procflow(project, "eval", "--runs", "--scorers", "checks.py:nope")
    assert missing.returncode == 2 and "it defines: scorers" in missing.stderr
