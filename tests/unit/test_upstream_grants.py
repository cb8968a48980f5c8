"""The session-worker's use of an upstream OAuth grant (issue 25): the bearer token on every request,
a refresh before expiry (within a minute, or half the token's life if shorter) and once on a 401, the
refreshed grant stored; a token endpoint that refuses leaves the 401 standing. The token endpoint and
the upstream are ``httpx2.MockTransport`` handlers here; the integration test uses a real peer."""

from __future__ import annotations

import dataclasses
import time
from urllib.parse import parse_qs

import httpx2
import pytest

from toolmesh.oauth_tokens import MAX_TOKEN_CHARS, choose_auth_method, granted
from toolmesh.platform.store.upstream_tokens import UpstreamGrant
from toolmesh.redaction import process_redactor
from toolmesh_session_worker.upstream.bearer import BearerAuth
from toolmesh_session_worker.upstream_grants import (
    AuthorizationNeeded,
    GrantKeeper,
    TriedGrant,
    authorized_since,
    identity,
    loaded_grants,
)

NOW = 1_000_000.0


class MemoryStore:
    def __init__(self, grant: UpstreamGrant | None) -> None:
        self.grant = grant
        self.saves = 0

    async def load(self) -> UpstreamGrant | None:
        return self.grant

    async def save(self, grant: UpstreamGrant) -> bool:
        if self.grant is None:  # dropped since it was loaded: an update finds no row
            return False
        self.grant = grant
        self.saves += 1
        return True


