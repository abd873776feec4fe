"""TraceView and TraceDiff: exact text for hand-made traces, behaviour on real runs."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from procflow import StepContext, create_step, create_workflow, set_default_storage
from procflow.agent import Agent, tool
from procflow.models import ScriptedModel, ToolCall
from procflow.processors import Processor
from procflow.runtime.tracing import TraceRecord
from procflow.storage import InMemoryStorage
from procflow.studio import TraceDiff, TraceView


def render(renderable: Any, width: int = 100) -> str:
    console = Console(width=width, color_system=None, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def span(span_id: str, parent: str | None, name: str, kind: str, start_ms: float,
         end_ms: float | None, status: str = "success", *, path: str | None = None,
         input: Any = None, output: Any = None, error: str | None = None,
         **attributes: Any) -> dict[str, Any]:
    """A span row, times in ms from 0; a step's path defaults to its name."""
    if path is None and kind == "step":
        path = name
    return {"span_id": span_id, "parent_id": parent, "name": name, "kind": kind,
            "path": path, "start": start_ms / 1000,
            "end": None if end_ms is None else end_ms / 1000, "status": status,
            "input": input, "output": output, "error": error, "attributes": attributes}


def record(run_id: str, workflow_id: str, status: str, spans: list[dict[str, Any]],
           ) -> TraceRecord:
    return TraceRecord(run_id, workflow_id, status, spans[0]["start"], spans[0]["end"], spans)


# ---------------------------------------------------------------- the catalogue


def linear(run_id: str = "run-1") -> TraceRecord:
    return record(run_id, "linear", "success", [
        span("1", None, "run: linear", "run", 0, 40, input={"url": "https://example.com"},
             output={"rows": 3}),
        span("2", "1", "fetch", "step", 0, 10, input={"url": "https://example.com"},
             output={"truncated": True, "chars": 5012, "preview": '{"body": "<html><head>'}),
        span("3", "1", "parse", "step", 10, 25, input="<html>", output=[1, 2, 3]),
        span("4", "1", "store", "step", 25, 40, input=[1, 2, 3], output={"rows": 3}),
    ])


def fan_out() -> TraceRecord:
    return record("run-2", "fan-out", "success", [
        span("1", None, "run: fan-out", "run", 0, 60),
        span("2", "1", "fetch", "step", 0, 10),
        span("3", "1", "parallel", "parallel", 10, 30, path="parallel", branches=2),
        span("4", "3", "summarise", "step", 10, 30),
        span("5", "3", "translate", "step", 10, 20),
        span("6", "1", "each", "foreach", 30, 60, items=3, concurrency=2),
        span("7", "6", "each", "step", 30, 40, path="each[0]"),
        span("8", "6", "each", "step", 30, 45, path="each[1]"),
        span("9", "6", "each", "step", 40, 60, path="each[2]"),
    ])


def agent_like() -> TraceRecord:
    return record("run-3", "agent:support", "success", [
        span("1", None, "run: agent:support", "run", 0, 120),
        span("2", "1", "input-processors", "step", 0, 6),
        span("3", "2", "input processor: pii-detector", "processor", 1, 5),
        span("4", "1", "agent-step", "loop", 6, 110, path="agent-step", mode="dountil",
             iterations=2),
        span("5", "4", "agent-step", "workflow", 6, 60, path="agent-step"),
        span("6", "5", "llm-call", "step", 7, 45, path="agent-step.llm-call"),
        span("7", "6", "model call: openai/gpt-4o", "model", 8, 40,
             usage={"input_tokens": 12, "output_tokens": 40}, chunks=18),
        span("8", "6", "output stream processor: pii-detector", "processor", 9, 41, chunks=18),
        span("9", "5", "tool-calls", "step", 45, 60, path="agent-step.tool-calls"),
        span("10", "9", "tool call: lookup", "tool", 46, 58, input={"order_id": "1"},
             output="shipped"),
        span("11", "4", "agent-step", "workflow", 60, 110, path="agent-step"),
        span("12", "11", "llm-call", "step", 61, 108, path="agent-step.llm-call"),
        span("13", "12", "model call: openai/gpt-4o", "model", 62, 62.5,
             usage={"input_tokens": 60, "output_tokens": 9}, from_cache=True),
        span("14", "1", "output-processors", "step", 110, 116),
        span("15", "1", "memory-save", "step", 116, 120),
    ])


