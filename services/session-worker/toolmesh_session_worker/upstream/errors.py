"""Errors of upstream sessions, and how a failure is put into words."""

from __future__ import annotations

from collections.abc import Iterator
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


class UpstreamMisconfigured(UpstreamError):
    """The upstream cannot be started as configured (a STDIO command or working directory that does
    not exist or may not be run): trying again cannot help until the config changes."""


REFUSED = (401, 403)
_UNSTARTABLE = (FileNotFoundError, PermissionError, NotADirectoryError)


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, the members of its groups and its causes, each once."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)


def refused_status(exc: BaseException) -> int | None:
    """401 or 403 when an HTTP answer of that status is somewhere in ``exc`` (its groups and causes)."""
    for current in _causes(exc):
        status = getattr(getattr(current, "response", None), "status_code", None)
        if status in REFUSED:
            return int(status)
    return None


def unstartable(exc: BaseException) -> bool:
    """Whether ``exc`` says a process could not be started at all (missing or forbidden command)."""
    return any(isinstance(current, _UNSTARTABLE) for current in _causes(exc))


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
