"""OpenTelemetry export: a finished run's spans reach the SDK's in-memory exporter with
their times, parents and GenAI attributes; nothing happens when not instrumented."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import procflow
import procflow.otel
from procflow import Agent, create_step, create_workflow, tool
from procflow.errors import APICallError
from procflow.messages import Chunk, Finish, TextDelta
from procflow.models import ScriptedModel, ToolCall
from procflow.records import Usage
from procflow.runtime.tracing import finished_trace_hooks
from procflow.storage.memory import InMemoryStorage


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    procflow.instrument(tracer_provider=provider)
    try:
        yield memory
    finally:
        procflow.uninstrument()


def flow() -> procflow.Workflow:
    def boom(ctx: procflow.StepContext) -> None:
        if ctx.input_data == "fail":
            raise ValueError("no good")
    return (create_workflow(id="otel-flow")
            .then(create_step(id="first", execute=lambda ctx: ctx.input_data))
            .parallel([create_step(id="left", execute=lambda ctx: 1),
                       create_step(id="right", execute=boom)])
            .commit())


async def test_a_run_becomes_a_tree_of_spans(exporter: InMemorySpanExporter) -> None:
    run = flow().create_run(storage=InMemoryStorage())
    await run.start(input_data="ok")
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert {"run: otel-flow", "first", "parallel", "left", "right"} <= set(spans)
    root = spans["run: otel-flow"]
    assert root.parent is None
    assert spans["first"].parent is not None
    assert spans["first"].parent.span_id == root.context.span_id
    assert spans["left"].parent is not None
    assert spans["left"].parent.span_id == spans["parallel"].context.span_id
    assert len({s.context.trace_id for s in spans.values()}) == 1
    for span in spans.values():
        assert span.start_time is not None and span.end_time is not None
        assert root.start_time is not None and root.end_time is not None
        assert root.start_time <= span.start_time <= span.end_time <= root.end_time
    assert spans["first"].attributes is not None
    assert spans["first"].attributes["procflow.run_id"] == run.run_id
    assert spans["first"].attributes["procflow.step.path"] == "first"


async def test_a_failed_step_is_an_error_span(exporter: InMemorySpanExporter) -> None:
    await flow().create_run(storage=InMemoryStorage()).start(input_data="fail")
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert spans["right"].status.status_code is StatusCode.ERROR
    assert "no good" in (spans["right"].status.description or "")
    assert spans["left"].status.status_code is StatusCode.OK


async def test_model_and_tool_calls_carry_genai_attributes(
        exporter: InMemorySpanExporter) -> None:
    @tool
    async def lookup(order_id: str) -> dict[str, str]:
        """Look up an order."""
        return {"status": "shipped"}

    model = ScriptedModel([[ToolCall("lookup", {"order_id": "A-1"})], "It shipped."])
    agent = Agent(id="otel-agent", model=model, tools=[lookup])
    await agent.generate("Where is A-1?")
    spans = exporter.get_finished_spans()
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(chats) == 2
    attributes = chats[-1].attributes or {}
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.request.model"]
    assert isinstance(attributes["gen_ai.usage.input_tokens"], int)
    assert isinstance(attributes["gen_ai.usage.output_tokens"], int)
    reasons = {tuple((c.attributes or {})["gen_ai.response.finish_reasons"]) for c in chats}
    assert reasons == {("tool-calls",), ("stop",)}
    tools = [s for s in spans if s.name == "execute_tool lookup"]
    assert tools and (tools[0].attributes or {})["gen_ai.tool.name"] == "lookup"


async def test_nothing_is_exported_unless_instrumented() -> None:
    memory = InMemorySpanExporter()
    assert not procflow.otel.is_instrumented() and finished_trace_hooks == []
    await flow().create_run(storage=InMemoryStorage()).start(input_data="ok")
    assert memory.get_finished_spans() == ()


async def test_an_exporter_failure_never_fails_the_run(caplog: pytest.LogCaptureFixture,
                                                       ) -> None:
    def broken(record: object) -> None:
        raise RuntimeError("collector down")

    finished_trace_hooks.append(broken)
    try:
        result = await flow().create_run(storage=InMemoryStorage()).start(input_data="ok")
    finally:
        finished_trace_hooks.remove(broken)
    assert result.status == "success"
    assert "trace hook" in caplog.text


ENV_SCRIPT = '''
import anyio
import procflow
import procflow.otel
from procflow import create_step, create_workflow
from procflow.storage.memory import InMemoryStorage

wf = create_workflow(id="envflow").then(create_step(id="only", execute=lambda c: 1)).commit()
anyio.run(wf.create_run(storage=InMemoryStorage()).start, 1)
print("ran", procflow.otel.is_instrumented())
'''


def run_with_env(tmp_path: Any, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PROCFLOW_"))}
    script = tmp_path / "envflow.py"
    script.write_text(ENV_SCRIPT)
    return subprocess.run([sys.executable, str(script)], env={**base, **env}, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=False)


def test_procflow_otel_exports_to_the_console_exporter_the_env_names(tmp_path: Any) -> None:
    done = run_with_env(tmp_path, PROCFLOW_OTEL="1", OTEL_TRACES_EXPORTER="console",
                        OTEL_SERVICE_NAME="env-demo")
    assert done.stdout.strip() == "ran True"
    assert '"name": "run: envflow"' in done.stderr and '"name": "only"' in done.stderr
    assert '"service.name": "env-demo"' in done.stderr


@pytest.mark.parametrize(("env", "reason"), [
    pytest.param({"OTEL_TRACES_EXPORTER": "otlp"}, "the OTLP exporter is not installed",
                 id="otlp-missing"),
    pytest.param({"OTEL_TRACES_EXPORTER": "none"}, "exporting is turned off", id="none"),
    pytest.param({"OTEL_TRACES_EXPORTER": "zipkin"}, "unknown exporter", id="unknown"),
])
def test_procflow_otel_says_why_nothing_is_exported(tmp_path: Any, env: dict[str, str],
                                                    reason: str) -> None:
    if env.get("OTEL_TRACES_EXPORTER") == "otlp":
        try:
            import opentelemetry.exporter.otlp  # noqa: F401
            pytest.skip("the OTLP exporter is installed")
        except ImportError:
            pass
    done = run_with_env(tmp_path, PROCFLOW_OTEL="1", **env)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("procflow: PROCFLOW_OTEL=1")
    assert reason in done.stderr


class PricedModel:
    """A model whose calls report a cost, as hosted models do."""

    provider = "acme"
    model_id = "m1"

    async def stream(self, request: object) -> AsyncIterator[Chunk]:
        yield TextDelta("cheap")
        yield Finish("stop", Usage(10, 2, 12, cached_input_tokens=4, cost=0.003))


async def test_a_fallback_call_names_the_answering_model_and_its_cost(
        exporter: InMemorySpanExporter) -> None:
    down = ScriptedModel([APICallError("down", status_code=503)], model_id="down")
    await Agent(id="otel-fallback", model=[down, PricedModel()]).generate("hi")
    [chat] = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    attributes = chat.attributes or {}
    assert attributes["gen_ai.response.model"] == "m1"
    assert attributes["gen_ai.usage.input_tokens"] == 10
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == 4
    assert attributes["procflow.usage.cost"] == 0.003
