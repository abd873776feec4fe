"""Drawings that tell the truth: an agent's drawing shows what the user configured at
the default depth, each thing once, labelled with the hooks acting where it is drawn;
SVG pictures, the timeline, and pipe-safe output (COLUMNS honoured, nothing cut)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.studio.test_cli import ok, procflow

AGENTS = '''
from procflow import Agent, create_step, create_workflow, tool
from procflow.models import ScriptedModel
from procflow.processors import (ModerationProcessor, PIIDetector, ProcessorStepSchema,
                                 PromptInjectionDetector, TokenLimiter, UnicodeNormalizer,
                                 merge_processor_results)

support = Agent(id="support", model=ScriptedModel(["ok"]),
                input_processors=[UnicodeNormalizer(), TokenLimiter(1000)],
                output_processors=[PIIDetector()])

guardrails = (create_workflow(id="guardrails", input_schema=ProcessorStepSchema,
                              output_schema=ProcessorStepSchema)
              .parallel([create_step(PIIDetector(strategy="redact")),
                         create_step(PromptInjectionDetector()),
                         create_step(ModerationProcessor())])
              .map(merge_processor_results).commit())


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return "shipped"


guarded = Agent(id="guarded", model=ScriptedModel(["ok"]), tools=[lookup],
                input_processors=[guardrails, TokenLimiter(1000)])
'''


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pictures")
    (root / "ag.py").write_text(AGENTS)
    ok(procflow(root, "run", "ag.py:guarded", "--input", "hello", "--run-id", "g1"))
    return root


def test_an_agent_drawing_shows_every_processor_and_tool_by_default(project: Path) -> None:
    out = ok(procflow(project, "graph", "ag.py:support"))
    for name in ("unicode-normalizer", "token-limiter", "pii-detector"):
        assert f"processor:{name}" in out
    guarded = ok(procflow(project, "graph", "ag.py:guarded"))
    assert "tool:lookup" in guarded and "processor:token-limiter" in guarded


def test_a_processor_workflow_is_drawn_once_with_the_hooks_acting_there(
        project: Path) -> None:
    out = ok(procflow(project, "graph", "ag.py:guarded", "--depth", "3"))
    assert out.count("workflow guardrails") == 1
    assert "processor:pii-detector  [input]" in out
    assert "output_stream" not in out


def test_graph_svg_is_a_standalone_picture(project: Path) -> None:
    out = ok(procflow(project, "graph", "ag.py:support", "--format", "svg"))
    root = ET.fromstring(out)
    assert root.tag.endswith("svg")
    assert "token-limiter" in out and "pii-detector" in out


def test_drawings_piped_honour_columns(project: Path) -> None:
    for columns, most in (("70", 70), (None, 100)):
        env = {"COLUMNS": columns} if columns else {}
        out = ok(procflow(project, "graph", "ag.py:guarded", **env))
        assert max(len(line) for line in out.splitlines()) <= most
        assert "processor:prompt-injection-detector" in out


def test_the_timeline_draws_every_span_on_one_axis(project: Path) -> None:
    plain = ok(procflow(project, "trace", "g1", "--timeline")).splitlines()
    assert plain[0].startswith("# timeline agent:guarded\trun g1\tsuccess")
    spans = json.loads(ok(procflow(project, "trace", "g1", "--json")))["spans"]
    assert len(plain) == 1 + len(spans)
    status, offset, _, kind, name = plain[1].split("\t")
    assert (status, float(offset), kind, name) == ("success", 0.0, "run", "run: agent:guarded")
    svg = ok(procflow(project, "trace", "g1", "--timeline", "--format", "svg"))
    text = "".join(ET.fromstring(svg).itertext()).replace("\xa0", " ")
    assert "input processor: prompt-injection-detector" in text


def test_trace_svg_is_a_standalone_picture(project: Path) -> None:
    svg = ok(procflow(project, "trace", "g1", "--format", "svg"))
    ET.fromstring(svg)
    assert "guardrails" in svg


def test_a_step_piped_is_plain_lines_nothing_cut(project: Path) -> None:
    out = ok(procflow(project, "trace", "g1", "--step", "processor:moderation"))
    lines = out.splitlines()
    assert lines[0].startswith("# span ") and "\tprocessor:moderation\t" in lines[0]
    fields = dict(line.split("\t", 1) for line in lines[1:])
    assert fields["kind"] == "processor"
    assert json.loads(fields["input"])["phase"] == "input"
    assert "╭" not in out and "│" not in out


def test_a_diff_is_a_picture_too(project: Path) -> None:
    svg = ok(procflow(project, "trace", "g1", "--diff", "g1", "--format", "svg"))
    ET.fromstring(svg)
