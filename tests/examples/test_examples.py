"""Every example runs offline and ends well."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quickstart_suspends_then_resumes(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "quickstart.py"),
                           str(tmp_path / "q.db")], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "step-suspended  approve" in done.stdout
    assert "step-skipped    auto-approve" in done.stdout
    assert ": suspended at approve\n" in done.stdout
    assert "resumed: success, result=3, approve='approved'" in done.stdout


def test_guarded_agent_streams_redacts_and_blocks(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "guarded_agent.py")],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "should arrive on Thursday" in done.stdout
    assert "[lookup_order → {'status': 'shipped'" in done.stdout
    assert "the model saw the email redacted: True" in done.stdout
    assert "blocked by prompt-injection-detector" in done.stdout


def test_the_guarded_agent_is_drawn_with_its_guardrails_and_tool(tmp_path: Path) -> None:
    # the command the example's docstring gives
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    done = subprocess.run([sys.executable, "-m", "procflow", "graph",
                           f"{ROOT / 'examples' / 'guarded_agent.py'}:support", "--depth", "3"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "workflow agent:support" in done.stdout
    for node in ("workflow guardrails", "processor:prompt-injection-detector",
                 "processor:token-limiter", "tool:lookup_order"):
        assert node in done.stdout, node


def approval(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "examples" / "approval.py"), *args],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)


def test_approval_suspends_in_one_process_and_is_approved_in_another(tmp_path: Path) -> None:
    started = approval(tmp_path, "start")
    assert started.returncode == 0, started.stderr
    head, waiting = started.stdout.splitlines()[:2]
    run_id = head.split()[1].rstrip(":")
    assert head == f"run {run_id}: suspended"
    assert waiting.split() == ["waiting", "for", "approval:", "call_1", 'refund({"order_id":',
                               '"A-1"})']
    ledger = tmp_path / ".procflow" / "refunds.txt"
    assert not ledger.exists()  # nothing is refunded before the approval

    done = approval(tmp_path, "approve", run_id)  # a second process, a fresh model
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"run {run_id}: success", "  refund -> refunded A-1",
                                        "Done: order A-1 is refunded."]
    again = approval(tmp_path, "approve", run_id)
    assert again.returncode == 1 and "is not suspended (status 'success')" in again.stderr
    assert ledger.read_text() == "A-1\n"  # the refund ran exactly once


def test_evals_support_scores_the_agent_and_its_guards(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "evals_support.py")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["case", "Contains", "NoPII", "refuses_attacks"]
    assert lines[6].split() == ["average", "1.00", "1.00", "1.00"]
    # the PII guard redacted the tool's result: the model never saw the email to repeat
    assert lines[7] == "email case answered: The order is shipped."
    assert lines[8] == "tool use: {'ToolCalled': 1.0}"
    assert lines[9].startswith("injection-guard: precision 1.00, recall 0.50, wrong on [")
    assert lines[10] == "pii-guard: precision 1.00, recall 1.00, wrong on []"


def test_evals_support_from_the_command_line(tmp_path: Path) -> None:
    example = ROOT / "examples" / "evals_support.py"
    done = subprocess.run([sys.executable, "-m", "procflow", "eval", f"{example}:questions",
                           "--target", f"{example}:support", "--fail-under", "0.9"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].split() == ["average", "1.00", "1.00", "1.00"]


def test_triage_hands_off_and_billing_asks_the_research_agent(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "triage.py"),
                           str(tmp_path / "t.db")], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1] == ("billing: You were charged twice for the Pro plan on 2026-11-02; "
                        "I refunded €12.00.")
    assert lines[4].startswith("support: Restart the router")
    billing_run = lines[2].split()[1]
    trace = subprocess.run([sys.executable, "-m", "procflow", "--db", str(tmp_path / "t.db"),
                            "trace", billing_run], capture_output=True, text=True,
                           timeout=60, cwd=tmp_path)
    assert trace.returncode == 0, trace.stderr
    # the research agent's run is nested under billing's tool call, its tool under it
    rows = [row.split("\t")[-2] for row in trace.stdout.splitlines()[1:]]
    at = rows.index("          tool call: research")
    assert rows[at + 1] == "            agent:research"
    assert "                      tool call: list_charges" in rows[at + 1:]
    research_run = next(line.split("\t")[0] for line in subprocess.run(
        [sys.executable, "-m", "procflow", "--db", str(tmp_path / "t.db"), "runs"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path).stdout.splitlines()
        if "\tagent:research\t" in line)
    child = subprocess.run([sys.executable, "-m", "procflow", "--db", str(tmp_path / "t.db"),
                            "trace", research_run], capture_output=True, text=True,
                           timeout=60, cwd=tmp_path)
    assert child.returncode != 0
    assert f"its spans are in the trace of run '{billing_run}'" in child.stderr


def test_the_triage_agent_is_drawn_with_its_handoffs(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "procflow", "graph",
                           f"{ROOT / 'examples' / 'triage.py'}:triage"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "workflow agent:triage" in done.stdout
    assert "⇢ handoff billing  (transfer_to_billing)" in done.stdout
    assert "◈ tool research  (research)" in done.stdout
    assert "⇢ handoff support  (transfer_to_support)" in done.stdout
    as_json = subprocess.run([sys.executable, "-m", "procflow", "--json", "graph",
                              f"{ROOT / 'examples' / 'triage.py'}:triage"],
                             capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["agents"] == [
        {"from": "triage", "to": "billing", "kind": "handoff", "tool": "transfer_to_billing"},
        {"from": "triage", "to": "support", "kind": "handoff", "tool": "transfer_to_support"},
        {"from": "billing", "to": "research", "kind": "tool", "tool": "research"}]


def test_mcp_agent_calls_the_tool_of_an_mcp_server(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "mcp_agent.py")],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "tools: ['orders_order_status']" in done.stdout
    assert "tool result: {'order_id': 'A-1', 'status': 'shipped', 'eta': 'Thursday'}" \
        in done.stdout
    assert "answer: Order A-1 has shipped and arrives on Thursday." in done.stdout
    assert "'mcp.server': 'orders', 'mcp.tool': 'order_status'" in done.stdout