class TokenEndpoint:
    """Answers the refresh token grant with ``at-<n>``, or refuses when ``refuse``."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.forms: list[dict[str, list[str]]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.forms.append(parse_qs(request.content.decode()))
        if self.refuse:
            return httpx2.Response(400, json={"error": "invalid_grant"})
        return httpx2.Response(200, json={"access_token": f"at-{len(self.forms)}", "expires_in": 3600})


def grant(expires_in: float | None = 3600.0, refresh: str | None = "rt-0", lifetime: float = 3600.0) -> UpstreamGrant:
    return UpstreamGrant(
        issuer="https://as.example",
        token_endpoint="https://as.example/token",
        access_token="at-0",
        client_id="toolmesh-client",
        refresh_token=refresh,
        expires_at=NOW + expires_in if expires_in is not None else None,
        lifetime=lifetime,
        resource="https://mcp.example/mcp",
    )


def keeper(store: MemoryStore, endpoint: TokenEndpoint) -> GrantKeeper:
    return GrantKeeper(store, lambda: httpx2.AsyncClient(transport=httpx2.MockTransport(endpoint)), "s1", lambda: NOW)


async def test_a_fresh_token_is_sent_as_is() -> None:
    store, endpoint = MemoryStore(grant()), TokenEndpoint()
    grants = keeper(store, endpoint)
    await grants.load()
    assert await grants.access_token() == "at-0" and endpoint.forms == []


@pytest.mark.parametrize("expires_in", [30.0, 0.0, -10.0])
async def test_a_token_about_to_expire_is_refreshed_first_and_stored(expires_in: float) -> None:
    store, endpoint = MemoryStore(grant(expires_in)), TokenEndpoint()
    grants = keeper(store, endpoint)
    await grants.load()  # issued for an hour, within its last minute now
    assert await grants.access_token() == "at-1"
    assert endpoint.forms[0]["grant_type"] == ["refresh_token"] and endpoint.forms[0]["refresh_token"] == ["rt-0"]
    assert endpoint.forms[0]["resource"] == ["https://mcp.example/mcp"]
    assert store.saves == 1 and store.grant is not None and store.grant.refresh_token == "rt-0"  # kept


async def test_a_short_lived_token_is_not_refreshed_on_every_request() -> None:
    store, endpoint = MemoryStore(grant(30.0, lifetime=40.0)), TokenEndpoint()
    grants = keeper(store, endpoint)
    await grants.load()  # a 40 s token with 30 s left: refreshed in its last 20 s, not now
    assert await grants.access_token() == "at-0" and endpoint.forms == []
    store.grant = grant(15.0, lifetime=40.0)
    await grants.load()
    assert await grants.access_token() == "at-1"


async def test_a_401_is_retried_once_with_a_refreshed_token() -> None:
    store, endpoint = MemoryStore(grant()), TokenEndpoint()
    grants = keeper(store, endpoint)
    await grants.load()
    seen: list[str] = []

    def upstream(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.headers["authorization"])
        return httpx2.Response(200 if request.headers["authorization"] == "Bearer at-1" else 401)

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(upstream), auth=BearerAuth(grants)) as client:
        response = await client.post("https://mcp.example/mcp", json={"jsonrpc": "2.0"})
    assert response.status_code == 200 and seen == ["Bearer at-0", "Bearer at-1"]


async def test_a_refused_refresh_leaves_the_401() -> None:
    store, endpoint = MemoryStore(grant()), TokenEndpoint(refuse=True)
    grants = keeper(store, endpoint)
    await grants.load()

    def upstream(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(401)

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(upstream), auth=BearerAuth(grants)) as client:
        assert (await client.get("https://mcp.example/mcp")).status_code == 401
        assert (await client.get("https://mcp.example/mcp")).status_code == 401
    assert store.saves == 0 and len(endpoint.forms) == 1  # a refused refresh token is not tried again


async def test_a_grant_stored_since_is_taken_before_refreshing() -> None:
    store, endpoint = MemoryStore(grant()), TokenEndpoint()
    grants = keeper(store, endpoint)
    await grants.load()
    store.grant = UpstreamGrant(**{**grant().__dict__, "access_token": "at-reauthorized"})
    assert await grants.renewed("at-0") == "at-reauthorized" and endpoint.forms == []


async def test_an_oauth_server_without_a_grant_needs_authorization() -> None:
    with pytest.raises(AuthorizationNeeded, match="an owner or admin authorizes it"):
        await loaded_grants(MemoryStore(None), egress=None, server_id="s1")  # type: ignore[arg-type]
    with pytest.raises(AuthorizationNeeded, match="any user of the server authorizes it"):
        await loaded_grants(MemoryStore(None), egress=None, server_id="s1", per_user=True)  # type: ignore[arg-type]


def test_the_identity_is_read_from_the_auth_config() -> None:
    assert identity({"base_url": "x", "auth": {"mode": "oauth"}}) == "shared"
    assert identity({"base_url": "x", "auth": {"mode": "oauth", "identity": "per_user"}}) == "per_user"
    assert identity({"base_url": "x"}) is None


def test_token_endpoint_auth_method_follows_the_metadata() -> None:
    assert choose_auth_method(["client_secret_post"], has_secret=True) == "client_secret_post"
    assert choose_auth_method(None, has_secret=True) == "client_secret_basic"
    assert choose_auth_method(["client_secret_basic"], has_secret=False) == "none"


def test_a_refresh_without_a_new_refresh_token_keeps_the_old_one() -> None:
    fresh = granted(grant(), {"access_token": "at-9", "expires_in": 60}, now=NOW)
    assert fresh.refresh_token == "rt-0" and fresh.expires_at == NOW + 60 and fresh.lifetime == 60


async def test_a_grant_stored_during_a_failed_connect_is_noticed() -> None:
    assert await authorized_since(TriedGrant(None), MemoryStore(grant()))  # authorized while it connected
    assert not await authorized_since(TriedGrant(None), MemoryStore(None))
    assert not await authorized_since(TriedGrant("at-0"), MemoryStore(grant()))  # the very grant that failed
    assert not await authorized_since(None, MemoryStore(grant()))  # not an OAuth server


async def test_an_authorization_since_the_grant_was_loaded_wins_over_its_refresh() -> None:
    store, endpoint = MemoryStore(grant(expires_in=30.0)), TokenEndpoint()
    grants = keeper(store, endpoint)
    await grants.load()  # the session connected with account A
    store.grant = dataclasses.replace(grant(), access_token="at-B", refresh_token="rt-B")  # B authorized since
    assert await grants.access_token() == "at-B"  # A's token was due: B's is used, not A's refreshed
    assert store.grant is not None and store.grant.refresh_token == "rt-B" and endpoint.forms == []


async def test_a_dropped_grant_is_not_refreshed() -> None:
    store, endpoint = MemoryStore(grant(expires_in=30.0)), TokenEndpoint()
    grants = keeper(store, endpoint)
    await grants.load()
    store.grant = None  # the key was revoked or the server removed
    await grants.access_token()
    assert store.grant is None and endpoint.forms == []


async def test_a_grant_dropped_since_it_was_loaded_is_not_refreshed_into_use_again() -> None:
    """A revoked key's grant (its row deleted) that a session still holds: the refresh before expiry
    is the last use, its result is neither stored nor sent, and the session takes what is stored now."""
    store, endpoint = MemoryStore(grant(expires_in=30)), TokenEndpoint()
    grants = keeper(store, endpoint)
    await grants.load()
    store.grant = None  # the key was revoked: drop_principal_grants
    assert await grants.access_token() is None  # neither refreshed nor sent any more
    assert await grants.access_token() is None and endpoint.forms == []
    store.grant = grant()  # another principal's, for a per-user server's own session
    assert await grants.access_token() == "at-0"


async def test_an_authorization_server_issuing_one_second_tokens_does_not_grow_the_redactor() -> None:
    """A hostile authorization server answers every refresh with a token that lives a second: each
    request refreshes, and the log redactor forgets the replaced tokens instead of masking ever more."""
    clock = [time.time()]  # refreshed grants expire from the real time

    def one_second(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json={"access_token": f"short-{clock[0]:.0f}", "expires_in": 1})

    redactor = process_redactor()
    saved, redactor.retired_limit = redactor.retired_limit, 50
    try:
        store = MemoryStore(dataclasses.replace(grant(lifetime=1), expires_at=clock[0] + 1))
        transport = httpx2.MockTransport(one_second)
        grants = GrantKeeper(store, lambda: httpx2.AsyncClient(transport=transport), "s1", lambda: clock[0])
        await grants.load()
        before = len(redactor)
        for _ in range(300):
            clock[0] += 1
            assert (await grants.access_token() or "").startswith("short-")
        assert store.saves == 300
        assert len(redactor) - before <= 60
    finally:
        redactor.retired_limit = saved


async def test_a_token_over_the_size_limit_is_refused() -> None:
    def huge(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json={"access_token": "x" * (MAX_TOKEN_CHARS + 1), "expires_in": 3600})

    store = MemoryStore(grant(expires_in=30))
    grants = GrantKeeper(store, lambda: httpx2.AsyncClient(transport=httpx2.MockTransport(huge)), "s1", lambda: NOW)
    await grants.load()
    assert await grants.access_token() == "at-0" and store.saves == 0  # the refresh was refused
