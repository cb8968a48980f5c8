"""Logs (JSON, or short lines on a terminal), and OpenTelemetry traces whose W3C context travels
across HTTP and NATS hops.

Tracing is off unless the usual ``OTEL_*`` variables ask for it (``OTEL_TRACES_EXPORTER=otlp`` or
``console``, or an ``OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT``). Off, ``span()`` costs one flag test
and the ``traceparent`` header still carries a trace id so log lines of one request correlate
across processes. On, spans are exported in batches and the header is the real W3C context.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
import secrets
import sys
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from toolmesh.platform.log_formats import HumanHandler, chosen_format
from toolmesh.redaction import process_redactor

TRACEPARENT = "traceparent"
_trace_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("toolmesh_trace_id", default=None)
# Attributes every LogRecord has; anything else on a record came in through ``extra=`` and is logged.
_STANDARD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
_TRACER_NAME = "toolmesh"
_tracing = False

log = logging.getLogger("toolmesh.telemetry")


def tracing_enabled() -> bool:
    """True once ``configure_tracing`` installed an exporter in this process."""
    return _tracing


def _wanted_exporters(environ: Mapping[str, str]) -> list[str]:
    if environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return []
    named = environ.get("OTEL_TRACES_EXPORTER")
    if named is not None:
        return [name.strip() for name in named.split(",") if name.strip() and name.strip() != "none"]
    if environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return ["otlp"]
    return []


def configure_tracing(environ: Mapping[str, str] | None = None, *, exporter: SpanExporter | None = None) -> bool:
    """Install a tracer provider when ``OTEL_*`` asks for one (or ``exporter`` is given); True when on."""
    global _tracing
    if _tracing:
        return True
    env = os.environ if environ is None else environ
    processors: list[Any] = []
    if exporter is not None:
        processors.append(SimpleSpanProcessor(exporter))
    for name in _wanted_exporters(env):
        if name == "otlp":
            # Imported here so a process that does not export pays nothing for protobuf and requests.
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            processors.append(BatchSpanProcessor(OTLPSpanExporter()))
        elif name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            processors.append(BatchSpanProcessor(ConsoleSpanExporter()))
        else:
            log.warning("unsupported OTEL_TRACES_EXPORTER %r ignored (use otlp or console)", name)
    if not processors:
        return False
    provider = TracerProvider(resource=Resource.create({"service.name": env.get("OTEL_SERVICE_NAME", "toolmesh")}))
    for processor in processors:
        provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    _tracing = True
    return True


def current_trace_id() -> str:
    """The trace id of the work in hand, starting a new trace if there is none."""
    if _tracing:
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            return trace.format_trace_id(context.trace_id)
    trace_id = _trace_id.get()
    if trace_id is None:
        trace_id = secrets.token_hex(16)
        _trace_id.set(trace_id)
    return trace_id


def outgoing_headers(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Headers for a NATS message: the caller's W3C trace context plus ``extra``."""
    headers = dict(extra or {})
    if _tracing:
        propagate.inject(headers)
    if TRACEPARENT not in headers:
        headers[TRACEPARENT] = f"00-{current_trace_id()}-{secrets.token_hex(8)}-01"
    return headers


def adopt_trace(headers: Mapping[str, str] | None) -> str:
    """Continue the trace named by an incoming ``traceparent`` (or start one); returns its id.

    With tracing on, the remote context becomes the current one, so spans started afterwards in
    this task (the MCP SDK's upstream request spans too) are its children.
    """
    carrier = dict(headers or {})
    value = carrier.get(TRACEPARENT, "")
    parts = value.split("-")
    trace_id = parts[1] if len(parts) == 4 and len(parts[1]) == 32 else secrets.token_hex(16)
    if _tracing and TRACEPARENT in carrier:
        current = trace.get_current_span().get_span_context()
        # Inside a span of this very trace (a handler span) that span stays the parent.
        if not (current.is_valid and trace.format_trace_id(current.trace_id) == trace_id):
            otel_context.attach(propagate.extract(carrier))
    _trace_id.set(trace_id)
    return trace_id


@contextlib.contextmanager
def span(
    name: str,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Mapping[str, str | int | float | bool] | None = None,
    remote: Mapping[str, str] | None = None,
) -> Iterator[Span | None]:
    """A span around one hop, child of ``remote`` headers when given; yields None when tracing is off."""
    if not _tracing:
        if remote is not None:
            adopt_trace(remote)
        yield None
        return
    parent = propagate.extract(dict(remote)) if remote is not None else None
    tracer = trace.get_tracer(_TRACER_NAME)
    with tracer.start_as_current_span(name, context=parent, kind=kind, attributes=dict(attributes or {})) as current:
        token = _trace_id.set(trace.format_trace_id(current.get_span_context().trace_id))
        try:
            yield current
        finally:
            _trace_id.reset(token)


def mark_error(current: Span | None, message: str) -> None:
    """Set an error status on a span from ``span()`` (no-op when tracing is off)."""
    if current is not None:
        current.set_status(Status(StatusCode.ERROR, message))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: the message, ``trace_id`` when known, and every ``extra=`` field
    (``server``, ``tool``, the proxy spec's span fields, ...)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        trace_id = _trace_id.get()
        if trace_id:
            entry["trace_id"] = trace_id
        for field, value in vars(record).items():
            if field not in _STANDARD_ATTRIBUTES:
                entry[field] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exc"] = record.exc_text
        return json.dumps(entry, default=str)


def configure_logging(level: str = "INFO", stream: TextIO | None = None, log_format: str = "auto") -> None:
    """Logs on stderr (or ``stream``) for the whole process, with registered secrets masked in either
    format: JSON lines, or short human lines (``log_formats``) when ``log_format`` is ``human``, or
    ``auto`` and the stream is a terminal.

    Also switches trace export on when the ``OTEL_*`` environment asks for it (see module doc).
    """
    threshold = logging.getLevelNamesMapping().get(level.upper())
    if threshold is None:
        raise ValueError(f"unknown log level {level!r}")
    handler: logging.Handler
    if chosen_format(log_format, stream or sys.stderr) == "human":
        handler = HumanHandler(threshold, stream)
    else:
        handler = logging.StreamHandler(stream or sys.stderr)
        handler.setFormatter(JsonFormatter())
    handler.addFilter(process_redactor())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(threshold)
    for noisy in ("uvicorn.access", "httpx", "httpx2", "nats"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    configure_tracing()