def tripwire() -> TraceRecord:
    trip = {"reason": "contains an email address", "processor_id": "pii-detector",
            "retry": False, "metadata": {"matches": 1}}
    return record("run-4", "agent:guarded", "tripwire", [
        # as a real run records it: the run and each span on the way carry the tripwire
        span("1", None, "run: agent:guarded", "run", 0, 8, "tripwire", tripwire=trip),
        span("2", "1", "input-processors", "step", 0, 4, "tripwire", tripwire=trip),
        span("3", "2", "input processor: pii-detector", "processor", 1, 4, "tripwire",
             error="contains an email address", tripwire=trip),
        span("4", "1", "agent-step", "loop", 4, 8, "skipped", path="agent-step"),
    ])


ETL_ERROR = ("StepExecutionError: workflow 'etl', step 'parse' failed after 2 attempts: "
             "ValueError: bad row 7")


def failed() -> TraceRecord:
    return record("run-5", "etl", "failed", [
        span("1", None, "run: etl", "run", 0, 100, "failed", error=ETL_ERROR),
        span("2", "1", "fetch", "step", 0, 50, attempts=3, output="<html>"),
        span("3", "1", "parse", "step", 50, 100, "failed", input="<html>", error=ETL_ERROR,
             attempts=2),
    ])


LINEAR = """\
workflow linear  run run-1  ● success  40 ms  4 spans
                        0                                                      40 ms
● run: linear    40 ms  ████████████████████████████████████████████████████████████
├─ ● fetch       10 ms  ███████████████
├─ ● parse       15 ms                 ██████████████████████▌
└─ ● store       15 ms                                       ▐██████████████████████
"""

FAN_OUT = """\
workflow fan-out  run run-2  ● success  60 ms  9 spans
                                       0                                                      60 ms
● run: fan-out                  60 ms  ████████████████████████████████████████████████████████████
├─ ● fetch                      10 ms  ██████████
├─ ● parallel                   20 ms            ████████████████████
│  ├─ ● summarise               20 ms            ████████████████████
│  └─ ● translate               10 ms            ██████████
└─ ● each [foreach]  3 items    30 ms                                ██████████████████████████████
   ├─ ● each[0]                 10 ms                                ██████████
   ├─ ● each[1]                 15 ms                                ███████████████
   └─ ● each[2]                 20 ms                                          ████████████████████
"""

AGENT_LIKE = """\
workflow agent:support  run run-3  ● success  120 ms  15 spans
● run: agent:support                                                                          120 ms
├─ ● input-processors                                                                           6 ms
│  └─ ● input processor: pii-detector [processor]                                               4 ms
├─ ● agent-step [loop]  2 iterations                                                          104 ms
│  ├─ ● agent-step [workflow]                                                                  54 ms
│  │  ├─ ● llm-call                                                                            38 ms
│  │  │  ├─ ● model call: openai/gpt-4o [model]  in 12 / out 40 tok · 18 chunks                32 ms
│  │  │  └─ ● output stream processor: pii-detector [processor]  18 chunks                     32 ms
│  │  └─ ● tool-calls                                                                          15 ms
│  │     └─ ● tool call: lookup [tool]                                                         12 ms
│  └─ ● agent-step [workflow]                                                                  50 ms
│     └─ ● llm-call                                                                            47 ms
│        └─ ● model call: openai/gpt-4o [model]  cached · in 60 / out 9 tok                   0.5 ms
├─ ● output-processors                                                                          6 ms
└─ ● memory-save                                                                                4 ms
"""

TRIPWIRE = """\
workflow agent:guarded  run run-4  ⚡ tripwire  8 ms  4 spans
                                                             0                                  8 ms
⚡ run: agent:guarded                                  8 ms  ███████████████████████████████████████
│ ⚡ tripwire: contains an email address (processor pii-detector)
├─ ⚡ input-processors                                 4 ms  ███████████████████▌
│  └─ ⚡ input processor: pii-detector [processor]     3 ms      ▐██████████████▌
│       ⚡ tripwire: contains an email address (processor pii-detector)
└─ ⊘ agent-step [loop]                                 4 ms                     ▐███████████████████
"""

