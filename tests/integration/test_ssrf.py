"""SSRF: one egress policy for every upstream URL (``toolmesh.egress.policy``), driven as an attacker would.

An ``agent`` key tries to point servers at loopback (a canary listener on 127.0.0.1, the gateway's
own ``/metrics``) in every spelling, at cloud metadata, at a REST URL that swallows the path, and
at loopback through a variable expanded at connect time; an admin's upstreams and health checks
redirect to another host. Every attempt is refused, and the canaries receive nothing.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import httpx2
import pytest

from tests.harness import System, eventually, running_system
from tests.peers.canary import ok, redirect_to, running_canary
from tests.peers.launch import launch_peer
from toolmesh.egress.http import egress_refused, guarded_client
from toolmesh.egress.policy import EgressPolicy

pytestmark = pytest.mark.integration
SERVERS = "/api/v1/aggregator/servers"
FAST_HEALTH: dict[str, Any] = {"health_interval_seconds": 1.0, "health_check_timeout_seconds": 0.8}


@dataclass
class Team:
    system: System
    tokens: dict[str, str]

    def client(self, who: str) -> httpx.AsyncClient:
        return self.system.client_as(self.tokens[who])

    async def register(self, who: str, transport: str, config: dict[str, Any], **fields: Any) -> httpx.Response:
        body = {"name": f"s-{uuid.uuid4().hex[:12]}", "transport_type": transport, **fields}
        async with self.client(who) as api:
            return await api.post(SERVERS, json={**body, "connection_config": config})


async def make_team(system: System) -> Team:
    tokens = {"owner": str(system.settings.admin_token)}
    for name, role in (("agent", "agent"), ("admin", "admin"), ("user", "user")):
        tokens[name] = (await system.create_key(name, role, namespace="team-a"))["token"]
    return Team(system, tokens)


@pytest.fixture
async def team(nats_url: str, database_url: str) -> AsyncIterator[Team]:
    roles = ["gateway", "session-worker", "projector"]
    async with running_system(nats_url, database_url, roles=roles) as system:
        yield await make_team(system)


def loopback_spellings(port: int) -> list[str]:
    """The canary at 127.0.0.1:``port`` in every spelling, and by this host's name if that resolves to it."""
    hosts = [
        "127.0.0.1",
        "localhost",
        "127.1",
        "2130706433",
        "0x7f000001",
        "0177.0.0.1",
        "[::ffff:127.0.0.1]",
        "127.0.0.1.",
    ]
    name = socket.gethostname()
    if socket.gethostbyname(name).startswith("127."):
        hosts.append(name)  # a name only a resolver knows is loopback
    return [f"http://{host}:{port}/sse" for host in hosts]


def refused_field(response: httpx.Response) -> str:
    """The field a refusal names: 403 ``FORBIDDEN`` (the role may not) in its context, 422
    ``VALIDATION_ERROR`` (nobody may; here, plain http to a host not spelled as loopback) in its detail."""
    body = response.json()
    if response.status_code == 403 and body["error_code"] == "FORBIDDEN":
        return str(body["context"]["field"])
    assert response.status_code == 422 and body["error_code"] == "VALIDATION_ERROR", response.text
    return ".".join(body["detail"][0]["loc"][1:])


async def agent_servers(team: Team) -> int:
    async with team.client("agent") as api:
        total: int = (await api.get(SERVERS)).json()["total"]
        return total


async def test_ssrf_agent_may_not_point_a_server_at_loopback_in_any_spelling(team: Team) -> None:
    async with running_canary() as canary:
        gateway_metrics = f"http://127.0.0.1:{team.system.settings.port}/metrics"
        for url in [*loopback_spellings(canary.port), gateway_metrics]:
            for transport, field in (("SSE", "url"), ("HTTP", "base_url"), ("REST", "url")):
                response = await team.register("agent", transport, {field: url})
                assert refused_field(response) == f"connection_config.{field}", (url, transport, response.text)
        health = await team.register(
            "agent", "SSE", {"url": "https://mcp.invalid/sse"}, health_check_url=f"{canary.url}/health"
        )
        assert health.status_code == 403 and health.json()["context"]["field"] == "health_check_url"
        insecure = await team.register("agent", "SSE", {"url": "http://mcp.invalid/sse"}, allow_insecure=True)
        assert insecure.status_code == 403 and insecure.json()["context"]["field"] == "allow_insecure"
        user = await team.register("user", "SSE", {"url": f"{canary.url}/sse"})
        assert user.status_code == 403
        assert canary.connections == 0 and canary.requests == []
    assert await agent_servers(team) == 0


async def test_ssrf_metadata_targets_are_refused_for_every_role(team: Team) -> None:
    spellings = [  # https: the TLS rule alone would refuse plain http for these hosts
        "https://169.254.169.254/latest/meta-data/",
        "https://2852039166/latest/meta-data/",
        "https://0251.0376.0251.0376/",
        "https://0xa9fea9fe/",
        "https://[::ffff:169.254.169.254]/",
        "https://169.254.169.254./",
        "https://[fd00:ec2::254]/",
        "https://100.100.100.200/",
        "https://metadata.google.internal/computeMetadata/v1/",
    ]
    for who in ("owner", "admin", "agent"):
        for url in spellings:
            response = await team.register(who, "SSE", {"url": url})
            assert refused_field(response) == "connection_config.url", (who, url, response.text)
            assert response.status_code == 422
        health = await team.register(
            who, "SSE", {"url": "https://mcp.invalid/sse"}, health_check_url="https://2852039166/"
        )
        assert refused_field(health) == "health_check_url" and health.status_code == 422
    assert (await team.system.api.get(SERVERS)).json()["total"] == 0


