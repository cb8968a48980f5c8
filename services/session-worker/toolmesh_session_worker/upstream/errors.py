"""Errors of upstream sessions, and how a failure is put into words."""

from __future__ import annotations

from typing import Any, Protocol

from mcp.shared.exceptions import MCPError


class UpstreamError(Exception):
    """The upstream could not be reached or broke the protocol; ``code`` is a JSON-RPC error code."""

    def __init__(self, message: str, *, code: int | None = None, data: Any = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.data = data
        self.reason = reason or message  # the upstream's own error message, when it sent one


class UpstreamTimeout(UpstreamError):
    """A request exceeded its timeout; the request was cancelled upstream."""


class UpstreamRefused(UpstreamError):
    """The upstream refused toolmesh's credentials (HTTP 401 or 403): trying again cannot help."""


REFUSED = (401, 403)


def refused_status(exc: BaseException) -> int | None:
    """401 or 403 when an HTTP answer of that status is somewhere in ``exc`` (its groups and causes)."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        response = getattr(current, "response", None)
        status = getattr(response, "status_code", None)
        if status in REFUSED:
            return int(status)
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return None


class _Hinted(Protocol):
    def failure_hint(self) -> str: ...


def describe(exc: BaseException) -> str:
    """A readable one-line reason, unwrapping exception groups to their first leaf."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return exc.message
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def with_hint(message: str, transport: _Hinted) -> str:
    hint = transport.failure_hint()
    return f"{message} ({hint})" if hint else message
