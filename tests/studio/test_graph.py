"""GraphView, to_mermaid and to_dot on a catalogue of workflow shapes (exact text)."""

from __future__ import annotations

import io
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from rich.console import Console

from procflow import Workflow, create_step, create_workflow
from procflow.agent import Agent
from procflow.models import ScriptedModel
from procflow.processors import Processor, ProcessorStepSchema, merge_processor_results
from procflow.steps.step import Step
from procflow.studio import GraphView, NodeState, to_dot, to_mermaid


def render(view: GraphView, width: int = 100) -> str:
    console = Console(width=width, color_system=None, record=True, file=io.StringIO())
    console.print(view)
    return console.export_text()


def s(step_id: str) -> Step:
    return create_step(id=step_id, execute=lambda ctx: ctx.input_data)


def is_urgent(ctx: Any) -> bool:
    return bool(ctx.input_data)


def keep_going(ctx: Any) -> bool:
    return False


class Lowercase(Processor):
    id = "lowercase"

    def process_input(self, args: Any) -> None:
        return None


class PII(Processor):
    id = "pii-detector"

    def process_input(self, args: Any) -> None:
        return None

    def process_output_stream(self, args: Any) -> Any:
        return args.part

    def process_output_result(self, args: Any) -> None:
        return None


class Injection(Processor):
    id = "prompt-injection"

    def process_input_step(self, args: Any) -> None:
        return None


def linear() -> Workflow:
    return create_workflow(id="linear").then(s("fetch")).then(s("parse")).then(s("store")).commit()


def parallel() -> Workflow:
    return (create_workflow(id="fan-out").then(s("fetch"))
            .parallel([s("summarise"), s("translate"), s("classify")]).then(s("merge"))
            .commit())


def branch() -> Workflow:
    return (create_workflow(id="triage").then(s("classify"))
            .branch([(is_urgent, s("escalate")), (lambda ctx: True, s("reply"))]).commit())


def foreach() -> Workflow:
    return (create_workflow(id="batch").then(s("split")).foreach(s("enrich"), concurrency=8)
            .commit())


def dowhile() -> Workflow:
    return create_workflow(id="poll").dowhile(s("check"), keep_going).then(s("report")).commit()


def dountil() -> Workflow:
    return (create_workflow(id="refine").dountil(s("draft"), lambda ctx: True, max_iterations=3)
            .commit())


def markers() -> Workflow:
    return (create_workflow(id="timed").then(s("start")).map(lambda ctx: ctx.input_data)
            .sleep(5).sleep_until(datetime(2030, 1, 1, 9, 30)).map(len, id="count").commit())


def nested() -> Workflow:
    inner = create_workflow(id="inner").then(s("x")).parallel([s("y1"), s("y2")]).commit()
    return create_workflow(id="outer").then(s("prepare")).then(inner).then(s("finish")).commit()


def processors() -> Workflow:
    return (create_workflow(id="moderation", input_schema=ProcessorStepSchema,
                            output_schema=ProcessorStepSchema)
            .then(create_step(Lowercase()))
            .parallel([create_step(PII()), create_step(Injection())])
            .map(merge_processor_results, id="merge").commit())


def agent_loop() -> Workflow:
    return Agent(id="support", model=ScriptedModel(["hi"])).workflow


def deep() -> Workflow:
    innermost = create_workflow(id="innermost").then(s("z")).commit()
    middle = create_workflow(id="middle").then(s("y")).then(innermost).commit()
    return create_workflow(id="deep").then(middle).then(s("done")).commit()


def branch_loop() -> Workflow:
    body = create_workflow(id="attempt").then(s("call")).then(s("check")).commit()
    return (create_workflow(id="retrying").branch([(is_urgent, s("page")), (keep_going, s("log"))])
            .map(lambda ctx: ctx.input_data, id="pick").dountil(body, lambda ctx: True)
            .commit())


# -- expected drawings (rendered once, read, and pasted) ------------------------------

LINEAR = """\
workflow linear
│
▼
□ fetch
│
▼
□ parse
│
▼
□ store
"""


PARALLEL = """\
workflow fan-out
│
▼
□ fetch
│
▼
┏━ parallel (3 lanes) ━━━━━━━━━━━━━━━━━━━━━━━━━━━┓
┃ ╭─────────────╮ ╭─────────────╮ ╭────────────╮ ┃
┃ │ □ summarise │ │ □ translate │ │ □ classify │ ┃
┃ ╰─────────────╯ ╰─────────────╯ ╰────────────╯ ┃
┗━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┛
│
▼
□ merge
"""