FAILED = """\
workflow etl  run run-5  ✖ failed  100 ms  3 spans
                              0                                                     100 ms
✖ run: etl            100 ms  ████████████████████████████████████████████████████████████
├─ ● fetch  retry 2    50 ms  ██████████████████████████████
└─ ✖ parse  retry 1    50 ms                                ██████████████████████████████
     ✖ StepExecutionError: workflow 'etl', step 'parse' failed after 2 attempts: ValueError: bad row
       7
"""


@pytest.mark.parametrize(("build", "expected"), [
    pytest.param(linear, LINEAR, id="linear"),
    pytest.param(fan_out, FAN_OUT, id="parallel-and-foreach"),
    pytest.param(agent_like, AGENT_LIKE, id="agent-processors-model-tool"),
    pytest.param(tripwire, TRIPWIRE, id="tripwire"),
    pytest.param(failed, FAILED, id="failed-with-retries"),
])
def test_trace_view_catalogue(build: Any, expected: str) -> None:
    assert render(TraceView(build())) == expected


STEP_DETAIL = """\
workflow etl  run run-5  ✖ failed  100 ms  3 spans
                              0                                                     100 ms
✖ run: etl            100 ms  ████████████████████████████████████████████████████████████
├─ ● fetch  retry 2    50 ms  ██████████████████████████████
└─ ✖ parse  retry 1    50 ms                                ██████████████████████████████
     ✖ StepExecutionError: workflow 'etl', step 'parse' failed after 2 attempts: ValueError: bad row
       7

╭─ ✖ parse ────────────────────────────────────────────────────────────────────────────────────────╮
│ status      ✖ failed                                                                             │
│ path        parse                                                                                │
│ span        3 (parent 1)                                                                         │
│ time        +50 ms, took 50 ms                                                                   │
│ error       StepExecutionError: workflow 'etl', step 'parse' failed after 2 attempts:            │
│             ValueError: bad row 7                                                                │
│ input       "<html>"                                                                             │
│ output      null                                                                                 │
│ attributes  {                                                                                    │
│               "attempts": 2                                                                      │
│             }                                                                                    │
╰──────────────────────────────────────────────────────────────────────────────────────────────────╯
"""


def test_step_detail_shows_input_output_error_and_attributes() -> None:
    assert render(TraceView(failed(), step="parse")) == STEP_DETAIL


def test_step_detail_of_a_truncated_value_shows_its_preview_and_size() -> None:
    text = render(TraceView(linear(), step="fetch"))
    assert '│ output      {"body": "<html><head>' in text
    assert "(truncated, 5012 chars)" in text
    assert '"url": "https://example.com"' in text


def test_step_matches_every_occurrence_by_name_or_path() -> None:
    text = render(TraceView(agent_like(), step="agent-step.llm-call"))
    assert text.count("╭─ ● llm-call") == 2


def test_unknown_step_lists_what_exists() -> None:
    with pytest.raises(ValueError, match=r"'nope' in run run-1; available: fetch, parse, "
                                         r"store, run: linear$"):
        TraceView(linear(), step="nope")


def test_long_traces_can_be_cut_and_say_so() -> None:
    text = render(TraceView(agent_like(), max_spans=3))
    assert text.splitlines()[-1] == "… 12 more spans (max_spans=3)"
    shallow = render(TraceView(agent_like(), max_depth=1))
    assert "agent-step [loop]  2 iterations · +9 nested spans" in shallow
    assert "llm-call" not in shallow


def test_narrow_console_drops_the_waterfall() -> None:
    text = render(TraceView(linear()), width=36)
    assert "█" not in text
    assert "├─ ● fetch" in text and max(len(line) for line in text.splitlines()) <= 36


@pytest.mark.parametrize("width", [80, 200])
def test_columns_fit_their_content(width: int) -> None:
    """Names are never cut nor padded far beyond the longest one; the waterfall takes
    what is left (at most 60 cells) or goes, before a name would be cut."""
    text = render(TraceView(agent_like()), width=width)
    assert "output stream processor: pii-detector [processor]" in text
    assert "…" not in text
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width
    run_line = next(line for line in lines if "run: agent:support" in line)
    gap = run_line.split("run: agent:support", 1)[1]
    longest = max(len(line.split(" ms")[0]) for line in lines if " ms" in line)
    assert len(run_line.split(" ms")[0]) <= longest
    assert ("█" in run_line) == (width >= 100)
    assert gap.startswith(" ")