async def test_ssrf_rest_urls_cannot_be_bent_to_another_path(team: Team) -> None:
    async with running_canary() as canary:
        for url in (
            f"{canary.url}/api?x=",
            f"{canary.url}/api#",
            f"{canary.url}/api/../metrics",
            f"{canary.url}/api/%2e%2e/metrics",
            f"{canary.url}/api%2fmetrics",
        ):
            response = await team.register("admin", "REST", {"url": url})
            assert response.status_code == 422, (url, response.text)
            assert response.json()["detail"][0]["loc"][-2:] == ["connection_config", "url"]
        assert canary.connections == 0


async def test_ssrf_a_variable_expanded_at_connect_cannot_move_an_agents_server_onto_loopback(
    nats_url: str, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The name in the registration resolves nowhere; at connect it expands to the canary's address,
    which the connect-time check refuses (as it refuses a name rebound to loopback)."""
    roles = ["gateway", "session-worker", "projector"]
    async with (
        running_canary() as canary,
        running_system(nats_url, database_url, roles=roles, expandable_variables=("CANARY_HOST",)) as system,
    ):
        monkeypatch.setenv("CANARY_HOST", f"127.0.0.1:{canary.port}")
        team = await make_team(system)
        response = await team.register("agent", "SSE", {"url": "https://${CANARY_HOST}/sse"})
        assert response.status_code == 201, response.text
        detail = await system.wait_status(response.json()["id"], "ERROR")
        assert "refused by the egress policy" in detail["error_message"]
        assert detail["next_retry_at"] is None  # a refusal is not retried on its own
        assert canary.connections == 0


async def test_ssrf_upstream_redirects_to_another_host_are_not_followed(team: Team) -> None:
    async with running_canary() as elsewhere:
        to_other_name = redirect_to(f"http://localhost:{elsewhere.port}/mcp")
        to_other_port = redirect_to(f"http://127.0.0.1:{elsewhere.port}/health")
        async with running_canary(to_other_name) as mcp, running_canary(to_other_port) as rest:
            http = await team.register("owner", "HTTP", {"base_url": f"{mcp.url}/mcp"})
            tools = await team.register("owner", "REST", {"url": rest.url})
            assert http.status_code == 201 and tools.status_code == 201
            # The MCP SDK follows redirects within the endpoint's origin only (the request fails);
            # REST requests follow them on the same host only (the egress policy refuses the rest).
            await team.system.wait_status(http.json()["id"], "ERROR")
            detail = await team.system.wait_status(tools.json()["id"], "ERROR")
            assert "refused by the egress policy" in detail["error_message"], detail["error_message"]
            assert mcp.requests and mcp.requests[0].startswith("POST /mcp")
            assert rest.requests and rest.requests[0] == "GET /health"
        assert elsewhere.connections == 0


async def test_ssrf_health_checks_follow_redirects_on_their_host_only(nats_url: str, database_url: str) -> None:
    async with running_canary() as elsewhere:
        off_host = redirect_to(f"http://localhost:{elsewhere.port}/health")

        def answer(method: str, target: str) -> tuple[int, dict[str, str], bytes]:
            if target == "/away":
                return off_host(method, target)
            return redirect_to("/healthz")(method, target) if target == "/moved" else ok(method, target)

        async with (
            running_canary(answer) as health,
            running_system(nats_url, database_url, **FAST_HEALTH) as system,
            launch_peer("http") as peer,
        ):
            away = await system.register(
                "away", peer.transport_type, peer.config, health_check_url=f"{health.url}/away"
            )
            moved = await system.register(
                "moved", peer.transport_type, peer.config, health_check_url=f"{health.url}/moved"
            )

            async def failed_check() -> str | None:
                """The first failed check that followed the redirect (one under load may time out first)."""
                rows = (await system.api.get(f"{SERVERS}/{away['id']}/history")).json()
                errors = [r["details"].get("error", "") for r in rows if r["event_type"] == "HEALTH_FAILED"]
                return next((e for e in errors if "another host" in e or "timed out" not in e), None)

            assert "redirects to another host" in await eventually(failed_check, what="a failed health check")

            async def moved_checked() -> dict[str, Any] | None:
                detail = await system.server(moved["id"])
                return detail if detail["last_health_check"] is not None else None

            detail = await eventually(moved_checked, what="a health check of the moved URL")
            assert "GET /healthz" in health.requests
            assert detail["consecutive_failures"] == 0 and detail["last_error"] is None
        assert elsewhere.connections == 0


async def test_ssrf_connections_go_only_to_the_addresses_checked() -> None:
    """The connect-time check on its own: a client of the policy of an agent's server refuses the canary
    in every spelling and by every name that resolves to it; one of an admin's server reaches it."""
    async with running_canary() as canary:
        async with guarded_client(EgressPolicy(), httpx2.Limits()) as agents:
            for url in loopback_spellings(canary.port):
                # httpx2 itself refuses some spellings as invalid URLs (octal); the rest reach the check.
                with pytest.raises((httpx2.ConnectError, httpx2.InvalidURL)) as refused:
                    await agents.get(url)
                assert isinstance(refused.value, httpx2.InvalidURL) or egress_refused(refused.value), url
        assert canary.connections == 0
        async with guarded_client(EgressPolicy(private=True), httpx2.Limits()) as admins:
            assert (await admins.get(f"http://localhost:{canary.port}/health")).status_code == 200
        assert canary.requests == ["GET /health"]