BRANCH = """\
workflow triage
│
▼
□ classify
│
▼
┏━ branch (2 lanes) ━━━━━━━━━━━━━━━┓
┃ ╭─ if is_urgent ─╮ ╭─ if True ─╮ ┃
┃ │ □ escalate     │ │ □ reply   │ ┃
┃ ╰────────────────╯ ╰───────────╯ ┃
┗━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┛
"""


FOREACH = """\
workflow batch
│
▼
□ split
│
▼
╔═ for each (concurrency 8) ═╗
║ □ enrich                   ║
╚════════════════════════════╝
"""


DOWHILE = """\
workflow poll
│
▼
╔═ do … while keep_going ═╗
║ □ check                 ║
╚═════════════════════════╝
│
▼
□ report
"""


DOUNTIL = """\
workflow refine
│
▼
╔═ do … until True (max 3) ═╗
║ □ draft                   ║
╚═══════════════════════════╝
"""


MARKERS = """\
workflow timed
│
▼
□ start
│
▼
ƒ map
│
▼
◷ sleep 5 s
│
▼
◷ sleep until 2030-01-01 09:30:00
│
▼
ƒ map count
"""


NESTED_EXPANDED = """\
workflow outer
│
▼
□ prepare
│
▼
┌─ ▾ workflow inner (3 steps) ─┐
│ □ x                          │
│ │                            │
│ ▼                            │
│ ┏━ parallel (2 lanes) ━┓     │
│ ┃ ╭──────╮ ╭──────╮    ┃     │
│ ┃ │ □ y1 │ │ □ y2 │    ┃     │
│ ┃ ╰──────╯ ╰──────╯    ┃     │
│ ┗━━━━━━━━━━━━━━━━━━━━━━┛     │
└──────────────────────────────┘
│
▼
□ finish
"""


NESTED_COLLAPSED = """\
workflow outer
│
▼
□ prepare
│
▼
▸ workflow inner (3 steps)
│
▼
□ finish
"""


DEEP_DEPTH_1 = """\
workflow deep
│
▼
┌─ ▾ workflow middle (2 steps) ─┐
│ □ y                           │
│ │                             │
│ ▼                             │
│ ▸ workflow innermost (1 step) │
└───────────────────────────────┘
│
▼
□ done
"""


DEEP_DEPTH_2 = """\
workflow deep
│
▼
┌─ ▾ workflow middle (2 steps) ───────┐
│ □ y                                 │
│ │                                   │
│ ▼                                   │
│ ┌─ ▾ workflow innermost (1 step) ─┐ │
│ │ □ z                             │ │
│ └─────────────────────────────────┘ │
└─────────────────────────────────────┘
│
▼
□ done
"""


PROCESSORS = """\
workflow moderation
│
▼
◆ processor:lowercase  [input]
│
▼
┏━ parallel (2 lanes) ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┓
┃ ╭─────────────────────────────────────────────────────────────────╮ ┃
┃ │ ◆ processor:pii-detector  [input, output_stream, output_result] │ ┃
┃ ╰─────────────────────────────────────────────────────────────────╯ ┃
┃ ╭────────────────────────────────────────────╮                      ┃
┃ │ ◆ processor:prompt-injection  [input_step] │                      ┃
┃ ╰────────────────────────────────────────────╯                      ┃
┗━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┛
│
▼
ƒ map merge
"""


AGENT_LOOP = """\
workflow agent:support  loop of agent support
│
▼
□ input-processors
│
▼
╔═ do … until finished ═════════════════╗
║ ┌─ ▾ workflow agent-step (4 steps) ─┐ ║
║ │ ╭─ if not stopped ─╮              │ ║
║ │ │ □ input-step     │              │ ║
║ │ ╰──────────────────╯              │ ║
║ │ │                                 │ ║
║ │ ▼                                 │ ║
║ │ ╭─ if not stopped, no retry ─╮    │ ║
║ │ │ □ llm-call                 │    │ ║
║ │ ╰────────────────────────────╯    │ ║
║ │ │                                 │ ║
║ │ ▼                                 │ ║
║ │ ╭─ if not stopped, no retry ─╮    │ ║
║ │ │ □ output-step              │    │ ║
║ │ ╰────────────────────────────╯    │ ║
║ │ │                                 │ ║
║ │ ▼                                 │ ║
║ │ ╭─ if tool calls to run ─╮        │ ║
║ │ │ □ tool-calls           │        │ ║
║ │ ╰────────────────────────╯        │ ║
║ └───────────────────────────────────┘ ║
╚═══════════════════════════════════════╝
│
▼
╭─ if no tripwire ────╮
│ □ output-processors │
╰─────────────────────╯
│
▼
ƒ map outcome
"""


