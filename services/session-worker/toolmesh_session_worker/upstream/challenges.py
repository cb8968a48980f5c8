"""An upstream's scope challenge (MCP authorization 2025-11-25, "Scope challenge handling"): a 403 with
``WWW-Authenticate: Bearer error="insufficient_scope", scope="..."``; and its 401 to a grant that
could not be renewed (``REFUSED``: the user withdrew it, or it can no longer be refreshed).

The SDK's Streamable HTTP client turns that answer into a JSON-RPC error without its headers. The
request's ``BearerAuth`` sees the response and notes what the grant makes of the challenge in
``MET``, a list the sending task puts in its context: the SDK sends each request in a copy of its
sender's context (see ``client_side``), so the request that met the challenge, and only that one,
learns why it failed.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

import httpx2
from mcp.client.auth.utils import extract_field_from_www_auth, extract_scope_from_www_auth, union_scopes

from toolmesh.oauth_tokens import usable_scope
from toolmesh_session_worker.upstream.errors import UpstreamRefused, UpstreamScopeRequired


@dataclass(frozen=True)
class ScopeChallenge:
    """What a grant makes of a challenge: the scope the upstream ``required`` (None: it named none
    usable) and the scope a new authorization asks for (``wanted``; None: the grant already asked for
    ``required``, so authorizing again would not help: one step-up per scope)."""

    required: str | None
    wanted: str | None


@dataclass(frozen=True)
class GrantRefused:
    """The upstream answered 401 to the grant, and no renewed token was to be had."""


REFUSED = GrantRefused()
MET: ContextVar[list[ScopeChallenge | GrantRefused] | None] = ContextVar("toolmesh_scope_challenges", default=None)


def insufficient_scope(response: httpx2.Response) -> bool:
    """Whether ``response`` is a scope challenge."""
    return response.status_code == 403 and extract_field_from_www_auth(response, "error") == "insufficient_scope"


def required_scope(response: httpx2.Response) -> str | None:
    """The scope a challenge names, when it is one as RFC 6749 spells it (``usable_scope``)."""
    return usable_scope(extract_scope_from_www_auth(response))


def joined(first: str | None, second: str | None) -> str | None:
    """Both scopes, each scope token once, ``first``'s first (SEP-2350's union on a step-up)."""
    return union_scopes(first, second)


def covers(held: str | None, required: str) -> bool:
    """Whether the scope ``held`` includes every scope token of ``required``."""
    return set(required.split()) <= set((held or "").split())


def note(challenge: ScopeChallenge | GrantRefused) -> None:
    """Tell the request being sent (when it listens) that it met ``challenge``."""
    met = MET.get()
    if met is not None:
        met.append(challenge)


def refusal(server_name: str, what: str, met: list[ScopeChallenge | GrantRefused]) -> UpstreamRefused | None:
    """The refusal of the grant a failed request met (None: it met none): ``UpstreamScopeRequired``
    for a scope challenge, else ``UpstreamRefused``."""
    challenge = met[-1] if met else None
    if isinstance(challenge, GrantRefused):
        words = f"the upstream refused the grant while {what}"
        return UpstreamRefused(f"{server_name}: {words}", summary=words)
    if challenge is not None:
        words = f"the upstream requires a scope the grant lacks while {what}"
        return UpstreamScopeRequired(f"{server_name}: {words}", required=challenge.required, wanted=challenge.wanted)
    return None
