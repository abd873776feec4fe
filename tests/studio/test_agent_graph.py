"""``procflow graph`` of an agent draws every processor where it acts — stream-only
output processors and llm request processors under the model call — and the tools
processors add (a tool search's meta-tools and searchable tools) under the tool step;
a run's final view marks the processors and tools that ran."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from procflow.agent import Agent, tool
from procflow.agent.loop import MAX_DRAWN_TOOLS
from procflow.models import ScriptedModel
from procflow.processors import Processor
from procflow.processors.builtin import ToolSearchProcessor
from procflow.storage import InMemoryStorage
from procflow.studio.export import to_dot, to_mermaid

TARGET = '''
from procflow import Agent
from procflow.agent import tool
from procflow.models import ScriptedModel, ToolCall
from procflow.processors import Processor
from procflow.processors.builtin import ToolSearchProcessor


class Shout(Processor):
    id = "shout"

    async def process_output_stream(self, args):
        return args.part


class Budget(Processor):
    id = "budget"

    async def process_llm_request(self, args):
        return None


@tool
async def weather(city: str) -> str:
    """The weather in a city."""
    return "sunny"


@tool
async def stock_price(symbol: str) -> str:
    """A stock's price."""
    return "42"


support = Agent(id="support", tools=[weather],
                model=ScriptedModel([[ToolCall("weather", {"city": "Oslo"}, id="c1")],
                                     "it is sunny"]),
                input_processors=[Budget(), ToolSearchProcessor([stock_price])],
                output_processors=[Shout()])
'''


def procflow(cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PROCFLOW_DEBUG", "NO_COLOR", "FORCE_COLOR", "COLUMNS", "PROCFLOW_DB")}
    done = subprocess.run([sys.executable, "-m", "procflow", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("agent-graph")
    (root / "support.py").write_text(TARGET)
    return root


def _symbol_of(out: str, node: str) -> str:
    """The status symbol drawn before ``node`` (lanes share a line)."""
    [found] = re.findall(rf"(\S) \S {re.escape(node)}(?=\s)", out)
    return str(found)


def test_plain_graph_draws_stream_and_request_processors_and_added_tools(
        project: Path) -> None:
    out = procflow(project, "graph", "support.py:support", "--plain", "--depth", "3")
    assert "workflow llm-call (2 steps)" in out
    assert "◆ processor:budget  [llm_request]" in out
    assert "◆ processor:shout  [output_stream]" in out
    assert "◆ processor:tool-search  [input_step]" in out
    assert "workflow tool-calls (4 steps)" in out
    for name in ("weather", "search_tools", "load_tool", "stock_price"):
        assert f"tool:{name}" in out
    lines = out.splitlines()
    llm = next(i for i, line in enumerate(lines) if "workflow llm-call" in line)
    budget = next(i for i, line in enumerate(lines) if "processor:budget" in line)
    shout = next(i for i, line in enumerate(lines) if "processor:shout" in line)
    tools = next(i for i, line in enumerate(lines) if "workflow tool-calls" in line)
    assert llm < budget < shout < tools  # inside the model call, before the tool step


@pytest.mark.parametrize(("fmt", "expected"), [
    pytest.param("mermaid", ['["processor:shout [output_stream]"]',
                             '["processor:budget [llm_request]"]', '"tool:search_tools"',
                             '"tool:stock_price"'], id="mermaid"),
    pytest.param("dot", ['"agent-step.llm-call.processor:shout" [label="processor:shout '
                         '[output_stream]"];',
                         '"agent-step.llm-call.processor:budget"',
                         '"agent-step.tool-calls.tool:load_tool" [label="tool:load_tool"];',
                         '"agent-step.tool-calls" -> "agent-step.tool-calls.tool:stock_price";'],
                 id="dot"),
])
def test_mermaid_and_dot_draw_them_too(project: Path, fmt: str, expected: list[str]) -> None:
    out = procflow(project, "graph", "support.py:support", "--format", fmt)
    for text in expected:
        assert text in out


def test_graph_json_lists_them_as_nodes(project: Path) -> None:
    doc = json.loads(procflow(project, "graph", "support.py:support", "--json"))
    kinds = {n["id"]: n["kind"] for n in doc["nodes"]}
    assert kinds["agent-step.llm-call.processor:shout"] == "processor"
    assert kinds["agent-step.tool-calls.tool:search_tools"] == "tool"
    hooks = {n["id"]: n.get("hooks") for n in doc["nodes"]}
    assert hooks["agent-step.llm-call.processor:shout"] == ["process_output_stream"]


def test_a_run_marks_the_processors_and_tools_that_ran(project: Path) -> None:
    out = procflow(project, "run", "support.py:support", "--input", "weather?", "--plain",
                   "--depth", "3")
    for node in ("processor:budget", "processor:shout", "processor:tool-search",
                 "tool:weather"):
        assert _symbol_of(out, node) == "●", node
    assert _symbol_of(out, "tool:stock_price") == "○"  # offered, never called
    assert "it is sunny" in out


class StreamOnly(Processor):
    id = "stream-only"

    async def process_output_stream(self, args: object) -> object:
        return getattr(args, "part", None)


@tool
async def echo(text: str) -> str:
    """Echo the text."""
    return text


def _tools(n: int) -> list[object]:
    made = []
    for i in range(n):
        async def fn(x: str) -> str:
            return x
        fn.__name__ = f"hidden_{i}"
        fn.__doc__ = f"Hidden tool {i}."
        made.append(tool(fn))
    return made


def test_a_processor_adding_many_tools_is_drawn_with_a_more_node() -> None:
    many = _tools(MAX_DRAWN_TOOLS + 4)
    agent = Agent(id="many", model=ScriptedModel(["x"]),
                  input_processors=[ToolSearchProcessor(many)])  # type: ignore[arg-type]
    mermaid = to_mermaid(agent, depth=None)
    assert "tool:search_tools" in mermaid and "tool:load_tool" in mermaid
    assert f"tool:hidden_{MAX_DRAWN_TOOLS - 4}" in mermaid
    assert f"tool:hidden_{MAX_DRAWN_TOOLS - 3}" not in mermaid
    assert "tools:tool-search" in mermaid
    assert "tools:tool-search" in to_dot(agent)


@pytest.mark.anyio
async def test_a_stream_only_processor_still_runs_and_is_traced_under_the_model_call(
        ) -> None:
    storage = InMemoryStorage()
    agent = Agent(id="streamed", model=ScriptedModel(["hello there"]), storage=storage,
                  output_processors=[StreamOnly()], tools=[echo])
    assert "processor:stream-only" in to_mermaid(agent, depth=None)
    out = await agent.generate("hi")
    assert out.text == "hello there" and out.usage.total_tokens > 0
    trace = await storage.load_trace(out.run_id)
    assert trace is not None
    by_id = {s["span_id"]: s for s in trace.spans}
    [span] = [s for s in trace.spans if s["name"] == "output stream processor: stream-only"]
    assert by_id[span["parent_id"]]["path"] == "agent-step.llm-call"
    assert by_id[span["parent_id"]]["attributes"]["usage"] == out.usage.to_dict()
    [run_span] = [s for s in trace.spans if s["kind"] == "run"]
    assert run_span["attributes"]["usage"] == out.usage.to_dict()


README_AGENT = '''
from procflow import Agent, tool
from procflow.models import ScriptedModel
from procflow.processors import PIIDetector, PromptInjectionDetector


