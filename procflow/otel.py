"""OpenTelemetry export of procflow's traces (the ``procflow[otel]`` extra).

``instrument()`` (or ``PROCFLOW_OTEL=1`` in the environment when procflow is imported)
registers one hook called when a run's trace is stored; it turns the trace's spans —
run, steps, containers, processor hooks, model and tool calls, each with its own start
and end time — into OpenTelemetry spans sent through the configured
``TracerProvider`` to any exporter (OTLP to Jaeger, Grafana Tempo, Langfuse, Phoenix,
Logfire...). Model and tool calls carry the GenAI semantic-convention attributes
(``gen_ai.request.model``, ``gen_ai.usage.input_tokens``,
``gen_ai.response.finish_reasons``, ``gen_ai.tool.name``...). Nothing runs, and
``opentelemetry`` is not imported, until ``instrument()`` is called.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from procflow._extras import needs
from procflow.runtime.tracing import TraceRecord, finished_trace_hooks

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

__all__ = ["OTEL_ENV", "export_trace", "instrument", "instrument_from_env", "is_instrumented",
           "uninstrument"]

OTEL_ENV = "PROCFLOW_OTEL"
"""Set to 1 to call ``instrument()`` when procflow is imported."""

_SCOPE = "procflow"
_MAX_VALUE = 4000
_state: dict[str, Any] = {}


def instrument(*, tracer_provider: TracerProvider | None = None,
               capture_io: bool = True) -> None:
    """Export every finished run's trace as OpenTelemetry spans.

    Args:
        tracer_provider: Where spans go (default: the global provider, configured
            with ``opentelemetry.trace.set_tracer_provider``).
        capture_io: Add each span's (truncated, secret-masked) input and output as
            ``procflow.input``/``procflow.output`` attributes.

    Raises:
        ImportError: ``opentelemetry-sdk`` is not installed (``pip install
            'procflow[otel]'``).
    """
    with needs("otel", feature="procflow.instrument()"):
        from opentelemetry import trace
    uninstrument()
    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    from procflow._version import __version__

    tracer = provider.get_tracer(_SCOPE, __version__)

    def hook(record: TraceRecord) -> None:
        export_trace(record, tracer, capture_io=capture_io)

    _state["hook"] = hook
    finished_trace_hooks.append(hook)


def instrument_from_env() -> bool:
    """``PROCFLOW_OTEL=1``: instrument, exporting where the standard ``OTEL_*`` variables
    say, or say on stderr (the ``procflow.otel`` logger) why nothing is exported.

    A tracer provider the program set globally is used as it is. Else one is made:
    ``OTEL_TRACES_EXPORTER`` ``otlp`` (the default; needs the
    ``opentelemetry-exporter-otlp`` package, which reads ``OTEL_EXPORTER_OTLP_*``),
    ``console`` (spans as JSON on stderr) or ``none``; ``OTEL_SERVICE_NAME`` and
    ``OTEL_RESOURCE_ATTRIBUTES`` name the service.

    Returns:
        Whether spans are exported somewhere.
    """
    log = logging.getLogger("procflow.otel")
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider as SdkProvider
    except ImportError:
        log.warning("procflow: %s=1 but opentelemetry-sdk is not installed: nothing is exported "
                    "(pip install 'procflow[otel]')", OTEL_ENV)
        return False
    current = trace.get_tracer_provider()
    if isinstance(current, SdkProvider):  # configured by the program: use it as it is
        instrument(tracer_provider=current)
        return True
    names = [n.strip().lower() for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")
             if n.strip()]
    exporters = []
    for name in names:
        exporter, why = _exporter(name)
        if exporter is None:
            log.warning("procflow: %s=1: OTEL_TRACES_EXPORTER=%s: %s", OTEL_ENV, name, why)
        else:
            exporters.append((name, exporter))
    if not names:
        log.warning("procflow: %s=1 but no exporter is configured: nothing is exported (set "
                    "OTEL_TRACES_EXPORTER=otlp with opentelemetry-exporter-otlp installed, "
                    "or OTEL_TRACES_EXPORTER=console)", OTEL_ENV)
    if not exporters:
        return False
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    provider = SdkProvider()
    for name, exporter in exporters:
        provider.add_span_processor(SimpleSpanProcessor(exporter) if name == "console"
                                    else BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    instrument(tracer_provider=provider)
    return True


def _exporter(name: str) -> tuple[Any, str]:
    """The span exporter ``OTEL_TRACES_EXPORTER`` names, or ``None`` and why not."""
    if name == "none":
        return None, "exporting is turned off"
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=sys.stderr), ""
    if name == "otlp":
        protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                                  os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"))
        module = ("opentelemetry.exporter.otlp.proto.grpc.trace_exporter" if protocol == "grpc"
                  else "opentelemetry.exporter.otlp.proto.http.trace_exporter")
        try:
            found = __import__(module, fromlist=["OTLPSpanExporter"])
        except ImportError:
            package = ("opentelemetry-exporter-otlp-proto-grpc" if protocol == "grpc"
                       else "opentelemetry-exporter-otlp-proto-http")
            return None, (f"the OTLP exporter is not installed: nothing is exported (pip "
                          f"install {package}; or OTEL_TRACES_EXPORTER=console)")
        return found.OTLPSpanExporter(), ""
    return None, "unknown exporter (otlp, console or none): it is skipped"


def uninstrument() -> None:
    """Stop exporting (no-op when not instrumented)."""
    hook = _state.pop("hook", None)
    if hook is not None and hook in finished_trace_hooks:
        finished_trace_hooks.remove(hook)


def is_instrumented() -> bool:
    """Whether ``instrument()`` is in effect."""
    return "hook" in _state


def export_trace(record: TraceRecord, tracer: Tracer, *, capture_io: bool = True) -> None:
    """Turn one stored trace into OpenTelemetry spans with their recorded times.

    Args:
        record: The trace.
        tracer: The OpenTelemetry tracer spans are made with.
        capture_io: Add inputs and outputs as attributes.
    """
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind, Status, StatusCode

    rows = list(record.spans)
    by_id = {row.get("span_id"): row for row in rows}
    made: dict[Any, Span] = {}

    def make(row: Mapping[str, Any]) -> Span:
        span_id = row.get("span_id")
        if span_id in made:
            return made[span_id]
        parent_row = by_id.get(row.get("parent_id"))
        context = None
        if parent_row is not None and parent_row is not row:
            context = trace.set_span_in_context(make(parent_row))
        kind = str(row.get("kind"))
        start = _ns(row.get("start"), record.started_at)
        span = tracer.start_span(
            _span_name(row), context=context, start_time=start,
            kind=SpanKind.CLIENT if kind == "model" else SpanKind.INTERNAL,
            attributes=_attributes(record, row, capture_io))
        made[span_id] = span
        return span

    for row in rows:
        make(row)
    for row in reversed(rows):  # children end before their parents
        span = made[row.get("span_id")]
        status = row.get("status")
        if status in ("failed", "tripwire"):
            span.set_status(Status(StatusCode.ERROR, str(row.get("error") or status)))
        elif status == "success":
            span.set_status(Status(StatusCode.OK))
        end = row.get("end")
        span.end(end_time=_ns(end if end is not None else record.ended_at, record.started_at))


def _ns(seconds: Any, default: float | None) -> int:
    value = seconds if isinstance(seconds, int | float) else default
    return int((value or 0.0) * 1e9)


def _model_of(name: str) -> tuple[str, str]:
    """("openai", "gpt-4o") from "model call: openai/gpt-4o"."""
    target = name.split(": ", 1)[-1]
    provider, _, model = target.partition("/")
    return (provider, model) if model else ("", provider)


def _span_name(row: Mapping[str, Any]) -> str:
    name, kind = str(row.get("name")), row.get("kind")
    if kind == "model":
        return f"chat {_model_of(name)[1]}"
    if kind == "tool":
        return f"execute_tool {name.split(': ', 1)[-1]}"
    return name


def _attributes(record: TraceRecord, row: Mapping[str, Any],
                capture_io: bool) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "procflow.run_id": record.run_id, "procflow.workflow_id": record.workflow_id,
        "procflow.span.kind": str(row.get("kind")), "procflow.status": str(row.get("status")),
    }
    if row.get("path"):
        attrs["procflow.step.path"] = str(row["path"])
    if row.get("error"):
        attrs["error.type"] = str(row["error"]).split(":", 1)[0]
        attrs["procflow.error"] = _text(row["error"])
    extra = row.get("attributes") or {}
    for key, value in extra.items():
        if isinstance(value, bool | int | float | str):
            attrs[f"procflow.{key}"] = _text(value) if isinstance(value, str) else value
    kind, name = row.get("kind"), str(row.get("name"))
    if kind == "model":
        provider, model = _model_of(name)
        attrs.update({"gen_ai.operation.name": "chat", "gen_ai.request.model": model,
                      "gen_ai.response.model": model})
        if provider:
            attrs["gen_ai.system"] = attrs["gen_ai.provider.name"] = provider
        answered = extra.get("answered_by")  # a FallbackModel's answering model
        if isinstance(answered, str) and answered:
            attrs["gen_ai.response.model"] = _model_of(answered)[1]
        usage = extra.get("usage")
        if isinstance(usage, Mapping):
            for ours, theirs in (("input_tokens", "gen_ai.usage.input_tokens"),
                                 ("output_tokens", "gen_ai.usage.output_tokens"),
                                 ("cached_input_tokens",
                                  "gen_ai.usage.cache_read.input_tokens")):
                if isinstance(usage.get(ours), int):
                    attrs[theirs] = usage[ours]
            if isinstance(usage.get("cost"), int | float):
                attrs["procflow.usage.cost"] = float(usage["cost"])
        if extra.get("finish_reason"):
            attrs["gen_ai.response.finish_reasons"] = [str(extra["finish_reason"])]
    elif kind == "tool":
        attrs.update({"gen_ai.operation.name": "execute_tool",
                      "gen_ai.tool.name": name.split(": ", 1)[-1]})
    if capture_io:
        for key in ("input", "output"):
            if row.get(key) is not None:
                attrs[f"procflow.{key}"] = _text(row[key])
    return attrs


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=repr,
                                                           ensure_ascii=False)
    return text if len(text) <= _MAX_VALUE else text[:_MAX_VALUE] + "…"
