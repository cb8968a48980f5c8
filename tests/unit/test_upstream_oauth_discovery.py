"""OAuth discovery on the gateway goes through the server's egress policy (issue 25): a metadata or
link-local address is refused before any connection, and says so; the protected-resource metadata
must be the server's own (RFC 9728 section 3.3); a scope no authorization server would issue is left out."""

from __future__ import annotations

import httpx2
import pytest

from toolmesh.egress.http import guarded_client
from toolmesh.egress.policy import EgressPolicy
from toolmesh.errors import ServerConnectionFailed
from toolmesh_gateway.upstream_oauth.discovery import discover


@pytest.mark.parametrize("url", ["http://169.254.169.254/mcp", "http://[fe80::1]/mcp", "http://127.0.0.1:9/mcp"])
async def test_discovery_refuses_what_the_egress_policy_refuses(url: str) -> None:
    limits = httpx2.Limits(max_connections=1)
    async with guarded_client(EgressPolicy(), limits, follow_redirects=False) as client:  # public targets only
        with pytest.raises(ServerConnectionFailed, match="egress policy"):
            await discover(client, url, sse=False, scopes=None)


THIEF, REAL = "https://thief.example", "https://tracker.example"


def _upstream(challenge_url: str, resource: str, scope: str | None = None) -> httpx2.MockTransport:
    """An upstream at ``challenge_url`` whose 401 names the metadata of ``resource`` (at the real
    tracker's well-known address), and the tracker's authorization server."""
    metadata_url = f"{REAL}/.well-known/oauth-protected-resource/mcp"

    def answer(request: httpx2.Request) -> httpx2.Response:
        url = str(request.url)
        if url == challenge_url:
            challenge = f'Bearer resource_metadata="{metadata_url}"' + (f', scope="{scope}"' if scope else "")
            return httpx2.Response(401, headers={"WWW-Authenticate": challenge})
        if url == metadata_url:
            return httpx2.Response(200, json={"resource": resource, "authorization_servers": [REAL]})
        if url == f"{REAL}/.well-known/oauth-authorization-server":
            server = {"issuer": REAL, "authorization_endpoint": f"{REAL}/authorize", "token_endpoint": f"{REAL}/token"}
            return httpx2.Response(200, json={**server, "response_types_supported": ["code"]})
        return httpx2.Response(404)

    return httpx2.MockTransport(answer)


async def test_metadata_of_another_resource_is_refused() -> None:
    """An upstream naming a real server's metadata would be sent the token issued for that server."""
    async with httpx2.AsyncClient(transport=_upstream(f"{THIEF}/mcp", f"{REAL}/mcp")) as client:
        with pytest.raises(ServerConnectionFailed, match=f"is for {REAL}/mcp, not for this server"):
            await discover(client, f"{THIEF}/mcp", sse=False, scopes=None)


async def test_metadata_of_the_server_itself_is_used() -> None:
    async with httpx2.AsyncClient(transport=_upstream(f"{REAL}/mcp", f"{REAL}/mcp", "read write")) as client:
        found = await discover(client, f"{REAL}/mcp", sse=False, scopes=None)
    assert (found.resource, found.issuer.rstrip("/"), found.scope) == (f"{REAL}/mcp", REAL, "read write")


async def test_an_unusable_scope_from_the_challenge_is_left_out() -> None:
    huge = "s" * 5000
    async with httpx2.AsyncClient(transport=_upstream(f"{REAL}/mcp", f"{REAL}/mcp", huge)) as client:
        found = await discover(client, f"{REAL}/mcp", sse=False, scopes=None)
    assert found.scope is None
