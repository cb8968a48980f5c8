"""An MCP client signs in with OAuth through the console's consent page (issue 26), in a real headless
Chromium against ``toolmesh up``: /authorize sends the browser to the consent page, a person not
signed in enters their API key there, sees what the client asks, and "Allow" sends the browser to
the client's loopback redirect URI with a code whose token answers on /mcp; "Deny" answers
access_denied; unknown, used and refused requests say why; the connected app is listed (live for
the owner) and "Disconnect" ends its token; the console cannot be framed."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from playwright.sync_api import BrowserContext, Page, Playwright, expect, sync_playwright

from tests.browser.console import Console, Toolmesh, launch_chromium, start_toolmesh, stop_toolmesh
from tests.browser.oauth_client import Loopback, authorize, exchange, loopback, mcp_initialize, register
from tests.oidc_peer import oidc_provider_process
from toolmesh.platform.polling import wait_until
from toolmesh_cli.embedded import free_port

pytestmark = pytest.mark.browser
WAIT_MS = 60_000
CLIENT = "Browser Test Client"
SSO_SECRET = "secret-of-the-gateway-at-the-provider"


@pytest.fixture(scope="module")
def toolmesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Toolmesh]:
    work = tmp_path_factory.mktemp("consent")
    running = start_toolmesh(work / "data", work / "up.log")
    try:
        yield running
    finally:
        stop_toolmesh(running)


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(
    playwright: Playwright, chromium: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrowserContext]:
    context = launch_chromium(playwright, chromium, tmp_path_factory.mktemp("chromium-profile"))
    context.set_default_timeout(WAIT_MS)
    try:
        yield context
    finally:
        context.close()


@pytest.fixture(scope="module")
def client() -> Iterator[Loopback]:
    """The client's loopback redirect URI, up for the whole module."""
    with loopback() as target:
        yield target


@pytest.fixture(scope="module")
def client_id(toolmesh: Toolmesh, client: Loopback) -> str:
    """One registration for the module (registrations are rate-limited per address)."""
    return register(toolmesh, client.redirect_uri, CLIENT)


@pytest.fixture
def console(browser: BrowserContext, toolmesh: Toolmesh) -> Iterator[Console]:
    """A new tab (so a new sessionStorage: signed out)."""
    tab = Console(browser.new_page(), toolmesh)
    try:
        yield tab
    finally:
        assert tab.errors == [], tab.errors
        tab.page.close()


def user_key(toolmesh: Toolmesh, name: str, endpoints: list[str] | None = None) -> str:
    with toolmesh.api() as api:
        created = api.post("/api/v1/auth/keys", json={"name": name, "role": "user", "endpoints": endpoints})
    assert created.status_code == 201, created.text
    token: str = created.json()["token"]
    return token


def answer(page: Page, client: Loopback) -> dict[str, str]:
    """The query the browser reached the client's redirect URI with (after a real navigation)."""
    expect(page).to_have_url(re.compile(re.escape(client.redirect_uri) + r"\?"))
    query = urlsplit(page.url).query
    assert f"/cb?{query}" in client.seen, client.seen
    return {k: v[0] for k, v in parse_qs(query).items()}