NESTED_STATES = """\
workflow outer
│
▼
● □ prepare  12 ms
│
▼
┌─ ◐ ▾ workflow inner (3 steps)  1.50 s ──────────────────────────────────────────┐
│ ● □ x  0.4 ms · retry 2                                                         │
│ │                                                                               │
│ ▼                                                                               │
│ ┏━ parallel (2 lanes) ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┓ │
│ ┃ ╭────────────────────────────────────────╮ ╭──────────────────────────────╮ ┃ │
│ ┃ │ ✖ □ y1  200 ms · ValueError: bad input │ │ ⏸ □ y2  waiting for approval │ ┃ │
│ ┃ ╰────────────────────────────────────────╯ ╰──────────────────────────────╯ ┃ │
│ ┗━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┛ │
└─────────────────────────────────────────────────────────────────────────────────┘
│
▼
○ □ finish
"""


BRANCH_STATES = """\
workflow triage
│
▼
● □ classify  1m 15s
│
▼
┏━ branch (2 lanes) ━━━━━━━━━━━━━━━━━━━━━┓
┃ ╭─ if is_urgent ─╮ ╭─ if True ───────╮ ┃
┃ │ ⊘ □ escalate   │ │ ■ □ reply  3 ms │ ┃
┃ ╰────────────────╯ ╰─────────────────╯ ┃
┗━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┛
"""


NESTED_MERMAID = """\
flowchart TD
    n0(["start"])
    n1["prepare"]
    subgraph w0["workflow inner"]
        n2["x"]
        subgraph g0["parallel"]
            n3["y1"]
            n4["y2"]
        end
    end
    n5["finish"]
    n6(["end"])
    n0 --> n1
    n1 --> w0
    n2 --> n3
    n2 --> n4
    n3 --> n5
    n4 --> n5
    n5 --> n6
"""


NESTED_MERMAID_DEPTH_0 = """\
flowchart TD
    n0(["start"])
    n1["prepare"]
    n2["workflow inner (3 steps)"]
    n3["finish"]
    n4(["end"])
    n0 --> n1
    n1 --> n2
    n2 --> n3
    n3 --> n4
"""


NESTED_DOT = """\
digraph "outer" {
    rankdir=TB;
    node [shape=box, fontname="Helvetica"];
    "__start__" [label="start", shape=oval];
    "prepare" [label="prepare"];
    subgraph "cluster_inner" {
        label="workflow inner";
        "inner" [label="inner", shape=folder];
        "inner.x" [label="x"];
        "inner.y1" [label="y1"];
        "inner.y2" [label="y2"];
    }
    "finish" [label="finish"];
    "__end__" [label="end", shape=oval];
    "__start__" -> "prepare";
    "prepare" -> "inner";
    "inner" -> "inner.x";
    "inner.x" -> "inner.y1";
    "inner.x" -> "inner.y2";
    "inner.y1" -> "finish";
    "inner.y2" -> "finish";
    "finish" -> "__end__";
}
"""


BRANCH_LOOP_MERMAID = """\
flowchart TD
    n0(["start"])
    subgraph g0["branch"]
        n1["page"]
        n2["log"]
    end
    n3[/"map: pick"/]
    subgraph w0["do … until: workflow attempt"]
        n4["call"]
        n5["check"]
    end
    n6(["end"])
    n0 -.->|"if is_urgent"| n1
    n0 -.->|"if keep_going"| n2
    n1 --> n3
    n2 --> n3
    n3 --> w0
    n4 --> n5
    n5 --> n6
    n5 -. until .-> w0
"""


