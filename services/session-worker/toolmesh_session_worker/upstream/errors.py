"""Errors of upstream sessions, and how a failure is put into words.

A failure has two wordings: its text (``str``), which may quote the upstream (its error
messages, a driver's text, a STDIO child's stderr) and goes only to the logs, through the
redactor; and its ``summary``, toolmesh's own words (fixed phrases, an exception class, an exit
code, an HTTP status, a JSON-RPC code), the only wording that reaches API-visible fields
(``error_message``, connection history, events).
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from typing import Any, Protocol

import anyio
import httpx2
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED

from toolmesh.egress.policy import EgressRefused


class UpstreamError(Exception):
    """The upstream could not be reached or broke the protocol; ``code`` is a JSON-RPC error code."""

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        data: Any = None,
        reason: str | None = None,
        summary: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.data = data
        self.reason = reason or message  # the upstream's own error message, when it sent one
        self.summary = summary or (f"JSON-RPC error {code}" if code is not None else "upstream error")
        """What may be shown: toolmesh's words only, never text the upstream chose."""


def rpc_error(server_name: str, what: str, code: int, message: str, data: Any) -> UpstreamError:
    """The upstream's JSON-RPC error answer to a request (its code, message and data kept)."""
    return UpstreamError(
        f"{server_name}: error while {what}: {message}",
        code=code,
        data=data,
        reason=message,
        summary=f"JSON-RPC error {code} while {what}",
    )


class UpstreamTimeout(UpstreamError):
    """A request exceeded its timeout; the request was cancelled upstream."""


class UpstreamRefused(UpstreamError):
    """The upstream refused toolmesh's credentials (HTTP 401 or 403): trying again cannot help."""


class UpstreamScopeRequired(UpstreamRefused):
    """The upstream refused a request for want of scope ``required`` (403 ``insufficient_scope``);
    ``wanted`` is the scope a new authorization asks for, None when the grant already asked for
    ``required`` (authorizing again would not help)."""

    def __init__(self, message: str, *, required: str | None, wanted: str | None) -> None:
        super().__init__(message, summary="HTTP 403: the upstream requires a scope the grant lacks")
        self.required = required
        self.wanted = wanted


class UpstreamMisconfigured(UpstreamError):
    """The upstream cannot be started as configured (a STDIO command or working directory that does
    not exist or may not be run): trying again cannot help until the config changes."""


REFUSED = (401, 403)
_UNSTARTABLE = (FileNotFoundError, PermissionError, NotADirectoryError, EgressRefused)
_KNOWN: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], str], ...] = (
    (
        EgressRefused,
        "refused by the egress policy (a loopback, private, link-local or metadata address, or a redirect)",
    ),
    (ConnectionRefusedError, "connection refused"),
    (socket.gaierror, "host name not resolved"),
    (ssl.SSLError, "TLS handshake failed"),
    (FileNotFoundError, "command or working directory not found"),
    (NotADirectoryError, "working directory is not a directory"),
    (PermissionError, "permission denied"),
    ((TimeoutError, httpx2.TimeoutException), "timed out"),
    ((ConnectionError, httpx2.NetworkError), "could not connect"),
    ((anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError), "the connection closed"),
)
"""Kinds of failure that have fixed words, most telling first."""


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


def _http_status(exc: BaseException) -> int | None:
    """The status of an HTTP answer somewhere in ``exc`` (its groups and causes), if any."""
    for current in _causes(exc):
        status = getattr(getattr(current, "response", None), "status_code", None)
        if isinstance(status, int):
            return status
    return None


def refused_status(exc: BaseException) -> int | None:
    """401 or 403 when an HTTP answer of that status is somewhere in ``exc`` (its groups and causes)."""
    status = _http_status(exc)
    return status if status in REFUSED else None


def unstartable(exc: BaseException) -> bool:
    """Whether ``exc`` says the upstream cannot be opened as configured (a missing or forbidden command,
    an address or redirect the egress policy refuses)."""
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


def summarize(exc: BaseException) -> str:
    """``exc`` in toolmesh's words: fixed words for known kinds of failure, the HTTP status or
    JSON-RPC code it carries, else its class; never its text (see the module's docstring)."""
    if isinstance(exc, UpstreamError):
        return exc.summary
    causes = list(_causes(exc))
    status = _http_status(exc)
    if status is not None:
        return f"HTTP {status}"
    for kinds, words in _KNOWN:
        if any(isinstance(current, kinds) for current in causes):
            return words
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return "the upstream closed the connection" if exc.code == CONNECTION_CLOSED else f"JSON-RPC error {exc.code}"
    return type(exc).__name__


def with_hint(message: str, transport: _Hinted) -> str:
    """``message`` with the transport's words on a failed connect (an exit status) when it has any."""
    hint = transport.failure_hint()
    return f"{message} ({hint})" if hint else message
