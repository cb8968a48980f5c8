"""W3C trace context across hops: HTTP span -> NATS headers -> session span -> upstream span.

Run in a subprocess: installing a tracer provider is process-wide and must not leak into other tests.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.unit

SCRIPT = textwrap.dedent(
    """
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from toolmesh.platform import telemetry

    assert not telemetry.configure_tracing({})  # off by default: no OTEL_* variables
    assert not telemetry.tracing_enabled()
    with telemetry.span("off") as nothing:
        assert nothing is None
    assert telemetry.outgoing_headers()["traceparent"].startswith("00-")

    exporter = InMemorySpanExporter()
    assert telemetry.configure_tracing({}, exporter=exporter)
    with telemetry.span("HTTP GET") as outer:
        headers = telemetry.outgoing_headers()
        trace_id = telemetry.current_trace_id()
    assert headers["traceparent"].split("-")[1] == trace_id
    with telemetry.span("session call", remote=headers):
        telemetry.adopt_trace(headers)  # the handler adopts the same trace: its span stays the parent
        with telemetry.span("upstream"):
            pass
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert spans["session call"].parent.span_id == outer.get_span_context().span_id
    assert spans["upstream"].parent.span_id == spans["session call"].context.span_id
    assert len({s.context.trace_id for s in spans.values()}) == 1
    """
)


def test_trace_context_crosses_hops_and_is_off_by_default() -> None:
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr


def test_otel_env_switches_exporters() -> None:
    from toolmesh.platform.telemetry import _wanted_exporters

    assert _wanted_exporters({}) == []
    assert _wanted_exporters({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}) == ["otlp"]
    assert _wanted_exporters({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "x"}) == []
    assert _wanted_exporters({"OTEL_TRACES_EXPORTER": "otlp,console"}) == ["otlp", "console"]
    assert _wanted_exporters({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}) == []
