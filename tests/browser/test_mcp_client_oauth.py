"""The ``mcp`` SDK's Python client signs in to a ``toolmesh up`` it has never seen, with its OAuth
client provider and a person in headless Chromium on the console's consent page (issue 26).

From the 401 of ``/mcp`` alone the client discovers the protected-resource and authorization-server
metadata, gets a client id (dynamic registration, or the URL of its Client ID Metadata Document
served over HTTPS), sends the browser to ``/authorize``; the person signs the consent page with an
API key and allows; the loopback callback catches the code; the client lists and calls tools, its
tokens are refreshed (the old refresh token stops working), and a revocation makes the next request
401. At one server's endpoint (``/mcp/demo``) the same sign-in gives a token for that endpoint only.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2
import mcp_types
import pytest
from mcp.client.auth import OAuthClientProvider
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientMetadata, OAuthToken
from playwright.async_api import BrowserContext

from tests.browser.client_document import make_authority, serving_document
from tests.browser.console import Toolmesh, start_toolmesh, stop_toolmesh
from tests.browser.sdk_client import Callback, ConsentBrowser, MemoryStorage, callback, chromium_context
from tests.peers.launch import DEMO_SERVER

pytestmark = pytest.mark.browser
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}},
}


@contextlib.contextmanager
def running_toolmesh(work: Path, settings: Mapping[str, str] | None = None) -> Iterator[Toolmesh]:
    """A fresh ``toolmesh up`` with the demo server registered as ``demo`` and connected."""
    toolmesh = start_toolmesh(work / "data", work / "up.log", settings)
    try:
        args = [str(DEMO_SERVER), "--transport", "stdio", "--name", "demo"]
        config = {"command": sys.executable, "args": args}
        created = toolmesh.register({"name": "demo", "transport_type": "STDIO", "connection_config": config})
        toolmesh.wait_connected(created["id"])
        yield toolmesh
    finally:
        stop_toolmesh(toolmesh)


@pytest.fixture
async def browser(chromium: Path, tmp_path: Path) -> AsyncIterator[BrowserContext]:
    async with chromium_context(chromium, tmp_path / "chromium-profile") as context:
        yield context


def client_metadata(client: Callback) -> OAuthClientMetadata:
    """What the client registers: a public native client with a loopback redirect URI."""
    return OAuthClientMetadata(
        client_name="SDK test client",
        redirect_uris=[client.redirect_uri],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )


class Recorder:
    """The paths of every request the client's HTTP client sent, the OAuth flow's included."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def saw(self, request: httpx2.Request) -> None:
        self.paths.append(request.url.path)