def test_orphans_and_open_spans_are_drawn() -> None:
    trace = record("run-6", "w", "running", [
        span("1", None, "run: w", "run", 0, None, "running"),
        span("2", "gone", "lost", "step", 5, 10),
    ])
    text = render(TraceView(trace))
    assert "◐ run: w" in text and "running  ░" in text and "\n● lost" in text


# ---------------------------------------------------------------- diffs


def variant(edit: Any) -> TraceRecord:
    rows = [dict(row) for row in linear("run-b").spans]
    edit(rows)
    return record("run-b", "linear", rows[0]["status"], rows)


def output_differs(rows: list[dict[str, Any]]) -> None:
    rows[2].update(output=[1, 2], end=0.030)
    rows[3].update(input=[1, 2], start=0.030, output={"rows": 2})
    rows[0].update(output={"rows": 2})


def status_differs(rows: list[dict[str, Any]]) -> None:
    for row in (rows[3], rows[0]):
        row.update(status="failed", error="ConnectionError: db down", output=None)


def extra_span(rows: list[dict[str, Any]]) -> None:
    rows.append(span("5", "1", "notify", "step", 40, 45))
    rows[0]["end"] = 0.045


DIFF_SAME = """\
diff of workflow linear
  A  run run-a  ● success  40 ms  4 spans
  B  run run-b  ● success  40 ms  4 spans
no divergence: every span matches in status, input, output and error
4 spans: 4 same, 0 differ, 0 only in A, 0 only in B
     span                  A           B           Δ B−A
  =  run: linear  ●    40 ms  ●    40 ms              ±0
  =    fetch      ●    10 ms  ●    10 ms              ±0
  =    parse      ●    15 ms  ●    15 ms              ±0
  =    store      ●    15 ms  ●    15 ms              ±0
"""

DIFF_OUTPUT = """\
diff of workflow linear
  A  run run-a  ● success  40 ms  4 spans
  B  run run-b  ● success  40 ms  4 spans
first divergence: step 'parse' — output differs
4 spans: 1 same, 3 differ, 0 only in A, 0 only in B
                   span                  A           B           Δ B−A
  ≠ output         run: linear  ●    40 ms  ●    40 ms              ±0
  =                  fetch      ●    10 ms  ●    10 ms              ±0
▶ ≠ output           parse      ●    15 ms  ●    20 ms      +5 ms ×1.3
  ≠ input, output    store      ●    15 ms  ●    10 ms      -5 ms ×0.7
"""

DIFF_STATUS = """\
diff of workflow linear
  A  run run-a  ● success  40 ms  4 spans
  B  run run-b  ✖ failed  40 ms  4 spans
first divergence: step 'store' — status differs (success → failed: ConnectionError: db down)
4 spans: 2 same, 2 differ, 0 only in A, 0 only in B
                           span                  A           B           Δ B−A
  ≠ status, output, error  run: linear  ●    40 ms  ✖    40 ms              ±0
  =                          fetch      ●    10 ms  ●    10 ms              ±0
  =                          parse      ●    15 ms  ●    15 ms              ±0
▶ ≠ status, output, error    store      ●    15 ms  ✖    15 ms              ±0
"""

DIFF_EXTRA = """\
diff of workflow linear
  A  run run-a  ● success  40 ms  4 spans
  B  run run-b  ● success  45 ms  5 spans
first divergence: step 'notify' — only in B
5 spans: 4 same, 0 differ, 0 only in A, 1 only in B
             span                  A           B           Δ B−A
  =          run: linear  ●    40 ms  ●    45 ms      +5 ms ×1.1
  =            fetch      ●    10 ms  ●    10 ms              ±0
  =            parse      ●    15 ms  ●    15 ms              ±0
  =            store      ●    15 ms  ●    15 ms              ±0
▶ only in B    notify              —  ●     5 ms
"""


@pytest.mark.parametrize(("b", "expected"), [
    pytest.param(linear("run-b"), DIFF_SAME, id="same"),
    pytest.param(variant(output_differs), DIFF_OUTPUT, id="output-differs-at-parse"),
    pytest.param(variant(status_differs), DIFF_STATUS, id="status-differs-at-store"),
    pytest.param(variant(extra_span), DIFF_EXTRA, id="extra-span-in-b"),
])
def test_trace_diff_catalogue(b: TraceRecord, expected: str) -> None:
    assert render(TraceDiff(linear("run-a"), b)) == expected


