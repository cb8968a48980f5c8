"""The ``headers`` field of an HTTP, SSE or REST server's ``connection_config``: fields toolmesh's HTTP
client sends to the upstream as given, so each must be a valid HTTP field (RFC 9110) that the client
owns no part of.

A refusal names the header, never its value: the value is usually a credential.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# Headers toolmesh's HTTP client owns: hop-by-hop and message framing (RFC 9110/9112), and MCP's own
# session headers. A registration setting one could smuggle a request or break the session.
RESERVED_HEADERS = frozenset(
    {
        "connection",
        "content-encoding",
        "content-length",
        "expect",
        "host",
        "keep-alive",
        "mcp-protocol-version",
        "mcp-session-id",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an RFC 9110 token
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # every control character but HTAB
_VALUE = re.compile(r"(?:[\x21-\x7e]+(?:[ \t]+[\x21-\x7e]+)*)?")  # RFC 9110 field-value, in US-ASCII


def header_problem(position: int, name: str) -> str | None:
    """Why ``name`` (the ``position``-th header, from 1) may not be a header, else None; an invalid name
    is not quoted (it may hold a value: ``"Authorization: Bearer ..."``)."""
    if _NAME.fullmatch(name) is None:
        return (
            f"'headers': header name number {position} is not an RFC 9110 token "
            "(letters, digits and !#$%&'*+-.^_`|~ only; no space, colon, CR or LF)"
        )
    if name.lower() in RESERVED_HEADERS:
        return f"'headers': {name!r} is a hop-by-hop or framing header that toolmesh's HTTP client sets"
    return None


def header_value_problem(name: str, value: str) -> str | None:
    """Why ``value`` may not be sent as the value of header ``name``, else None; never quotes ``value``."""
    if _VALUE.fullmatch(value) is not None:
        return None
    if _CONTROL.search(value):
        why = "contains a control character (CR, LF, NUL, ...; only spaces and tabs are allowed)"
    elif not value.isascii():
        why = "contains a character outside US-ASCII (header values are sent as ASCII)"
    else:
        why = "begins or ends with a space or tab"
    return f"'headers': the value of {name!r} {why}"


def headers_problems(headers: Mapping[str, Any]) -> list[str]:
    """A message for every header of ``headers`` that is not a valid HTTP field toolmesh may send
    (values that are not strings are left to the caller)."""
    problems = []
    for position, (name, value) in enumerate(headers.items(), start=1):
        problem = header_problem(position, name) or (
            header_value_problem(name, value) if isinstance(value, str) else None
        )
        if problem:
            problems.append(problem)
    return problems