@tool
async def lookup_order(order_id: str) -> dict:
    """Look up an order by id."""
    return {"status": "shipped"}


support = Agent(id="support", instructions="Be brief.", model=ScriptedModel(["ok"]),
                tools=[lookup_order], input_processors=[PromptInjectionDetector()],
                output_processors=[PIIDetector(strategy="redact")])
'''


def test_the_readme_shows_what_procflow_graph_draws_for_its_agent(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "agents.md").read_text(
        encoding="utf-8")
    command = "$ procflow graph agent.py:support --depth 3\n"
    start = readme.index(command) + len(command)
    shown = readme[start:readme.index("```", start)]
    (tmp_path / "agent.py").write_text(README_AGENT)
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env["COLUMNS"] = "80"
    drawn = subprocess.run([sys.executable, "-m", "procflow", "graph", "agent.py:support",
                            "--depth", "3", "--no-color"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=60, check=True)
    assert drawn.stdout == shown


def test_each_stage_lists_the_hooks_that_act_in_it() -> None:
    from procflow.processors import PIIDetector
    from procflow.studio.output import graph_document

    pii = PIIDetector(strategy="redact")  # input, output stream and output result hooks
    agent = Agent(id="a", model=ScriptedModel(["ok"]), input_processors=[pii],
                  output_processors=[pii])
    hooks = {n["id"]: n.get("hooks") for n in graph_document(agent.workflow)["nodes"]}
    assert hooks["input-processors.processor:pii-detector"] == ["process_input"]
    assert hooks["agent-step.llm-call.processor:pii-detector"] == ["process_output_stream"]
    assert hooks["output-processors.processor:pii-detector"] == ["process_output_result"]
