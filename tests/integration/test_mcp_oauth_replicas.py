"""Signing in across gateway replicas: replica A in this process, replica B an OS process of its own,
one public URL in front of both (``TOOLMESH_PUBLIC_URL``), as behind a load balancer without
stickiness. Each step of the sign-in goes to the other replica than the one before (client
registrations, consent requests, codes and refresh tokens live in Postgres); a revocation on one
replica is refused by the other at once, though it answered with the token a moment before (its
cache would have kept it 30 s)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.harness import ADMIN_TOKEN, RoleProcess, eventually, running_system
from tests.mcp_raw import INITIALIZE, MCP_ACCEPT
from tests.oauth_client_flow import authorize as authorize_at
from tests.oauth_client_flow import decide, exchange, query_of, refresh, registered, request_id_of, tokens_of
from toolmesh_cli.embedded import free_port

pytestmark = pytest.mark.integration


@contextlib.asynccontextmanager
async def two_replicas(nats_url: str, database_url: str) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """Clients of replica A and replica B (no credentials of their own)."""
    port_a, port_b = free_port(), free_port()
    public = f"http://127.0.0.1:{port_a}"
    async with running_system(nats_url, database_url, port=port_a, public_url=public) as system:
        b = RoleProcess("gateway", system.settings, env={"TOOLMESH_PORT": str(port_b), "TOOLMESH_PUBLIC_URL": public})
        try:
            async with (
                httpx.AsyncClient(base_url=public, timeout=30) as a_http,
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{port_b}", timeout=30) as b_http,
            ):

                async def answering() -> bool:
                    try:
                        return (await b_http.get("/.well-known/oauth-authorization-server")).status_code == 200
                    except httpx.TransportError:
                        return False

                await eventually(answering, timeout=60, what="replica B to answer")
                yield a_http, b_http
        finally:
            b.terminate()


async def opens(http: httpx.AsyncClient, token: str) -> int:
    """The status of an ``initialize`` on ``/mcp`` with ``token``."""
    answer = await http.post("/mcp", json=INITIALIZE, headers={"Authorization": f"Bearer {token}"} | MCP_ACCEPT)
    return answer.status_code


async def test_each_step_of_a_sign_in_may_reach_another_replica(nats_url: str, database_url: str) -> None:
    async with two_replicas(nats_url, database_url) as (a, b):
        b_metadata = (await b.get("/.well-known/oauth-authorization-server")).json()
        assert b_metadata["issuer"] == str(a.base_url).rstrip("/")  # one issuer, whichever replica answers
        client = await registered(a)
        request_id = request_id_of(await authorize_at(b, client))
        decision = await decide(a, request_id, ADMIN_TOKEN)
        assert decision.status_code == 200, decision.text
        first = tokens_of(await exchange(b, client, query_of(decision.json()["redirect_to"])["code"]))
        assert await opens(a, first.access) == 200
        assert await opens(b, first.access) == 200

        second = tokens_of(await refresh(a, client.client_id, first.refresh))
        assert await opens(a, second.access) == 200  # now in both replicas' caches
        assert await opens(b, second.access) == 200

        replayed = await refresh(b, client.client_id, first.refresh)
        assert replayed.status_code == 400 and replayed.json()["error"] == "invalid_grant"
        assert await opens(b, second.access) == 401  # the replay revoked the grant: B's own cache...

        async def refused_on_a() -> bool:  # ...and A's, through the event stream
            return await opens(a, second.access) == 401

        await eventually(refused_on_a, timeout=5, what="replica A to refuse the revoked token")
