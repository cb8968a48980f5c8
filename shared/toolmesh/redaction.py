"""Masking secrets in log records, whatever logger (ours or a library's) wrote them."""

from __future__ import annotations

import logging


class SecretRedactor(logging.Filter):
    """A log filter that replaces every registered secret with ``***``."""

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