def test_a_diff_printed_for_a_pipe_is_as_wide_as_its_content() -> None:
    """Plain output (not a terminal) is 1,000 columns wide so nothing is cut; the span
    column still ends at the longest label instead of padding every row to the edge."""
    text = render(TraceDiff(linear("run-a"), variant(extra_span)), width=1000)
    assert text == DIFF_EXTRA
    assert max(len(line) for line in text.splitlines()) < 100


def test_diff_refuses_different_workflows() -> None:
    with pytest.raises(ValueError, match="cannot diff runs of different workflows: 'linear'"):
        TraceDiff(linear(), fan_out())


def test_diff_points_inside_containers_and_at_loop_iterations() -> None:
    a = agent_like()
    rows = [dict(row) for row in a.spans]
    rows[12]["output"] = "a different answer"  # the second iteration's model call
    rows[11]["output"] = rows[10]["output"] = rows[3]["output"] = "changed"
    diff = TraceDiff(a, record("run-3b", "agent:support", "success", rows))
    assert diff.first_divergence == ("model 'model call: openai/gpt-4o' in agent-step #2 › "
                                     "llm-call — output differs")


def test_diff_changes_only_hides_matching_spans() -> None:
    text = render(TraceDiff(linear("run-a"), variant(output_differs), changes_only=True))
    assert "  fetch" not in text and "… 1 identical span hidden" in text


# ---------------------------------------------------------------- real runs


async def test_real_workflow_trace_renders() -> None:
    storage = InMemoryStorage()
    calls = 0

    def flaky(ctx: StepContext) -> int:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionError("once")
        return 1

    wf = (create_workflow(id="real", storage=storage, retry_delay=0)
          .then(create_step(id="a", execute=lambda c: c.input_data))
          .parallel([create_step(id="b", execute=lambda c: 2),
                     create_step(id="flaky", execute=flaky, retries=1)])
          .map(lambda c: [1, 2, 3])
          .foreach(create_step(id="each", execute=lambda c: c.input_data * 2), concurrency=2)
          .commit())
    run = wf.create_run()
    await run.start(input_data=5)
    trace = await storage.load_trace(run.run_id)
    assert trace is not None
    text = render(TraceView(trace, step="each[1]"))
    assert text.startswith(f"workflow real  run {run.run_id}  ● success  ")
    for part in ("● run: real", "├─ ● a ", "● flaky  retry 1", "each [foreach]  3 items",
                 "● each[2]", "╭─ ● each[1]", "│ input       2", "│ output      4"):
        assert part in text, part


async def test_real_agent_runs_diff_and_tripwire() -> None:
    class Block(Processor):
        id = "block"

        def process_input(self, args: Any) -> None:
            if "secret" in str(args.messages):
                args.abort("no secrets", metadata={"rule": 1})

    @tool
    def lookup(order_id: str) -> str:
        """Find an order."""
        return "shipped"

    storage = InMemoryStorage()
    set_default_storage(storage)
    try:
        runs = []
        for prompt in ("where?", "where?", "a secret"):
            model = ScriptedModel([[ToolCall("lookup", {"order_id": "1"})], "done"])
            agent = Agent(id="support", model=model, tools=[lookup], input_processors=[Block()])
            runs.append(await agent.generate(prompt))
    finally:
        set_default_storage(None)
    first, second, blocked = [await storage.load_trace(out.run_id) for out in runs]
    assert first is not None and second is not None and blocked is not None
    text = render(TraceView(first))
    assert "model call: scripted/scripted [model]" in text and "tool call: lookup [tool]" in text
    assert "in 1 / out 0 tok" in text and "in 1 / out 1 tok" in text
    # run ids and object addresses inside the agent's state do not count as divergence
    assert TraceDiff(first, second).first_divergence is None
    assert "⚡ tripwire: no secrets (processor block)" in render(TraceView(blocked))


def test_a_model_call_that_fell_back_says_which_model_answered() -> None:
    trace = record("run-9", "agent:a", "success", [
        span("1", None, "run: agent:a", "run", 0, 20),
        span("2", "1", "model call: fallback/openai/gpt-x,scripted/scripted", "model", 0, 20,
             answered_by="scripted/scripted",
             fallbacks=[{"model": "openai/gpt-x", "error": "overloaded",
                         "status_code": 503, "retries": 2}]),
    ])
    text = render(TraceView(trace), width=200)
    assert "answered by scripted/scripted after openai/gpt-x (HTTP 503) failed" in text
