"""Scope step-up (issue 25; MCP authorization 2025-11-25, "Scope challenge handling"): an upstream's
403 ``insufficient_scope`` is tried once more only with a grant authorized since (never a refresh),
else the request learns the scope a new authorization must ask for (the grant's with the required
one, recorded for the gateway); a grant that already asked for that scope asks for nothing more, so
step-up happens at most once per scope. Upstream and token endpoint are ``httpx2.MockTransport``
handlers; ``tests/integration/test_upstream_scope_step_up.py`` uses a real peer."""

from __future__ import annotations

import dataclasses

import httpx2

from toolmesh.platform.store.upstream_tokens import UpstreamGrant
from toolmesh_session_worker.upstream.bearer import BearerAuth
from toolmesh_session_worker.upstream.challenges import MET, ScopeChallenge
from toolmesh_session_worker.upstream_grants import GrantKeeper

CHALLENGE = 'Bearer error="insufficient_scope", scope="admin", resource_metadata="https://mcp.example/.well-known/x"'
GRANT = UpstreamGrant(
    issuer="https://as.example",
    token_endpoint="https://as.example/token",
    access_token="at-0",
    client_id="toolmesh-client",
    refresh_token="rt-0",
    scope="mcp",
    requested_scope="mcp",
)


class Store:
    def __init__(self, grant: UpstreamGrant) -> None:
        self.grant = grant
        self.wanted: list[str] = []

    async def load(self) -> UpstreamGrant | None:
        return self.grant

    async def save(self, grant: UpstreamGrant) -> None:
        self.grant = grant

    async def want(self, scope: str) -> None:
        self.wanted.append(scope)


def _no_token_endpoint(request: httpx2.Request) -> httpx2.Response:
    raise AssertionError("a scope challenge must not refresh the token")


async def _keeper(store: Store) -> GrantKeeper:
    keeper = GrantKeeper(store, lambda: httpx2.AsyncClient(transport=httpx2.MockTransport(_no_token_endpoint)), "s1")
    await keeper.load()
    return keeper


async def _send(keeper: GrantKeeper, admins: set[str]) -> tuple[int, list[str], list[ScopeChallenge]]:
    """One request through ``BearerAuth`` to an upstream that serves only the tokens in ``admins``."""
    sent: list[str] = []

    def upstream(request: httpx2.Request) -> httpx2.Response:
        token = request.headers["authorization"].removeprefix("Bearer ")
        sent.append(token)
        return (
            httpx2.Response(200) if token in admins else httpx2.Response(403, headers={"WWW-Authenticate": CHALLENGE})
        )

    met: list[ScopeChallenge] = []
    listening = MET.set(met)
    try:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(upstream), auth=BearerAuth(keeper)) as client:
            status = (await client.post("https://mcp.example/mcp", json={"jsonrpc": "2.0"})).status_code
    finally:
        MET.reset(listening)
    return status, sent, met


async def test_a_scope_challenge_asks_for_the_granted_scope_with_the_required_one() -> None:
    store = Store(GRANT)
    status, sent, met = await _send(await _keeper(store), admins=set())
    assert status == 403 and sent == ["at-0"]  # not retried: no grant authorized since, no refresh
    assert met == [ScopeChallenge("admin", "mcp admin")] and store.wanted == ["mcp admin"]


async def test_a_grant_authorized_since_is_tried_once() -> None:
    store = Store(GRANT)
    keeper = await _keeper(store)
    store.grant = dataclasses.replace(GRANT, access_token="at-admin", scope="mcp admin", requested_scope="mcp admin")
    status, sent, met = await _send(keeper, admins={"at-admin"})
    assert status == 200 and sent == ["at-0", "at-admin"] and met == [] and store.wanted == []
    status, sent, met = await _send(keeper, admins=set())  # refused again: no third try
    assert status == 403 and sent == ["at-admin"] and met == [ScopeChallenge("admin", None)]


async def test_a_grant_that_asked_for_the_scope_asks_for_nothing_more() -> None:
    # The step-up was done and the authorization server granted less: asking again would loop.
    store = Store(dataclasses.replace(GRANT, scope="mcp", requested_scope="mcp admin"))
    status, sent, met = await _send(await _keeper(store), admins=set())
    assert status == 403 and sent == ["at-0"]
    assert met == [ScopeChallenge("admin", None)] and store.wanted == []


async def test_a_challenge_naming_no_usable_scope_asks_for_nothing() -> None:
    store = Store(GRANT)
    keeper = await _keeper(store)
    assert await keeper.challenged(None) == ScopeChallenge(None, None) and store.wanted == []
