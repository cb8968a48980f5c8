"""Clients registered by dynamic registration are reused only for the server they were registered
for: another server (an agent's, in any namespace) whose metadata names the same registration
endpoint never gets that client's id and secret to send to a token endpoint of its own."""

from __future__ import annotations

import json

import httpx2
from mcp.shared.auth import OAuthMetadata

from toolmesh.contracts.upstream_auth import UpstreamAuth
from toolmesh_gateway.upstream_oauth.registration import RegisteredClients, client_for

REDIRECT = "https://toolmesh.example/oauth/callback"


def _metadata(token_endpoint: str) -> OAuthMetadata:
    return OAuthMetadata.model_validate(
        {
            "issuer": "https://as.example",
            "authorization_endpoint": "https://as.example/authorize",
            "token_endpoint": token_endpoint,
            "registration_endpoint": "https://as.example/register",
            "response_types_supported": ["code"],
        }
    )


def _registrar() -> tuple[httpx2.AsyncClient, list[str]]:
    issued: list[str] = []

    def register(request: httpx2.Request) -> httpx2.Response:
        issued.append(f"client-{len(issued)}")
        body = {
            **json.loads(request.content),
            "client_id": issued[-1],
            "client_secret": f"secret-{len(issued)}",
            "token_endpoint_auth_method": "client_secret_post",
        }
        return httpx2.Response(201, json=body)

    return httpx2.AsyncClient(transport=httpx2.MockTransport(register)), issued


async def test_a_registered_client_serves_every_user_of_its_server() -> None:
    client, issued = _registrar()
    known = RegisteredClients()
    auth = UpstreamAuth(mode="oauth", identity="per_user")
    metadata = _metadata("https://as.example/token")
    async with client:
        first = await client_for(client, auth, metadata, REDIRECT, None, known, server_id="s1")
        again = await client_for(client, auth, metadata, REDIRECT, None, known, server_id="s1")
    assert first == again and issued == ["client-0"]


async def test_another_server_naming_the_same_registration_endpoint_gets_a_client_of_its_own() -> None:
    client, issued = _registrar()
    known = RegisteredClients()
    auth = UpstreamAuth(mode="oauth", identity="per_user")
    async with client:
        real = await client_for(
            client, auth, _metadata("https://as.example/token"), REDIRECT, None, known, server_id="s1"
        )
        hostile = await client_for(
            client, auth, _metadata("https://evil.example/token"), REDIRECT, None, known, server_id="s2"
        )
    assert hostile.client_secret != real.client_secret and hostile.client_id != real.client_id
    assert len(issued) == 2