BRANCH_LOOP_DOT = """\
digraph "retrying" {
    rankdir=TB;
    node [shape=box, fontname="Helvetica"];
    "__start__" [label="start", shape=oval];
    "page" [label="page"];
    "log" [label="log"];
    "pick" [label="map: pick", shape=parallelogram];
    subgraph "cluster_attempt" {
        label="do … until: workflow attempt";
        "attempt" [label="attempt", shape=folder];
        "attempt.call" [label="call"];
        "attempt.check" [label="check"];
    }
    "__end__" [label="end", shape=oval];
    "__start__" -> "page" [style=dashed, label="if is_urgent"];
    "__start__" -> "log" [style=dashed, label="if keep_going"];
    "page" -> "pick";
    "log" -> "pick";
    "pick" -> "attempt";
    "attempt" -> "attempt.call";
    "attempt.call" -> "attempt.check";
    "attempt.check" -> "__end__";
    "attempt.check" -> "attempt" [style=dashed, label="until", constraint=false];
}
"""


MARKERS_STATES = """\
workflow timed
│
▼
● □ start  2 ms
│
▼
  ƒ map
│
▼
◐ ◷ sleep 5 s  2.00 s
│
▼
○ ◷ sleep until 2030-01-01 09:30:00
│
▼
  ƒ map count
"""

SHAPES = [
    pytest.param(linear, 1, LINEAR, id="linear"),
    pytest.param(parallel, 1, PARALLEL, id="parallel"),
    pytest.param(branch, 1, BRANCH, id="branch"),
    pytest.param(foreach, 1, FOREACH, id="foreach"),
    pytest.param(dowhile, 1, DOWHILE, id="loop-dowhile"),
    pytest.param(dountil, 1, DOUNTIL, id="loop-dountil"),
    pytest.param(markers, 1, MARKERS, id="map-and-sleeps"),
    pytest.param(nested, 1, NESTED_EXPANDED, id="nested-depth-1-expanded"),
    pytest.param(nested, 0, NESTED_COLLAPSED, id="nested-depth-0-collapsed"),
    pytest.param(deep, 1, DEEP_DEPTH_1, id="two-levels-depth-1"),
    pytest.param(deep, 2, DEEP_DEPTH_2, id="two-levels-depth-2"),
    pytest.param(processors, 1, PROCESSORS, id="processor-workflow"),
    pytest.param(agent_loop, 1, AGENT_LOOP, id="agent-loop"),
]


@pytest.mark.parametrize(("build", "depth", "expected"), SHAPES)
def test_graph_view_draws_shape(build: Callable[[], Workflow], depth: int,
                                expected: str) -> None:
    assert render(GraphView(build(), depth=depth)) == expected


def test_graph_view_takes_an_agent() -> None:
    agent = Agent(id="support", model=ScriptedModel(["hi"]))
    assert render(GraphView(agent)) == AGENT_LOOP


def test_graph_view_rejects_other_targets() -> None:
    with pytest.raises(TypeError, match="expected a Workflow or an Agent, got str"):
        GraphView("not a workflow")  # type: ignore[arg-type]


def test_states_show_symbols_times_retries_and_details() -> None:
    states = {"prepare": NodeState("success", 0.012), "inner": NodeState("running", 1.5),
              "inner.x": NodeState("success", 0.0004, retries=2),
              "inner.y1": NodeState("failed", 0.2, detail="ValueError: bad input"),
              "inner.y2": NodeState("suspended", detail="waiting for approval")}
    assert render(GraphView(nested(), states=states)) == NESTED_STATES


def test_states_show_skipped_and_canceled() -> None:
    states = {"classify": NodeState("success", 75.0), "escalate": NodeState("skipped"),
              "reply": NodeState("canceled", 0.0031)}
    assert render(GraphView(branch(), states=states)) == BRANCH_STATES


def test_states_leave_maps_blank_unless_given() -> None:
    states = {"start": NodeState("success", 0.002), "sleep-2": NodeState("running", 2.0)}
    assert render(GraphView(markers(), states=states)) == MARKERS_STATES

def test_status_does_not_depend_on_colour() -> None:
    states = {"fetch": NodeState("success"), "parse": NodeState("failed")}
    text = render(GraphView(linear(), states=states))
    assert "● □ fetch" in text
    assert "✖ □ parse" in text
    assert "○ □ store" in text


def test_mermaid_nested_parallel() -> None:
    assert to_mermaid(nested()) == NESTED_MERMAID


def test_mermaid_depth_0_collapses_nested_workflows() -> None:
    assert to_mermaid(nested(), depth=0) == NESTED_MERMAID_DEPTH_0


def test_mermaid_branch_and_loop_over_a_nested_workflow() -> None:
    assert to_mermaid(branch_loop()) == BRANCH_LOOP_MERMAID


def test_dot_nested_parallel() -> None:
    assert to_dot(nested()) == NESTED_DOT


