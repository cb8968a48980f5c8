"""JSON logs and W3C trace context carried across HTTP and NATS hops."""

from __future__ import annotations

import contextvars
import json
import logging
import os
import secrets
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TextIO

TRACEPARENT = "traceparent"
_trace_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("toolmesh_trace_id", default=None)
_CONTEXT_FIELDS = ("server", "tool", "role", "server_id", "span", "duration_ms", "status")


def current_trace_id() -> str:
    """The trace id of the work in hand, starting a new trace if there is none."""
    trace_id = _trace_id.get()
    if trace_id is None:
        trace_id = secrets.token_hex(16)
        _trace_id.set(trace_id)
    return trace_id


def outgoing_headers(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Headers for a NATS message: the caller's ``traceparent`` plus ``extra``."""
    headers = dict(extra or {})
    headers[TRACEPARENT] = f"00-{current_trace_id()}-{secrets.token_hex(8)}-01"
    return headers


def adopt_trace(headers: Mapping[str, str] | None) -> str:
    """Continue the trace named by an incoming ``traceparent`` (or start one); returns its id."""
    value = (headers or {}).get(TRACEPARENT, "")
    parts = value.split("-")
    trace_id = parts[1] if len(parts) == 4 and len(parts[1]) == 32 else secrets.token_hex(16)
    _trace_id.set(trace_id)
    return trace_id


class SecretRedactor(logging.Filter):
    """Masks every registered secret in log records, whatever logger (ours or a library's) wrote them."""

    def __init__(self) -> None:
        super().__init__()
        self._secrets: set[str] = set()

    def add(self, values: list[str]) -> None:
        """Never let these strings reach a log line."""
        self._secrets.update(v for v in values if v)

    def redact(self, text: str) -> str:
        """``text`` with every registered secret replaced by ``***``."""
        for secret in sorted(self._secrets, key=len, reverse=True):
            if secret in text:
                text = text.replace(secret, "***")
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if self._secrets:
            message = record.getMessage()
            redacted = self.redact(message)
            if redacted != message:
                record.msg, record.args = redacted, None
            if record.exc_info and record.exc_info[1] is not None:
                record.exc_text = self.redact(logging.Formatter().formatException(record.exc_info))
                record.exc_info = None
        return True


# Logging is process-wide, so the registry of secrets to mask is too.
REDACTOR = SecretRedactor()


class JsonFormatter(logging.Formatter):
    """One JSON object per line with ``server``, ``tool`` and ``trace_id`` when known."""

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
        for field in _CONTEXT_FIELDS:
            if hasattr(record, field):
                entry[field] = getattr(record, field)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exc"] = record.exc_text
        return json.dumps(entry, default=str)


def configure_logging(level: str = "INFO", stream: TextIO | None = None) -> None:
    """JSON logs on stderr for the whole process (``TOOLMESH_LOG_FORMAT=text`` for plain lines),
    with registered secrets masked."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(REDACTOR)
    if os.environ.get("TOOLMESH_LOG_FORMAT") == "text":
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    else:
        handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("uvicorn.access", "httpx", "httpx2", "nats"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
