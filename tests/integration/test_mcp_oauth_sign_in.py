"""An MCP client that has never seen this gateway finds how to sign in from the 401 of ``/mcp``
(RFC 9728 → RFC 8414), signs in through the gateway's own authorization server, and uses ``/mcp``
with the token — and only ``/mcp``: the REST API refuses it."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest

from tests.harness import ADMIN_TOKEN, System
from tests.mcp_raw import INITIALIZE, MCP_ACCEPT

pytestmark = pytest.mark.integration
REDIRECT = "http://127.0.0.1:9/callback"


async def sign_in(api: httpx.AsyncClient, resource: str | None = None) -> dict[str, str]:
    """Register a client, authorize it, allow it as the owner, exchange the code: the token answer."""
    registered = await api.post("/register", json={"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"})
    assert registered.status_code == 201, registered.text
    client_id = registered.json()["client_id"]
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "s",
    } | ({"resource": resource} if resource else {})
    consent = await api.get("/authorize", params=query)
    assert consent.status_code == 302, consent.text
    request_id = consent.headers["location"].rsplit("/", 1)[1]
    decided = await api.post(f"/api/v1/oauth/requests/{request_id}/decision", json={"allow": True})
    assert decided.status_code == 200, decided.text
    code = dict(parse_qsl(urlsplit(decided.json()["redirect_to"]).query))["code"]
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "code_verifier": verifier}
    tokens = await api.post("/token", data=form | {"client_id": client_id})
    assert tokens.status_code == 200, tokens.text
    answer: dict[str, str] = tokens.json()
    return answer


async def test_a_client_discovers_the_authorization_server_from_the_401(system: System) -> None:
    base = str(system.api.base_url).rstrip("/")
    async with httpx.AsyncClient(base_url=base, timeout=30) as anonymous:
        refused = await anonymous.post("/mcp", json=INITIALIZE, headers=MCP_ACCEPT)
        assert refused.status_code == 401
        found = re.search(r'resource_metadata="([^"]+)"', refused.headers["www-authenticate"])
        assert found is not None, refused.headers["www-authenticate"]
        resource = (await anonymous.get(found.group(1))).json()
        assert resource["resource"] == f"{base}/mcp"
        (issuer,) = resource["authorization_servers"]
        metadata = (await anonymous.get(f"{issuer}/.well-known/oauth-authorization-server")).json()
    assert metadata["issuer"] == issuer == base
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert metadata["client_id_metadata_document_supported"] is True


async def test_the_token_opens_the_aggregate_and_nothing_else(system: System) -> None:
    tokens = await sign_in(system.api)
    assert tokens["access_token"] != ADMIN_TOKEN
    headers = {"Authorization": f"Bearer {tokens['access_token']}"}
    async with httpx.AsyncClient(base_url=system.api.base_url, timeout=30) as client:
        opened = await client.post("/mcp", json=INITIALIZE, headers=headers | MCP_ACCEPT)
        assert opened.status_code == 200, opened.text
        refused = await client.get("/api/v1/aggregator/servers", headers=headers)
    assert refused.status_code == 403
    assert refused.json()["error_code"] == "FORBIDDEN"