def test_allow_as_a_person_not_signed_in_then_disconnect(
    browser: BrowserContext, console: Console, toolmesh: Toolmesh, client: Loopback, client_id: str
) -> None:
    owner = Console(browser.new_page(), toolmesh)
    try:
        owner.sign_in(toolmesh.token)
        owner.go("apps")
        expect(owner.page.locator("#apps-count")).to_have_text("No app is connected.")

        key = user_key(toolmesh, "ann")
        request = authorize(toolmesh, client_id, client.redirect_uri)
        assert request.location.startswith(f"{toolmesh.url}/ui/#/consent/"), request.location
        page = console.page
        page.goto(request.location)
        expect(page.get_by_role("heading", name="Allow an MCP client?")).to_be_visible()
        expect(page.get_by_role("button", name="Allow")).to_have_count(0)
        page.get_by_label("API key", exact=True).fill(key)
        console.shot("consent-sign-in")
        page.get_by_role("button", name="Sign in").click()

        expect(page.get_by_role("heading", name=f"Allow {CLIENT} to use toolmesh as you?")).to_be_visible()
        expect(page.locator("#consent-endpoint")).to_have_text("/mcp")
        expect(page.locator("#consent-redirect")).to_have_text(f"127.0.0.1:{client.port}")
        expect(page.locator("#consent-identity")).to_have_text("ann · user · default")
        expect(page.get_by_role("button", name="Sign out")).to_be_visible()  # signed in as usual
        assert console.unlabelled() == []
        console.shot("consent")
        page.get_by_role("button", name="Allow", exact=True).click()

        got = answer(page, client)
        assert got["state"] == request.state and got["iss"] == toolmesh.url and got["code"], got
        token = exchange(toolmesh, client_id, client.redirect_uri, got["code"], request.verifier)
        answered = mcp_initialize(toolmesh, token)
        assert answered.status_code == 200, answered.text

        row = owner.page.locator(f"tr[data-app='{CLIENT}']")
        expect(row).to_contain_text("ann")  # the owner's list hears app.connected
        expect(row).to_contain_text("/mcp")

        console.open("apps")  # back in the console, still signed in as ann
        mine = page.locator(f"tr[data-app='{CLIENT}']")
        expect(mine).to_contain_text("ann")
        expect(page.locator("#apps-count")).to_have_text("1 app")
        assert console.unlabelled() == []
        console.shot("connected-apps")
        mine.get_by_role("button", name=f"Disconnect {CLIENT}").click()
        page.get_by_role("dialog").get_by_role("button", name="Disconnect").click()
        expect(mine).to_have_count(0)
        expect(page.locator("#apps-count")).to_have_text("No app is connected.")
        expect(row).to_have_count(0)  # and app.disconnected
        refused = mcp_initialize(toolmesh, token)
        assert refused.status_code == 401, refused.text
        assert owner.errors == []
    finally:
        owner.page.close()


def test_deny_answers_access_denied_and_the_request_is_used_up(
    console: Console, toolmesh: Toolmesh, client: Loopback, client_id: str
) -> None:
    console.sign_in(toolmesh.token)
    request = authorize(toolmesh, client_id, client.redirect_uri)
    page = console.page
    page.goto(request.location)
    expect(page.locator("#consent-identity")).to_contain_text("owner")
    page.get_by_role("button", name="Deny").click()
    got = answer(page, client)
    assert got["error"] == "access_denied" and got["state"] == request.state and "code" not in got, got

    page.goto(request.location)  # the same request again: decided already
    expect(page.get_by_role("heading", name="This request cannot be answered")).to_be_visible()
    expect(page.get_by_role("main").get_by_role("alert")).to_contain_text("Authorization request not found")
    expect(page.get_by_role("button", name="Allow")).to_have_count(0)


def test_unknown_and_refused_requests_say_why(
    browser: BrowserContext, console: Console, toolmesh: Toolmesh, client: Loopback, client_id: str
) -> None:
    page = console.page
    console.sign_in(toolmesh.token)
    console.go(f"consent/{secrets.token_urlsafe(24)}")
    expect(page.get_by_role("main").get_by_role("alert")).to_contain_text("Authorization request not found")
    expect(page.get_by_role("main").get_by_role("alert")).to_contain_text("AUTHORIZATION_REQUEST_NOT_FOUND")
    console.shot("consent-unknown")

    nowhere = authorize(toolmesh, client_id, client.redirect_uri, endpoint="/mcp/nowhere")
    page.goto(nowhere.location)
    expect(page.locator("#consent-endpoint")).to_have_text("/mcp/nowhere")
    page.get_by_role("button", name="Allow", exact=True).click()
    expect(page.get_by_role("main").get_by_role("alert")).to_contain_text("No endpoint or server nowhere")
    expect(page.get_by_role("button", name="Allow", exact=True)).to_be_disabled()

    limited = Console(browser.new_page(), toolmesh)
    try:
        request = authorize(toolmesh, client_id, client.redirect_uri)
        limited.page.goto(request.location)
        limited.page.get_by_label("API key", exact=True).fill(user_key(toolmesh, "docs-only", ["docs"]))
        limited.page.get_by_role("button", name="Sign in").click()
        # a key limited to MCP endpoints signs the consent in, but may allow only its endpoints
        expect(limited.page.locator("#consent-endpoint")).to_have_text("/mcp")
        limited.page.get_by_role("button", name="Allow", exact=True).click()
        alert = limited.page.get_by_role("main").get_by_role("alert")
        expect(alert).to_contain_text("This key may not use /mcp; its endpoints: docs")
        expect(limited.page.get_by_role("button", name="Allow", exact=True)).to_be_disabled()
        limited.shot("consent-forbidden")
        assert limited.errors == []
    finally:
        limited.page.close()


