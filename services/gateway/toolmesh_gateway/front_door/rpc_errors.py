"""toolmesh errors as JSON-RPC errors with the spec's codes; an upstream's own error passes through;
an authorization the user must give upstream is a URL-mode elicitation (MCP 2025-11-25) for a client
that supports them."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator

import mcp_types
from mcp.shared.exceptions import MCPError, UrlElicitationRequiredError
from nats.errors import Error as NatsError

from toolmesh.errors import (
    BackendUnavailable,
    ExecutionTimeout,
    PromptAmbiguous,
    PromptChanged,
    PromptNotFound,
    ResourceChanged,
    ResourceNotFound,
    ServerNotFound,
    ToolAmbiguous,
    ToolmeshError,
    ToolNotFound,
    UpstreamAuthorizationRequired,
)

RESOURCE_NOT_FOUND = -32002
"""The spec's code for a resource nobody serves."""
REQUEST_TIMEOUT = -32001
_INVALID_PARAMS = (
    ServerNotFound,
    ToolNotFound,
    ToolAmbiguous,
    PromptNotFound,
    PromptAmbiguous,
    PromptChanged,
    ResourceChanged,
)


def mcp_error(exc: ToolmeshError, capabilities: object = None) -> MCPError:
    """The JSON-RPC error a client sees for ``exc`` (``data`` carries toolmesh's error body); a URL
    elicitation when the client's ``capabilities`` take one (``url_elicitation``)."""
    if (elicitation := url_elicitation(exc, capabilities)) is not None:
        return elicitation
    upstream = exc.extra.get("upstream_error")
    if isinstance(upstream, dict) and isinstance(upstream.get("code"), int):
        return MCPError(
            code=upstream["code"], message=str(upstream.get("message", exc.detail)), data=upstream.get("data")
        )
    if isinstance(exc, ResourceNotFound):
        code = RESOURCE_NOT_FOUND
    elif isinstance(exc, _INVALID_PARAMS):
        code = mcp_types.INVALID_PARAMS
    elif isinstance(exc, ExecutionTimeout):
        code = REQUEST_TIMEOUT
    else:
        code = mcp_types.INTERNAL_ERROR
    return MCPError(code=code, message=exc.detail, data=exc.body())


def url_elicitation(exc: ToolmeshError, capabilities: object) -> UrlElicitationRequiredError | None:
    """The URL elicitation that sends the user to authorize an upstream, when ``exc`` carries the URL
    and the client declared URL-mode elicitation in ``capabilities``; else None."""
    url = exc.extra.get("authorization_url") if isinstance(exc, UpstreamAuthorizationRequired) else None
    elicitation = getattr(capabilities, "elicitation", None)
    if not isinstance(url, str) or getattr(elicitation, "url", None) is None:
        return None
    asked = mcp_types.ElicitRequestURLParams(
        mode="url", message=exc.detail, url=url, elicitation_id=secrets.token_urlsafe(16)
    )
    return UrlElicitationRequiredError([asked], message=exc.detail)


@contextlib.contextmanager
def nats_answers(what: str) -> Iterator[None]:
    """A NATS failure inside the block (no answer in time, no responders) as the client's
    ``BACKEND_UNAVAILABLE`` JSON-RPC error, saying ``what`` it was doing."""
    try:
        yield
    except NatsError as exc:
        raise mcp_error(BackendUnavailable(f"NATS did not answer while {what}")) from exc