def test_dot_branch_and_loop_over_a_nested_workflow() -> None:
    assert to_dot(branch_loop()) == BRANCH_LOOP_DOT


def test_mermaid_of_the_agent_loop_shows_every_step() -> None:
    text = to_mermaid(Agent(id="support", model=ScriptedModel(["hi"])))
    for step_id in ("input-processors", "input-step", "llm-call", "output-step",
                    "tool-calls", "output-processors"):
        assert f'["{step_id}"]' in text
    assert 'subgraph w0["do … until: workflow agent-step"]' in text
    assert "-. until .-> w0" in text


def test_exports_are_deterministic() -> None:
    assert to_mermaid(agent_loop()) == to_mermaid(agent_loop())
    assert to_dot(processors()) == to_dot(processors())


def test_conditions_are_named_by_function_label_or_lambda_source() -> None:
    def is_big(ctx: Any) -> bool:
        return bool(ctx.input_data > 3)

    def s(name: str) -> Step:
        return create_step(id=name, execute=lambda ctx: ctx.input_data)

    wf = (create_workflow(id="conds")
          .branch([(is_big, s("big")), (lambda ctx: ctx.input_data <= 3, s("small"))])
          .branch([(lambda ctx: True, s("x")), (lambda ctx: False, s("y"))],
                  label=["always", None])
          .dountil(s("again"), lambda ctx: ctx.input_data > 10, label="past ten")
          .commit())
    text = render(GraphView(wf), width=140)
    assert "if is_big" in text
    assert "if ctx.input_data <= 3" in text
    assert "if always" in text and "if False" in text
    assert "do … until past ten" in text


def test_branch_labels_must_match_the_branches() -> None:
    from procflow.errors import WorkflowDefinitionError

    step = create_step(id="a", execute=lambda ctx: 1)
    with pytest.raises(WorkflowDefinitionError, match=r"one string .* per branch, 1 in all"):
        create_workflow(id="w").branch([(lambda ctx: True, step)], label=["a", "b"])
    with pytest.raises(WorkflowDefinitionError, match="label= must be a string"):
        create_workflow(id="w").dountil(step, lambda ctx: True, label=3)  # type: ignore[arg-type]


@pytest.mark.parametrize(("build", "last"), [
    pytest.param(lambda wf: wf.branch([(lambda ctx: ctx.input_data > 3, s("big"))],
                                      label=["more than three"])
                 .map(lambda ctx: ctx.input_data, id="unwrap"), "ƒ map unwrap", id="branch"),
    pytest.param(lambda wf: wf.when(lambda ctx: ctx.input_data > 3, s("big"),
                                    label="more than three").then(s("after")), "□ after",
                 id="when"),
])
def test_a_one_arm_branch_or_when_is_one_if_box_and_user_maps_stay(
        build: Callable[[Workflow], Workflow], last: str) -> None:
    wf = build(create_workflow(id="gate")).commit()
    assert render(GraphView(wf)) == (
        "workflow gate\n│\n▼\n"
        "╭─ if more than three ─╮\n"
        "│ □ big                │\n"
        "╰──────────────────────╯\n"
        "│\n▼\n"
        f"{last}\n")
    assert '-.->|"if more than three"|' in to_mermaid(wf)


def test_the_agent_loop_draws_its_gates_as_one_if_box_each() -> None:
    agent = Agent(id="support", model=ScriptedModel(["hi"]))
    text = render(GraphView(agent))
    assert "map" not in text.replace("map outcome", "") and "branch (1 lane)" not in text
    for condition in ("if not stopped", "if not stopped, no retry", "if tool calls to run",
                      "if no tripwire"):
        assert condition in text
    # the exports name each condition on the edge into its step
    mermaid = to_mermaid(agent)
    assert "map: outcome" in mermaid and mermaid.count("map:") == 1
    assert '-.->|"if tool calls to run"|' in mermaid
    assert 'label="if no tripwire"' in to_dot(agent)


def test_exports_name_branch_conditions_on_their_edges() -> None:
    wf = (create_workflow(id="w")
          .branch([(lambda ctx: True, s("a")), (lambda ctx: False, s("b"))],
                  label=['say "yes"', None])
          .commit())
    assert '-.->|"if say #quot;yes#quot;"| ' in to_mermaid(wf)
    assert r'[style=dashed, label="if say \"yes\""]' in to_dot(wf)
    assert '"if False"' in to_mermaid(wf)