async def use_tools(
    url: str, provider: OAuthClientProvider, recorder: Recorder, endpoint: str = "/mcp"
) -> mcp_types.CallToolResult:
    """A session at ``endpoint`` through ``provider``: ``tools/list`` names the demo's echo, which is called."""
    async with (
        httpx2.AsyncClient(auth=provider, timeout=60, event_hooks={"request": [recorder.saw]}) as http,
        streamable_http_client(f"{url}{endpoint}", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        names = [tool.name for tool in (await session.list_tools()).tools]
        echo = next((name for name in names if name.endswith("echo")), None)
        assert echo is not None, names
        return await session.call_tool(echo, {"text": "signed in"})


async def mcp_status(url: str, access_token: str, endpoint: str = "/mcp") -> httpx2.Response:
    """One ``initialize`` POST to ``endpoint`` with ``access_token`` (the answer's status tells whether it works)."""
    headers = {"Authorization": f"Bearer {access_token}", "Accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient(timeout=30) as http:
        return await http.post(f"{url}{endpoint}", json=INITIALIZE, headers=headers)


def refused(response: httpx2.Response) -> bool:
    """A 401 that names the bad token (RFC 6750 ``invalid_token``)."""
    return response.status_code == 401 and 'error="invalid_token"' in response.headers.get("www-authenticate", "")


def text_of(result: mcp_types.CallToolResult) -> str:
    return "".join(part.text for part in result.content if isinstance(part, mcp_types.TextContent))


def authorize_paths(opened: list[str]) -> list[str]:
    return [urlsplit(url).path for url in opened]


def connected_apps(toolmesh: Toolmesh) -> list[dict[str, Any]]:
    with toolmesh.api() as api:
        response = api.get("/api/v1/auth/apps")
    assert response.status_code == 200, response.text
    apps: list[dict[str, Any]] = response.json()["apps"]
    return apps


async def test_the_sdk_client_registers_signs_in_calls_refreshes_and_is_revoked(
    browser: BrowserContext, tmp_path: Path
) -> None:
    with running_toolmesh(tmp_path) as toolmesh:
        url, storage, recorder = toolmesh.url, MemoryStorage(), Recorder()
        person = ConsentBrowser(browser, toolmesh.token)
        async with callback() as client:
            provider = OAuthClientProvider(f"{url}/mcp", client_metadata(client), storage, person.allow, client.code)
            result = await use_tools(url, provider, recorder)
            assert not result.is_error and "signed in" in text_of(result)
            assert authorize_paths(person.opened) == ["/authorize"] and person.errors == []
            for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-authorization-server"):
                assert path in recorder.paths, recorder.paths
            assert recorder.paths.count("/register") == 1 and recorder.paths.count("/token") == 1
            assert storage.client is not None and not storage.client.client_id.startswith("https:")
            first = storage.tokens[-1]
            assert first.access_token.startswith("tmo_") and (first.refresh_token or "").startswith("tmr_")
            [app] = connected_apps(toolmesh)
            assert (app["client_id"], app["client_name"]) == (storage.client.client_id, "SDK test client")
            assert app["resource"] == f"{url}/mcp" and app["scopes"] == ["mcp", "offline_access"]

            # The access token looks expired to the client: it refreshes before its next request, silently.
            provider.context.token_expiry_time = time.time() - 1
            result = await use_tools(url, provider, recorder)
            assert not result.is_error and recorder.paths.count("/token") == 2 and len(person.opened) == 1
            second = storage.tokens[-1]
            assert second.access_token != first.access_token and second.refresh_token != first.refresh_token
            assert (await mcp_status(url, second.access_token)).status_code == 200

            # Disconnected in the console's API: the next request is refused, and the client signs in again.
            with toolmesh.api() as api:
                assert api.delete(f"/api/v1/auth/apps/{app['id']}").status_code == 204
            assert refused(await mcp_status(url, second.access_token))
            result = await use_tools(url, provider, recorder)
            assert not result.is_error and len(person.opened) == 2 and recorder.paths.count("/register") == 1
            third = storage.tokens[-1]
            assert third.access_token not in (first.access_token, second.access_token)

        # The client revokes its grant itself (RFC 7009): its access token is refused at once.
        async with httpx2.AsyncClient(timeout=30) as http:
            revoked = await http.post(
                f"{url}/revoke", data={"token": third.refresh_token or "", "client_id": storage.client.client_id}
            )
        assert revoked.status_code == 200, revoked.text
        assert refused(await mcp_status(url, third.access_token))
        assert connected_apps(toolmesh) == []


async def test_the_sdk_client_signs_in_with_a_client_id_metadata_document(
    browser: BrowserContext, tmp_path: Path
) -> None:
    authority = make_authority(tmp_path / "tls")
    settings = {"TOOLMESH_EGRESS_CA_FILE": str(authority.ca), "TOOLMESH_UPSTREAM_PRIVATE_NETWORKS": "127.0.0.0/8"}
    with serving_document(authority) as served, running_toolmesh(tmp_path, settings) as toolmesh:
        url, storage, recorder = toolmesh.url, MemoryStorage(), Recorder()
        person = ConsentBrowser(browser, toolmesh.token)
        async with callback() as client:
            metadata = client_metadata(client)
            served.document = {
                "client_id": served.url,
                **metadata.model_dump(mode="json", exclude_none=True),
                "client_name": "CIMD test client",
            }
            provider = OAuthClientProvider(
                f"{url}/mcp", metadata, storage, person.allow, client.code, client_metadata_url=served.url
            )
            result = await use_tools(url, provider, recorder)
            denied = await person.decide(authorization_url(url, served.url, client.redirect_uri), "Deny")
        assert parse_qs(urlsplit(denied).query) == {"error": ["access_denied"], "state": ["deny"], "iss": [url]} | {
            "error_description": ["The person denied the request"]
        }
        assert not result.is_error and "signed in" in text_of(result)
        assert "/register" not in recorder.paths and served.fetches >= 1 and person.errors == []
        assert storage.client is not None and storage.client.client_id == served.url
        [app] = connected_apps(toolmesh)
        assert (app["client_id"], app["client_name"]) == (served.url, "CIMD test client")

        first = storage.tokens[-1]
        second = await refresh(url, served.url, first)
        assert (await mcp_status(url, second.access_token)).status_code == 200

        # The rotated refresh token no longer works; presented again it ends the grant (RFC 9700 §4.14.2).
        async with httpx2.AsyncClient(timeout=30) as http:
            replayed = await http.post(f"{url}/token", data=refresh_form(served.url, first, url))
        assert replayed.status_code == 400 and replayed.json()["error"] == "invalid_grant", replayed.text
        assert refused(await mcp_status(url, second.access_token))
        assert connected_apps(toolmesh) == []


async def test_the_sdk_client_signs_in_at_one_servers_endpoint_and_only_there(
    browser: BrowserContext, tmp_path: Path
) -> None:
    with running_toolmesh(tmp_path) as toolmesh:
        url, storage, recorder = toolmesh.url, MemoryStorage(), Recorder()
        person = ConsentBrowser(browser, toolmesh.token)
        async with callback() as client:
            endpoint = "/mcp/demo"
            provider = OAuthClientProvider(
                f"{url}{endpoint}", client_metadata(client), storage, person.allow, client.code
            )
            result = await use_tools(url, provider, recorder, endpoint)
        assert not result.is_error and "signed in" in text_of(result)
        assert "/.well-known/oauth-protected-resource/mcp/demo" in recorder.paths, recorder.paths
        assert parse_qs(urlsplit(person.opened[0]).query)["resource"] == [f"{url}{endpoint}"]
        [app] = connected_apps(toolmesh)
        assert app["resource"] == f"{url}{endpoint}"
        token = storage.tokens[-1].access_token
        assert (await mcp_status(url, token, endpoint)).status_code == 200
        assert refused(await mcp_status(url, token))


def authorization_url(url: str, client_id: str, redirect_uri: str) -> str:
    """An authorization request of ``client_id`` by hand (state ``deny``)."""
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "state": "deny",
        "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
        "code_challenge_method": "S256",
        "resource": f"{url}/mcp",
    }
    return f"{url}/authorize?{urlencode(query)}"


def refresh_form(client_id: str, token: OAuthToken, url: str) -> dict[str, str]:
    return {
        "grant_type": "refresh_token",
        "refresh_token": token.refresh_token or "",
        "client_id": client_id,
        "resource": f"{url}/mcp",
    }


async def refresh(url: str, client_id: str, token: OAuthToken) -> OAuthToken:
    """The token endpoint's answer to ``token``'s refresh token (rotated: both tokens are new)."""
    async with httpx2.AsyncClient(timeout=30) as http:
        answer = await http.post(f"{url}/token", data=refresh_form(client_id, token, url))
    assert answer.status_code == 200, answer.text
    assert answer.headers["cache-control"] == "no-store"
    fresh = OAuthToken.model_validate(answer.json())
    assert fresh.access_token != token.access_token and fresh.refresh_token not in (None, token.refresh_token)
    return fresh