def test_the_consent_page_cannot_be_framed(
    console: Console, toolmesh: Toolmesh, client: Loopback, client_id: str
) -> None:
    request = authorize(toolmesh, client_id, client.redirect_uri)
    served = httpx.get(request.location.split("#")[0])
    assert served.status_code == 200
    assert "frame-ancestors 'none'" in served.headers["content-security-policy"]
    assert served.headers["x-frame-options"] == "DENY"

    client.framed = request.location
    page = console.page
    page.goto(f"http://127.0.0.1:{client.port}/frame")
    frame = wait_until(lambda: next((f for f in page.frames if f != page.main_frame and f.url), None), 30)
    assert frame is not None
    frame.wait_for_load_state()
    assert not frame.url.startswith(toolmesh.url), frame.url  # blocked: an error page, not the console
    assert frame.get_by_role("button", name="Sign in").count() == 0


@pytest.fixture(scope="module")
def sso_toolmesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Toolmesh]:
    """A ``toolmesh up`` whose consent page signs people in at an OpenID Connect provider."""
    port = free_port()
    callback = f"http://127.0.0.1:{port}/oauth/sign-in/callback"
    with oidc_provider_process(client_id="toolmesh", client_secret=SSO_SECRET, redirect_uri=callback) as issuer:
        work = tmp_path_factory.mktemp("consent-sso")
        settings = {"TOOLMESH_JWT_ISSUER": issuer, "TOOLMESH_JWT_JWKS_URL": f"{issuer}/jwks"}
        settings |= {"TOOLMESH_OIDC_CLIENT_ID": "toolmesh", "TOOLMESH_OIDC_CLIENT_SECRET": SSO_SECRET}
        running = start_toolmesh(work / "data", work / "up.log", settings | {"TOOLMESH_OIDC_NAME": "Example SSO"}, port)
        try:
            yield running
        finally:
            stop_toolmesh(running)


def test_allow_after_signing_in_at_the_identity_provider(
    browser: BrowserContext, sso_toolmesh: Toolmesh, client: Loopback
) -> None:
    client_id = register(sso_toolmesh, client.redirect_uri, CLIENT)
    request = authorize(sso_toolmesh, client_id, client.redirect_uri)
    console = Console(browser.new_page(), sso_toolmesh)
    try:
        page = console.page
        page.goto(request.location)
        expect(page.get_by_label("API key", exact=True)).to_be_visible()  # a key still works
        page.get_by_role("link", name="Sign in with Example SSO").click()

        expect(page.get_by_role("heading", name=f"Allow {CLIENT} to use toolmesh as you?")).to_be_visible()
        expect(page.locator("#consent-identity")).to_have_text("alice@example.test · admin · default")
        expect(page.get_by_role("button", name="Sign out")).to_have_count(0)  # signed in for this request only
        assert console.unlabelled() == []
        console.shot("consent-identity-provider")
        page.get_by_role("button", name="Allow", exact=True).click()

        got = answer(page, client)
        assert got["state"] == request.state and got["code"], got
        token = exchange(sso_toolmesh, client_id, client.redirect_uri, got["code"], request.verifier)
        answered = mcp_initialize(sso_toolmesh, token)
        assert answered.status_code == 200, answered.text
        with sso_toolmesh.api() as api:
            apps = api.get("/api/v1/auth/apps").json()["apps"]
        people = [(a["key_name"], a["role"], a["namespace"]) for a in apps]
        assert people == [("alice@example.test", "admin", "default")]
        assert console.errors == []
    finally:
        console.page.close()
